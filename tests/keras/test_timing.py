"""Keras execution time: structure of the measurement (no timed asserts: the machine is shared)."""
import numpy as np
import pytest

keras = pytest.importorskip("keras")
if keras.config.backend() != "tensorflow":
    pytest.skip("these timing tests drive the tf.function path", allow_module_level=True)

from deeplite_like.backends.keras.latency import _percentile, measure_execution_time  # noqa: E402


@pytest.fixture()
def model():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.BatchNormalization(), keras.layers.Dense(4)])


def test_statistics_are_consistent(model):
    stats = measure_execution_time(model, np.ones((4, 8), dtype="float32"), min_run_time=0.02, min_blocks=4)
    assert stats.batch_size == 4 and stats.compiled == "tf.function"
    assert stats.times == len(stats.raw_s) >= 4 and stats.number_per_run >= 1
    assert stats.min_s <= stats.median_s and stats.iqr_s >= 0 and stats.min_s > 0
    assert stats.median_s == _percentile(list(stats.raw_s), 50)
    assert stats.per_sample_s == pytest.approx(stats.median_s / 4)
    assert stats.throughput == pytest.approx(4 / stats.median_s)
    assert stats.num_threads >= 1 and stats.device.startswith("cpu")


def test_percentile_interpolates_like_numpy():
    values = [0.4, 0.1, 0.3, 0.2]
    for q in (25, 50, 75):
        assert _percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    # by hand: sorted 0.1 0.2 0.3 0.4, position (4-1)*0.25 = 0.75 -> 0.1 + 0.75*0.1 = 0.175
    assert _percentile(values, 25) == pytest.approx(0.175)


def test_the_model_is_left_as_found(model):
    model.compile(optimizer="sgd", loss="mse")
    before = [v.numpy().copy() for v in model.weights]
    attributes = set(vars(model))
    measure_execution_time(model, np.ones((2, 8), dtype="float32"), min_run_time=0.01, training=True)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.weights))  # BN statistics restored
    assert set(vars(model)) == attributes and model.predict_function is None


def test_a_different_thread_count_is_refused_with_how_to_set_it(model):
    stats = measure_execution_time(model, np.ones((1, 8), dtype="float32"), min_run_time=0.01)
    with pytest.raises(ValueError, match=r"tf.config.threading.set_intra_op_parallelism_threads"):
        measure_execution_time(model, np.ones((1, 8), dtype="float32"), num_threads=stats.num_threads + 1)


@pytest.mark.parametrize("option, message", [({"min_run_time": 0}, "min_run_time must be > 0"),
                                             ({"warmup": 0}, "warmup must be >= 1"),
                                             ({"min_blocks": 1}, "min_blocks must be >= 2")])
def test_bad_options_are_refused(model, option, message):
    with pytest.raises(ValueError, match=message):
        measure_execution_time(model, np.ones((1, 8), dtype="float32"), **option)


def test_a_missing_gpu_is_refused(model):
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match=r"^device=.gpu.: TensorFlow sees no such device here .*Available: .cpu."):
        measure_execution_time(model, np.ones((1, 8), dtype="float32"), device="gpu", min_run_time=0.01)


def test_forwards_are_counted_and_the_first_call_is_a_warmup(model):
    stats = measure_execution_time(model, np.ones((2, 8), dtype="float32"), warmup=2, min_run_time=0.02, min_blocks=3)
    # warmup=2: the tracing call and one more, timed alone to size the blocks; then the blocks
    assert stats.warmup_forwards == 2 and stats.times >= 3
    assert stats.forwards == 2 + stats.times * stats.number_per_run
    assert stats.q1_s <= stats.median_s <= stats.q3_s and stats.iqr_s == pytest.approx(stats.q3_s - stats.q1_s)


def test_auto_threads_accepts_tensorflows_count_and_says_so(model):
    stats = measure_execution_time(model, np.ones((1, 8), dtype="float32"), min_run_time=0.01, num_threads="auto")
    assert stats.threads_reason == (f"num_threads='auto': TensorFlow's {stats.num_threads} threads (fixed when its "
                                    "runtime started)")
