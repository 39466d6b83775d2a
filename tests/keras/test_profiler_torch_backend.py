"""``KerasProfiler`` on Keras' torch backend, run in a child process (the backend is chosen at import).

The child sets ``KERAS_BACKEND=torch`` in *its own* environment; the profiler itself never
sets it. The numbers are the TensorFlow tests' hand derivations: the same model gives the same
parameters, MACs and (here) the same peak bytes, measured by the PyTorch backend's tracker.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("keras")
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys
import numpy as np
import keras
from deeplite_like import profiler_for
from deeplite_like.backends.keras import KerasProfiler

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu", name="fc1"),
                          keras.layers.Dense(4, name="fc2")])
model.get_layer("fc2").trainable = False
weights = [w.numpy().copy() for w in model.weights]
x = np.random.default_rng(0).standard_normal((6, 8), dtype=np.float32)
profiler = profiler_for(model, {"test": (x, np.zeros(6, dtype="int64"))}, name="dense")
profiler.compute_network_status(batch_size=2, min_run_time=0.02)
status = profiler.status_to_dict()
print(json.dumps({
    "backend": keras.config.backend(),
    "profiler": type(profiler).__name__,
    "tensorflow_imported": "tensorflow" in sys.modules,
    "values": {k: status[k] for k in ("macs", "flops", "total_params", "trainable_params", "model_size",
                                      "peak_activation_memory", "memory_footprint")},
    "timed": status["execution_time"] > 0,
    "compiled": profiler.get_status("execution_time").details["compiled"],
    "memory_method": profiler.get_status("peak_activation_memory").details["method"],
    "untouched": all(np.array_equal(a, w.numpy()) for a, w in zip(weights, model.weights))
                 and [l.trainable for l in model.layers] == [True, False],
}))
"""


@pytest.fixture(scope="module")
def child() -> dict:
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # (about 4 s here)
def test_the_torch_backend_is_profiled_without_tensorflow(child):
    assert child["backend"] == "torch" and child["profiler"] == "KerasProfiler"
    assert not child["tensorflow_imported"]
    assert child["compiled"] == "torch.no_grad eager" and child["memory_method"].startswith("eager torch")
    assert child["timed"] and child["untouched"]


def test_the_torch_backend_gives_the_hand_derived_numbers(child):
    # Dense(8 -> 16) + ReLU + Dense(16 -> 4) (fc2 frozen), batch 2:
    #   params 8*16 + 16 = 144 and 16*4 + 4 = 68 -> 212 (68 frozen), fp32 848 B
    #   MACs 2 * (128 + 64) = 384; FLOPs 2*384 + biases 2*(16 + 4) = 40 + ReLU 2*16 = 32 -> 840
    #   peak: x 64 B + two 2x16 fp32 tensors of 128 B (matmul output and bias add) = 320 B
    #   (the graph simulation on TensorFlow gives the same, tests/keras/test_memory.py)
    assert child["values"] == {"macs": 384, "flops": 840, "total_params": 212, "trainable_params": 144,
                               "model_size": 848, "peak_activation_memory": 320, "memory_footprint": 848 + 320}


SHARED_CHILD = r"""
import json
import numpy as np
import keras
from deeplite_like.backends.keras import KerasProfiler
from deeplite_like.backends.keras.compute import ComputeComplexity, ComputeLayerwiseSummary, ComputeMemory


class CountedDense(keras.layers.Dense):
    calls = 0

    def call(self, x):
        CountedDense.calls += 1
        return super().call(x)


model = keras.Sequential([keras.Input((8,)), CountedDense(16, activation="relu", name="fc1"),
                          keras.layers.Dense(4, name="fc2")])
x = np.ones((2, 8), "float32")
model(x)
profiler = KerasProfiler(model, {"test": [(x, np.zeros(2))]}, register_defaults=False)
for function in (ComputeComplexity, ComputeLayerwiseSummary, ComputeMemory):
    profiler.register_default_function(function())
CountedDense.calls = 0
profiler.compute_network_status(batch_size=2)
status = profiler.status_to_dict()
print(json.dumps({"calls": CountedDense.calls, "macs": status["macs"], "peak": status["peak_activation_memory"],
                  "peak_at": profiler.get_status("peak_activation_memory").details["peak_at"]}))
"""


@pytest.mark.slow  # (about 4 s here)
def test_macs_layers_and_memory_share_one_recorded_forward_on_torch():
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", SHARED_CHILD], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    child = json.loads(result.stdout.strip().splitlines()[-1])
    # One forward for the three keys (two before: memory ran its own), with the numbers derived above:
    # 384 MACs; peak 320 B = x 64 B + fc1's matmul output and bias add, 2x16 fp32 = 128 B each,
    # reached inside fc1 (the recorded layer running names the peak; it was '' before).
    assert child["calls"] == 1
    assert child["macs"] == 384 and child["peak"] == 320
    assert child["peak_at"] == "aten.add.Tensor in 'fc1'"
