"""Every Keras measurement leaves a layer's non-trainable state as found, in inference mode too.

A layer that counts its calls (``assign_add`` on a non-trainable variable in ``call``) writes it
in inference; counting, memory, timing, evaluation and ``compute_network_status`` must put it
back (before, only training-mode runs restored values).
"""
import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like import ComputeEvalMetric  # noqa: E402
from deeplite_like.backends.keras import KerasProfiler, accuracy, count_ops  # noqa: E402
from deeplite_like.backends.keras.compute import evaluate  # noqa: E402
from deeplite_like.backends.keras.latency import measure_execution_time  # noqa: E402
from deeplite_like.backends.keras.memory import peak_activation_memory  # noqa: E402


class CallCounter(keras.layers.Layer):
    """Dense(6) that counts its calls and keeps its last output's first row, in any mode."""

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 6), initializer="ones")
        self.calls = self.add_weight(shape=(), initializer="zeros", trainable=False, name="calls")
        self.last = self.add_weight(shape=(6,), initializer="zeros", trainable=False, name="last")

    def call(self, x):
        out = keras.ops.matmul(x, self.kernel)
        self.calls.assign_add(1.0)
        self.last.assign(out[0])
        return out


def counter_model():
    inputs = keras.Input((4,))
    return keras.Model(inputs, CallCounter()(inputs))


def assert_untouched(model):
    layer = model.layers[-1]
    assert float(keras.ops.convert_to_numpy(layer.calls)) == 0.0
    assert np.array_equal(keras.ops.convert_to_numpy(layer.last), np.zeros(6, dtype="float32"))


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # (CallCounter has no FLOP formula: untracked)

X = np.ones((2, 4), dtype="float32")
SPLITS = {"train": [(X, np.array([0, 1]))], "test": [(X, np.array([0, 1]))]}


def test_the_counter_really_moves_in_inference():
    model = counter_model()
    model(X, training=False)
    assert float(keras.ops.convert_to_numpy(model.layers[-1].calls)) == 1.0  # else the tests below prove nothing


@pytest.mark.parametrize("measure", ["count", "memory", "timing", "evaluate"])
def test_each_measurement_restores_inference_state(measure):
    model = counter_model()
    run = {
        "count": lambda: count_ops(model, X),
        "memory": lambda: peak_activation_memory(model, X),
        "timing": lambda: measure_execution_time(model, X, warmup=1, min_run_time=0.01, min_blocks=2),
        "evaluate": lambda: evaluate(model, SPLITS["test"], metrics=("top1",)),
    }[measure]
    run()
    assert_untouched(model)


def test_compute_network_status_restores_inference_state():
    model = counter_model()
    profiler = KerasProfiler(model, SPLITS)
    profiler.register_profiler_function(ComputeEvalMetric(accuracy, "top1", unit_name="%"))
    report = profiler.compute_network_status(batch_size=2, min_run_time=0.02)
    keys = {row["key"] for row in report.to_dict()["metrics"]}
    assert {"macs", "execution_time", "peak_activation_memory", "top1"} <= keys  # every measurement ran
    assert_untouched(model)
