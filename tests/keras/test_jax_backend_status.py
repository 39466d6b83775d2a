"""Keras on JAX (no operator hook, no memory or timing tools here): ``compute_network_status()``
never crashes; memory, footprint, execution time and throughput are reported "not measured",
with the reason. JAX is not installed: the backend check is monkeypatched (``keras.config.backend``).
"""
import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras import KerasProfiler  # noqa: E402
from deeplite_like.backends.keras.latency import unmeasured_reason  # noqa: E402

L = keras.layers
NOT_MEASURED = ("peak_activation_memory", "memory_footprint", "execution_time", "throughput")


@pytest.fixture()
def jax_backend(monkeypatch):
    monkeypatch.setattr(keras.config, "backend", lambda: "jax")


def _model():
    return keras.Sequential([keras.Input((4,)), L.Dense(3, name="fc1"), L.ReLU(), L.Dense(2, name="fc2")])


def test_network_status_on_jax_reports_memory_and_time_as_not_measured(jax_backend):
    # Dense 4 -> 3 and 3 -> 2 on batch 2: MACs 2*(12 + 6) = 36; FLOPs 72 + 6 + 4 (biases) + 6 (relu) = 88;
    # params 15 + 8 = 23
    profiler = KerasProfiler.from_inputs(_model(), np.ones((2, 4), "float32"))
    status = profiler.compute_network_status(batch_size=2)
    assert (status["macs"], status["flops"], status["total_params"]) == (36, 88, 23)
    for name in NOT_MEASURED:
        key = profiler.get_status(name)
        assert key.value is None, name
        assert "not available on Keras' 'jax' backend" in key.details["not_measured"], name
    text = str(status)  # the StatusReport
    assert "| Execution time            | not measured |" in text
    assert "- Memory footprint, Peak activation memory: not measured: memory is not available on Keras' 'jax'" in text


def test_the_reason_names_the_backend_and_what_to_do():
    assert unmeasured_reason("memory", "tensorflow") is None and unmeasured_reason("memory", "torch") is None
    assert unmeasured_reason("execution time", "jax") == (
        "execution time is not available on Keras' 'jax' backend (measured on tensorflow and torch): run Keras "
        "with KERAS_BACKEND=tensorflow or torch to measure it")


def test_custom_layer_arithmetic_without_an_operator_hook_is_untracked_not_silent(jax_backend):
    # no operator hook on JAX: a user layer doing its own arithmetic is listed as untracked (by class)
    class Scale(L.Layer):
        def call(self, x):
            return x * 2.0

    from deeplite_like.backends.keras.counting import UntrackedLayerWarning, count_ops

    model = keras.Sequential([keras.Input((4,)), Scale(name="scale")])
    with pytest.warns(UntrackedLayerWarning, match=r"Scale \(1 call\)"):
        result = count_ops(model, (2, 4))
    assert result.untracked == {"Scale": 1} and result.flops == 0
