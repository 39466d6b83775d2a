"""One clear error per bad input on the Keras Python API: the culprit and the fix, no terminal escape codes."""
import numpy as np
import pytest

keras = pytest.importorskip("keras")

import deeplite_like  # noqa: E402
from deeplite_like import ForwardError  # noqa: E402
from deeplite_like.backends.keras import KerasProfiler, count_ops  # noqa: E402
from deeplite_like.backends.keras._tf import keras_message, strip_ansi  # noqa: E402
from deeplite_like.timing import max_threads  # noqa: E402

FAST = {"min_run_time": 0.01}


def net():
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="tiny")


def batches(n=2, width=4):
    return {"test": [(np.ones((n, width), "float32"), np.zeros(n))]}


def gpus():
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        return len(tf.config.list_logical_devices("GPU"))
    import torch

    return torch.cuda.device_count()


@pytest.mark.skipif(gpus() > 0, reason="needs a machine without a GPU")
@pytest.mark.parametrize("device", ["cuda", "gpu", "cuda:1"])
def test_a_missing_gpu_names_device_and_what_is_available_before_anything_runs(device):
    profiler = KerasProfiler(net(), batches())
    with pytest.raises(ValueError) as error:
        profiler.compute_network_status(device=device, **FAST)
    message = str(error.value)
    assert message.startswith(f"device={device!r}: ") and "sees no such device here (" in message
    assert "Available: 'cpu'. Pass device='cpu', or leave device out" in message
    assert all(profiler.get_status(k).value is None for k in profiler.status_keys)


def test_meta_and_unknown_devices_are_refused_by_name():
    profiler = KerasProfiler(net(), batches())
    if keras.config.backend() == "tensorflow":
        with pytest.raises(ValueError, match=r"^device='meta': a Keras model cannot be timed on the meta device"):
            profiler.compute_status("execution_time", device="meta", **FAST)
    with pytest.raises(ValueError, match=r"device='tpu'"):
        profiler.compute_status("execution_time", device="tpu", **FAST)


@pytest.mark.parametrize("threads", [100000, max_threads() + 1])
def test_num_threads_far_above_the_cpus_is_refused_without_advising_to_set_it(threads):
    profiler = KerasProfiler(net(), batches())
    with pytest.raises(ValueError) as error:
        profiler.compute_network_status(num_threads=threads, **FAST)
    assert str(error.value).startswith(f"num_threads={threads} is more than 4 threads per CPU")
    assert "set_intra_op_parallelism_threads" not in str(error.value)
    assert profiler.get_status("macs").value is None


def test_construction_types_are_checked():
    with pytest.raises(TypeError, match=r"^KerasProfiler\(forward_pass=...\) must be a deeplite_like.ForwardPass, got "
                                        r"str 'x'; .*ForwardPass\(inputs='x'\)$"):
        KerasProfiler(net(), batches(), forward_pass="x")
    with pytest.raises(TypeError, match=r"^KerasProfiler\(model, data_splits\): data_splits must be a dict"):
        KerasProfiler(net(), [(np.ones((2, 4), "float32"), np.zeros(2))])
    with pytest.raises(TypeError, match=r"wrap a model in a profiler first, e.g. teacher.compare\(KerasProfiler\("):
        KerasProfiler(net(), batches()).compare(net())


# -- failures of the model: one ForwardError, one line, no escape codes ---------------------------
def test_get_model_profile_wraps_a_failing_call_in_the_shared_forward_error():
    with pytest.raises(ForwardError) as error:
        deeplite_like.get_model_profile(net(), args=(np.ones((2, 7), "float32"),), print_profile=False)
    message = str(error.value)
    assert "\x1b" not in message and "\n" not in message
    assert message.startswith("the call of Sequential 'tiny' on tuple(ndarray[float32, 2x7]) failed: ValueError: ")
    assert "expected axis -1 of input shape to have value 4" in message
    assert ("Check that the inputs given to get_model_profile have the shapes and dtypes the model expects "
            "(model 'tiny' expects an input of shape (None, 4))") in message
    assert "Arguments received by" not in message and error.value.__cause__ is not None


def test_the_inputs_hint_names_the_api_and_has_no_escape_codes():
    bad = np.ones((2, 5), "float32")
    with pytest.raises(ForwardError) as error:
        count_ops(net(), bad)
    assert "\x1b" not in str(error.value) and "Check that the inputs given to count_ops have" in str(error.value)
    profiler = KerasProfiler(net(), {"test": [bad]})
    with pytest.raises(ForwardError) as error:
        profiler.compute_network_status(**FAST)
    assert "\x1b" not in str(error.value) and "\n" not in str(error.value)
    assert "Check that the inputs given to compute_network_status (the first batch of the data split" in str(error.value)


def test_keras_message_keeps_the_sentence_and_where():
    raw = ValueError("Exception encountered when calling Dense.call().\n\n\x1b[1mInput 0 is incompatible: expected "
                     "4, got 5\x1b[0m\n\nArguments received by Dense.call():\n  • inputs=tf.Tensor(shape=(1, 5))")
    assert keras_message(raw) == "ValueError: Input 0 is incompatible: expected 4, got 5 (in Dense.call())"
    assert keras_message(TypeError("plain\n  text")) == "TypeError: plain text"
    assert strip_ansi("\x1b[31;1mred\x1b[0m") == "red"
