"""Keras on JAX, with JAX really installed (a child process with ``KERAS_BACKEND=jax``; the user's
process is never switched): ``compute_network_status()`` counts MACs and FLOPs from the traced
program and never crashes; memory, footprint, execution time and throughput are reported "not
measured", with the reason; a leaf layer doing its own arithmetic is counted, not untracked.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("keras")
pytest.importorskip("jax")

from deeplite_like.backends.keras.latency import unmeasured_reason  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOT_MEASURED = ("peak_activation_memory", "memory_footprint", "execution_time", "throughput")

_CHILD = r"""
import json, warnings
import numpy as np
import keras
from deeplite_like.backends.keras import KerasProfiler
from deeplite_like.backends.keras.counting import count_ops

L = keras.layers
NOT_MEASURED = %r


class Scale(L.Layer):
    def call(self, x):
        return x * 2.0


class Branchy(L.Layer):  # runs eagerly, cannot be traced: a Python `if` on a value
    def call(self, x):
        return x * 2.0 if float(keras.ops.sum(x)) > 0 else x


model = keras.Sequential([keras.Input((4,)), L.Dense(3, name="fc1"), L.ReLU(), L.Dense(2, name="fc2")])
profiler = KerasProfiler.from_inputs(model, np.ones((2, 4), "float32"))
status = profiler.compute_network_status(batch_size=2)
report = {"backend": keras.config.backend(), "macs": status["macs"], "flops": status["flops"],
          "params": status["total_params"], "text": str(status),
          "keys": {name: [profiler.get_status(name).value, profiler.get_status(name).details.get("not_measured")]
                   for name in NOT_MEASURED}}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scale = count_ops(keras.Sequential([keras.Input((4,)), Scale(name="scale")]), (2, 4))
report["scale"] = [scale.macs, scale.flops, scale.untracked, scale.by_module["scale"].flops, len(caught)]
try:
    count_ops(Branchy(name="branchy"), (2, 4))
except Exception as exc:
    report["untraceable"] = [type(exc).__name__, str(exc)]
print(json.dumps(report))
""" % (NOT_MEASURED,)


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT))  # the child's environment only
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # (one child: about 5 s here)
def test_network_status_on_jax_reports_memory_and_time_as_not_measured(report):
    # Dense 4 -> 3 and 3 -> 2 on batch 2: MACs 2*(12 + 6) = 36; FLOPs 72 + 6 + 4 (biases) + 6 (relu) = 88;
    # params 15 + 8 = 23
    assert report["backend"] == "jax"
    assert (report["macs"], report["flops"], report["params"]) == (36, 88, 23)
    for name in NOT_MEASURED:
        value, reason = report["keys"][name]
        assert value is None, name
        assert "not available on Keras' 'jax' backend" in reason, name
    assert "| Execution time            | not measured |" in report["text"]
    assert ("- Memory footprint, Peak activation memory: not measured: memory is not available on Keras' 'jax'"
            in report["text"])


def test_the_reason_names_the_backend_and_what_to_do():
    assert unmeasured_reason("memory", "tensorflow") is None and unmeasured_reason("memory", "torch") is None
    assert unmeasured_reason("execution time", "jax") == (
        "execution time is not available on Keras' 'jax' backend (measured on tensorflow and torch): run Keras "
        "with KERAS_BACKEND=tensorflow or torch to measure it")


@pytest.mark.slow
def test_a_leaf_layer_doing_its_own_arithmetic_is_counted_from_the_traced_program(report):
    # x * 2.0 on (2, 4): one mul per element, 8 FLOPs, 0 MACs; nothing untracked, no warning
    assert report["scale"] == [0, 8, {}, 8, 0]


@pytest.mark.slow
def test_a_model_jax_cannot_trace_raises_a_forward_error_naming_the_tracer(report):
    kind, message = report["untraceable"]
    assert kind == "ForwardError"
    # the layer's call takes no `training`: the trace fails on the Python `float()`, not on the argument
    assert message.startswith("tracing Branchy 'branchy' with jax.make_jaxpr failed: ConcretizationTypeError")
    assert "must be traceable (keras.ops.cond" in message and "KERAS_BACKEND=tensorflow or torch" in message
