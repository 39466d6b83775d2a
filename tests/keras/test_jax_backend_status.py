"""Keras on JAX, with JAX really installed (a child process with ``KERAS_BACKEND=jax``; the user's
process is never switched): ``compute_network_status()`` counts MACs and FLOPs from the traced
program and measures every metric: the execution time of the ``jax.jit`` forward and the compiled
program's own memory (``compiled.memory_analysis()``); a leaf layer doing its own arithmetic is
counted, not untracked.
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
MEASURED = ("peak_activation_memory", "memory_footprint", "execution_time", "throughput")

_CHILD = r"""
import json, warnings
import numpy as np
import keras
from deeplite_like.backends.keras import KerasProfiler
from deeplite_like.backends.keras.counting import count_ops

L = keras.layers
MEASURED = %r


class Scale(L.Layer):
    def call(self, x):
        return x * 2.0


class Branchy(L.Layer):  # runs eagerly, cannot be traced: a Python `if` on a value
    def call(self, x):
        return x * 2.0 if float(keras.ops.sum(x)) > 0 else x


model = keras.Sequential([keras.Input((4,)), L.Dense(3, name="fc1"), L.ReLU(), L.Dense(2, name="fc2")])
before = [v.numpy().copy() for v in model.weights]
profiler = KerasProfiler.from_inputs(model, np.ones((2, 4), "float32"))
status = profiler.compute_network_status(batch_size=2)
report = {"backend": keras.config.backend(), "macs": status["macs"], "flops": status["flops"],
          "params": status["total_params"], "text": str(status),
          "keys": {name: [profiler.get_status(name).value, profiler.get_status(name).details.get("not_measured")]
                   for name in MEASURED},
          "memory": profiler.get_status("peak_activation_memory").details,
          "timing": {k: profiler.get_status("execution_time").details[k] for k in ("compiled", "warmup_forwards")},
          "untouched": all(bool((a == v.numpy()).all()) for a, v in zip(before, model.weights))}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scale = count_ops(keras.Sequential([keras.Input((4,)), Scale(name="scale")]), (2, 4))
report["scale"] = [scale.macs, scale.flops, scale.untracked, scale.by_module["scale"].flops, len(caught)]
class Spectrum(L.Layer):  # its own FFT: a primitive with no price
    def call(self, x):
        real, imag = keras.ops.fft((x, keras.ops.zeros_like(x)))
        return real + imag


hidden = keras.Sequential([keras.Input((8,)), Spectrum(name="spectrum")])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    hidden_status = KerasProfiler.from_inputs(hidden, np.ones((2, 8), "float32")).compute_network_status(
        batch_size=2)
report["hidden"] = [line for line in str(hidden_status).splitlines() if "FLOPs" in line or "MACs" in line]
report["hidden_untracked"] = count_ops(hidden, (2, 8), warn_untracked=False).untracked
try:
    count_ops(Branchy(name="branchy"), (2, 4))
except Exception as exc:
    report["untraceable"] = [type(exc).__name__, str(exc)]
print(json.dumps(report))
""" % (MEASURED,)


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT))  # the child's environment only
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # (one child: about 5 s here)
def test_network_status_on_jax_measures_memory_and_time(report):
    # Dense 4 -> 3 and 3 -> 2 on batch 2: MACs 2*(12 + 6) = 36; FLOPs 72 + 6 + 4 (biases) + 6 (relu) = 88;
    # params 15 + 8 = 23
    assert report["backend"] == "jax"
    assert (report["macs"], report["flops"], report["params"]) == (36, 88, 23)
    for name in MEASURED:
        value, reason = report["keys"][name]
        assert value is not None and value > 0 and reason is None, name
    # the compiled program's buffers: the input 2x4 float32 (32 bytes) + XLA's temporaries (fc1's 2x3 output,
    # 24 bytes: the ReLU is fused into it) + the output 2x2 (16) = 72; parameters (23 x 4 = 92) left out
    assert report["keys"]["peak_activation_memory"][0] == 72
    assert (report["memory"]["input_bytes"], report["memory"]["output_bytes"]) == (32, 16)
    assert report["memory"]["method"] == "XLA buffer assignment (compiled.memory_analysis)"
    # footprint = parameters 92 + peak 72
    assert report["keys"]["memory_footprint"][0] == 164
    # XLA's own sizes: arguments = parameter bytes 92 + input bytes 32 = 124 exactly; output 16; temp 24; no
    # aliasing; generated code 0 on the CPU client (the compiled code is not a device buffer there)
    sizes = report["memory"]["program_bytes"]
    assert (sizes["argument"], sizes["output"], sizes["temp"], sizes["alias"]) == (92 + 32, 16, 24, 0)
    assert sizes["generated_code"] >= 0
    # timed through jax.jit; the first call (the compilation) is a warm-up
    assert report["timing"]["compiled"] == "jax.jit" and report["timing"]["warmup_forwards"] >= 1
    assert report["untouched"]


def test_the_reason_names_the_backend_and_what_to_do():
    assert all(unmeasured_reason("memory", backend) is None for backend in ("tensorflow", "torch", "jax"))
    assert unmeasured_reason("execution time", "openvino") == (
        "execution time is not available on Keras' 'openvino' backend (measured on tensorflow, torch and jax): "
        "run Keras with KERAS_BACKEND=tensorflow, torch or jax to measure it")


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


@pytest.mark.slow
def test_arithmetic_no_price_covers_is_named_and_its_totals_marked_at_least(report):
    # the layer's own fft has no price: named in untracked by primitive (1 call), and the status table's
    # MACs / FLOPs show ">=" (the add real + imag, 16 FLOPs, is counted)
    assert report["hidden_untracked"] == {"jax.fft": 1}
    assert report["hidden"] and all(">=" in line for line in report["hidden"]), report["hidden"]
