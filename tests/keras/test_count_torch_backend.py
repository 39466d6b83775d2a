"""Keras 3 on its torch backend: the analytic count agrees with the torch engine's count of the
very same Keras model (whose layers are then ``torch.nn.Module``s running aten operators).

Runs in a child process: the test sets ``KERAS_BACKEND=torch`` for the child only (a Keras
backend is chosen once per process, at import).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("keras")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import json, warnings
import keras, torch
from deeplite_like.backends.keras.counting import CountingError, count_ops
from deeplite_like.backends.torch import count_ops as torch_count_ops

L = keras.layers


class Attention(L.Layer):
    # Dense sublayers for Q, K, V and keras.ops.matmul in its own call (priced op by op)

    def __init__(self, d, **kwargs):
        super().__init__(**kwargs)
        self.d = d
        self.q, self.k, self.v = L.Dense(d), L.Dense(d), L.Dense(d)

    def call(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = keras.ops.matmul(q, keras.ops.transpose(k, (0, 2, 1))) / 4.0
        return keras.ops.matmul(keras.ops.softmax(scores, axis=-1), v)


models = {
    "custom_attention": (keras.Sequential([keras.Input((8, 16)), Attention(16)]), (2, 8, 16)),
    "conv_dense": (keras.Sequential([keras.Input((8, 8, 3)), L.Conv2D(4, 3, activation="relu"), L.Flatten(),
                                     L.Dense(2)]), (2, 8, 8, 3)),
    "pools_separable": (keras.Sequential([keras.Input((8, 8, 3)), L.DepthwiseConv2D(3), L.SeparableConv2D(5, 3),
                                          L.MaxPooling2D(2), L.GlobalAveragePooling2D(), L.Dense(3)]), (2, 8, 8, 3)),
    "mlp": (keras.Sequential([keras.Input((5, 8)), L.LayerNormalization(), L.Dense(16, activation="gelu"),
                              L.Dense(8, activation="sigmoid")]), (2, 5, 8)),
}
report = {"backend": keras.config.backend(), "is_module": isinstance(models["mlp"][0], torch.nn.Module)}
for name, (model, shape) in models.items():
    x = torch.randn(*shape)
    analytic = count_ops(model, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = torch_count_ops(model, x)
    report[name] = [analytic.macs, analytic.flops, engine.macs, engine.flops, analytic.untracked, engine.untracked]
try:
    count_ops(models["mlp"][0], (2, 5, 8), method="graph")
except CountingError as exc:
    report["graph_error"] = str(exc)
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, KERAS_BACKEND="torch")  # the child's environment only
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # (about 4 s here)
def test_the_child_ran_keras_on_torch(report):
    assert report["backend"] == "torch" and report["is_module"] is True


@pytest.mark.parametrize("name, expected", [
    # Conv2D(4,3)+relu on (2,8,8,3): 288 outputs x 27 = 7776 MACs, FLOPs 15552 + 288 + 288;
    # Dense 144 -> 2 on 2 rows: 576 MACs, 1152 + 4. Total (8352, 17284).
    ("conv_dense", (8352, 17284)),
    # depthwise (2,6,6,3): 216 x 9 = 1944 MACs (+216 bias); separable: depthwise (2,4,4,3) 96 x 9 = 864,
    # pointwise (2,4,4,5) 160 x 3 = 480 (+160 bias); max pool (2,2,2,5) 40 x 4 = 160;
    # GAP 40 + 10 = 50; Dense 5 -> 3: 30 MACs (+6). MACs 3318; FLOPs 6636 + 216 + 160 + 160 + 50 + 6 = 7228
    ("pools_separable", (3318, 7228)),
    # LayerNorm N = 80, R = 10: 480 + 40 + 160 = 680; Dense 8 -> 16 on 10 rows: 1280 MACs (+160),
    # gelu 5 x 160 = 800; Dense 16 -> 8: 1280 MACs (+80), sigmoid 4 x 80 = 320.
    # MACs 2560; FLOPs 5120 + 680 + 160 + 800 + 80 + 320 = 7160
    ("mlp", (2560, 7160)),
    # Dense 16 -> 16 on 16 rows: 4096 MACs (+256) x3; QK^T 2*8*8*16 = 2048 and PV 2*8*16*8 = 2048
    # MACs (aten.bmm, priced op by op); / 4: 128; softmax 5 x 128 = 640.
    # MACs 16384; FLOPs 3 * 8448 + 8192 + 128 + 640 = 34304
    ("custom_attention", (16384, 34304)),
])
def test_analytic_count_equals_the_torch_engine_on_the_same_keras_model(report, name, expected):
    analytic_macs, analytic_flops, engine_macs, engine_flops, analytic_untracked, engine_untracked = report[name]
    assert (analytic_macs, analytic_flops) == (engine_macs, engine_flops) == expected
    assert analytic_untracked == {} and engine_untracked == {}


def test_graph_method_needs_the_tensorflow_backend(report):
    assert "needs Keras' TensorFlow backend" in report["graph_error"] and "'torch'" in report["graph_error"]
