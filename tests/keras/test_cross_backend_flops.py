"""One FLOPs convention on Keras' three backends: the same model gives the same MACs and FLOPs on
TensorFlow (this process), torch and JAX (each in a child process with ``KERAS_BACKEND`` set in the
child's environment only; the user's process is never switched). Fused attention
(``ops.dot_product_attention``: one SDPA kernel on torch, Keras' reference decomposition on TensorFlow
and JAX), its explicit matmul + softmax form, layer / RMS / batch norm, gelu and softmax, each against
a count derived by hand (docs/conventions.rst, *Keras on JAX*: "one convention").
"""
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

keras = pytest.importorskip("keras")
pytest.importorskip("jax")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

_MODELS = r"""
import numpy as np
import keras
from keras import ops

L = keras.layers


class Fused(L.Layer):  # x: (B, T, N, H), self-attention through the fused op
    def __init__(self, causal=False, bias=False, **kwargs):
        super().__init__(**kwargs)
        self.causal, self.bias = causal, bias

    def call(self, x):
        bias = ops.zeros((1, 2, 4, 4)) if self.bias else None
        return ops.dot_product_attention(x, x, x, bias=bias, is_causal=self.causal)


class Explicit(L.Layer):  # x: (B, T, E), softmax(x x^T * 0.5) x
    def call(self, x):
        scores = ops.matmul(x, ops.transpose(x, (0, 2, 1))) * 0.5
        return ops.matmul(ops.softmax(scores, axis=-1), x)


def build(name):
    seq = lambda shape, *layers: keras.Sequential([keras.Input(shape[1:]), *layers])
    if name == "fused":
        return seq((1, 4, 2, 8), Fused(name="att")), (1, 4, 2, 8)
    if name == "fused_causal":
        return seq((1, 4, 2, 8), Fused(causal=True, name="att")), (1, 4, 2, 8)
    if name == "fused_bias":
        return seq((1, 4, 2, 8), Fused(bias=True, name="att")), (1, 4, 2, 8)
    if name == "explicit":
        return seq((1, 4, 8), Explicit(name="att")), (1, 4, 8)
    if name == "mha":
        x = keras.Input((6, 8))
        return keras.Model(x, L.MultiHeadAttention(2, 4, name="mha")(x, x)), (1, 6, 8)
    if name == "layer_norm":
        return seq((2, 5, 8), L.LayerNormalization()), (2, 5, 8)
    if name == "rms_norm":
        return seq((2, 5, 8), L.RMSNormalization()), (2, 5, 8)
    if name == "batch_norm":
        return seq((1, 6, 6, 4), L.BatchNormalization()), (1, 6, 6, 4)
    if name == "gelu_dense":
        return seq((2, 8), L.Dense(4, activation="gelu")), (2, 8)
    if name == "softmax":
        return seq((2, 5, 8), L.Softmax()), (2, 5, 8)
    if name == "ops_softmax":
        return seq((2, 5, 8), L.Lambda(lambda t: ops.softmax(t))), (2, 5, 8)
    if name == "residual":  # a functional model's operation node (h + x) next to layers
        x = keras.Input((4,))
        return keras.Model(x, L.ReLU()(L.Dense(4)(x) + x)), (1, 4)
    raise KeyError(name)


CASES = ("residual", "fused", "fused_causal", "fused_bias", "explicit", "mha", "layer_norm", "rms_norm", "batch_norm",
         "gelu_dense", "softmax", "ops_softmax")
"""

_CHILD = r"""
import json, warnings
from deeplite_like.backends.keras.counting import count_ops
""" + _MODELS + r"""
report = {"backend": keras.config.backend()}
for name in CASES:
    model, shape = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = count_ops(model, shape)
    report[name] = [r.macs, r.flops, r.untracked]
print(json.dumps(report))
"""

# name -> (MACs, FLOPs), derived by hand
EXPECTED = {
    # (1, 4, 2, 8): BH = 2 heads, Lq = Lk = 4, E = 8: scores 2*4*4 = 32; Q.K^T 32*8 = 256 + P.V 256 = 512 MACs;
    # FLOPs 2*512 = 1024 + scale the scores 32 + softmax 5*32 = 160 -> 1216 (torch's kernel scales q and k:
    # 2*(4 + 4)*8 = 128 in the torch table; Keras' convention is its reference decomposition's)
    "fused": (512, 1216),
    # a causal mask is a select (free), as Keras' reference applies it
    "fused_causal": (512, 1216),
    # an additive bias: + 1 per score, 32 -> 1248
    "fused_bias": (512, 1248),
    # (1, 4, 8): x x^T 4*4*8 = 128 + P x 128 = 256 MACs; 512 + scale 16 + softmax 5*16 = 80 -> 608
    "explicit": (256, 608),
    # MultiHeadAttention(2 heads, key_dim 4) on (1, 6, 8): Q, K, V 6*8*8 = 384 MACs each (768 FLOPs + 48 bias):
    # 3*816 = 2448; scores 2*6*6*4 = 288 MACs (576); query scaled 2*6*4 = 48; softmax 5*72 = 360; P.V 288
    # (576); output 384 (768 + 48); MACs 1152 + 576 + 384 = 2112; FLOPs 2448 + 576 + 48 + 360 + 576 + 816 = 4824
    "mha": (2112, 4824),
    # N = 2*5*8 = 80, R = 10 rows: 6N + 4R = 520, + N gamma + N beta = 680
    "layer_norm": (0, 680),
    # 3N + 3R + N scale = 240 + 30 + 80 = 350
    "rms_norm": (0, 350),
    # inference, N = 144, C = 4: 2N + 2C = 296, + N gamma + N beta = 584
    "batch_norm": (0, 584),
    # Dense 8 -> 4 on batch 2: 64 MACs, 128 + 8 bias + gelu 5*8 = 40 -> 176
    "gelu_dense": (64, 176),
    # 5 per element, 5*80 = 400 (jax.nn.softmax's max(-inf, row max) guard is free)
    "softmax": (0, 400),
    "ops_softmax": (0, 400),
    # Dense 4 -> 4 on batch 1: 16 MACs, 32 + 4 bias; the residual add 4; ReLU 4 -> 44 (on JAX the add runs
    # in no layer's name scope: priced once, not also as the root's own arithmetic)
    "residual": (16, 44),
}


def _child(backend):
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=str(ROOT))  # the child's environment only
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["backend"] == backend
    return report


@pytest.fixture(scope="module")
def reports():
    from deeplite_like.backends.keras.counting import count_ops

    space: dict = {}
    exec(_MODELS, space)
    tensorflow = {"backend": keras.config.backend()}
    for name in space["CASES"]:
        model, shape = space["build"](name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = count_ops(model, shape)
        tensorflow[name] = [r.macs, r.flops, r.untracked]
    return {"tensorflow": tensorflow, "torch": _child("torch"), "jax": _child("jax")}


@pytest.mark.slow  # (two children: about 25 s here)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_three_backends_count_the_same_hand_derived_macs_and_flops(reports, name):
    assert reports["tensorflow"]["backend"] == "tensorflow"
    for backend, report in reports.items():
        macs, flops, untracked = report[name]
        assert (macs, flops) == EXPECTED[name], (backend, name)
        assert untracked == {}, (backend, name)
