"""Keras 3 on JAX: MACs and FLOPs counted from the program ``jax.make_jaxpr`` traces (``counting/jax_ops.py``).

Every case runs in one child process with ``KERAS_BACKEND=jax`` (a Keras backend is chosen once
per process, at import; the user's process is never switched) that prints its counts as JSON;
the same models, built by the same source, are counted on TensorFlow in this process, and must
give the same MACs (FLOPs too, where the two conventions agree: noted per case).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

keras = pytest.importorskip("keras")
pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]

# Built in both processes (exec'd): name -> (model, input shape).
_MODELS = r"""
import keras
from keras import ops
from deeplite_like.zoo.keras_models import lenet5, small_cnn

L = keras.layers


class Att(L.Layer):  # the issue's repro: a sublayer and its own Q.K^T
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.q = L.Dense(8, name="q")

    def call(self, x):
        q = self.q(x)
        return ops.matmul(q, ops.transpose(q, (0, 2, 1)))


class Steps(L.Layer):  # a Dense applied in ops.scan, 6 steps
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.cell = L.Dense(4, use_bias=False, name="cell")

    def call(self, x):
        def step(carry, _):
            carry = self.cell(carry)
            return carry, carry
        return ops.scan(step, x, None, length=6)[0]


class OwnConv(L.Layer):  # ops.conv with its own kernel
    def build(self, shape):
        self.k = self.add_weight(shape=(3, 3, 3, 4), initializer="ones")

    def call(self, x):
        return ops.conv(x, self.k, padding="same")


class OwnEinsum(L.Layer):
    def build(self, shape):
        self.w = self.add_weight(shape=(8, 5), initializer="ones")

    def call(self, x):
        return ops.einsum("bij,jk->bik", x, self.w)


class LoopMatmul(L.Layer):  # h @ w three times in ops.fori_loop
    def build(self, shape):
        self.w = self.add_weight(shape=(8, 8), initializer="identity")

    def call(self, x):
        return ops.fori_loop(0, 3, lambda i, h: ops.matmul(h, self.w), x)


class Sdpa(L.Layer):
    def call(self, x):
        return ops.dot_product_attention(x, x, x)


def build(name):
    if name == "att":
        return keras.Sequential([keras.Input((4, 8)), Att(name="att")]), (1, 4, 8)
    if name == "scan":
        return keras.Sequential([keras.Input((4,)), Steps(name="steps")]), (1, 4)
    if name == "conv":
        return keras.Sequential([keras.Input((8, 8, 3)), OwnConv(name="own_conv")]), (1, 8, 8, 3)
    if name == "einsum":
        return keras.Sequential([keras.Input((4, 8)), OwnEinsum(name="own_einsum")]), (1, 4, 8)
    if name == "fori_loop":
        return keras.Sequential([keras.Input((8,)), LoopMatmul(name="loop")]), (1, 8)
    if name == "sdpa":
        return keras.Sequential([keras.Input((4, 2, 8)), Sdpa(name="sdpa")]), (1, 4, 2, 8)
    if name == "lstm":
        return keras.Sequential([keras.Input((5, 4)), L.LSTM(3, name="lstm")]), (1, 5, 4)
    if name == "mha":
        x = keras.Input((6, 8))
        return keras.Model(x, L.MultiHeadAttention(2, 4, name="mha")(x, x)), (1, 6, 8)
    if name == "small_cnn":
        return small_cnn(), (1, 16, 16, 3)
    if name == "lenet5":
        return lenet5(), (1, 32, 32, 1)
    raise KeyError(name)


CASES = ("att", "scan", "conv", "einsum", "fori_loop", "sdpa", "lstm", "mha", "small_cnn", "lenet5")
"""

_CHILD = r"""
import json, warnings
import keras
from deeplite_like.backends.keras.counting import count_ops
from deeplite_like.backends.keras import KerasProfiler
import numpy as np
""" + _MODELS + r"""
report = {"backend": keras.config.backend()}
for name in CASES:
    model, shape = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = count_ops(model, shape)
    report[name] = {"macs": r.macs, "flops": r.flops, "untracked": r.untracked,
                    "by_module": {k: [v.macs, v.flops, v.calls] for k, v in r.by_module.items()},
                    "by_operator": {k: v.macs for k, v in r.by_operator.items()}}
model, shape = build("lenet5")
status = KerasProfiler.from_inputs(model, np.ones(shape, "float32")).compute_network_status(batch_size=1)
report["status"] = {"macs": status["macs"], "flops": status["flops"]}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def jax_report():
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(ROOT))  # the child's environment only
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _tf_count(name):
    import warnings

    from deeplite_like.backends.keras.counting import count_ops

    space: dict = {}
    exec(_MODELS, space)
    model, shape = space["build"](name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return count_ops(model, shape)


# name -> MACs derived by hand
EXPECTED_MACS = {
    # Dense 8 -> 8 on 4 tokens: 4*8*8 = 256; q @ q^T (4x8 @ 8x4): 4*4*8 = 128; 256 + 128 = 384
    "att": 384,
    # Dense 4 -> 4 (no bias) on batch 1: 16 per step, x6 steps = 96
    "scan": 96,
    # 3x3 conv, 3 -> 4 channels, same padding on 8x8: out 8*8*4 = 256 elements x 3*3*3 = 27 -> 6912
    "conv": 6912,
    # bij,jk->bik with b=1, i=4, j=8, k=5: 4*5*8 = 160
    "einsum": 160,
    # (1x8) @ (8x8) = 64, three iterations: 192
    "fori_loop": 192,
    # q k^T per head (2 heads): 4*4*8 = 128 each -> 256; scores @ v the same 256; 512
    "sdpa": 512,
    # LSTM(3) on 5 steps of 4 features: 4 gates x 3 units x (4 inputs + 3 recurrent) = 84 a step, x5 = 420
    # (Keras runs the steps in a lax.scan on JAX: the body is priced x5)
    "lstm": 420,
    # MultiHeadAttention(2 heads, key_dim 4) on 6 tokens of 8: Q, K, V projections 6*8*8 = 384 each (1152);
    # scores 2*6*6*4 = 288; weights @ V 288; output projection 6*8*8 = 384; 1152 + 576 + 384 = 2112
    "mha": 2112,
    # conv 3x3 same 3 -> 8 on 16x16: 16*16*8*27 = 55296; pool -> 8x8x8 = 512 -> fc 10: 5120; 60416
    "small_cnn": 60416,
    # conv1 28*28*6*25 = 117600; conv2 10*10*16*(6*25) = 240000; fc1 400*120 = 48000; fc2 120*84 = 10080;
    # fc3 84*10 = 840; 117600 + 240000 + 48000 + 10080 + 840 = 416520
    "lenet5": 416520,
}


@pytest.mark.slow  # (one child: about 10 s here)
def test_the_child_ran_keras_on_jax(jax_report):
    assert jax_report["backend"] == "jax"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_MACS))
def test_jax_macs_match_the_hand_count_and_tensorflow(jax_report, name):
    case = jax_report[name]
    assert case["macs"] == EXPECTED_MACS[name], case
    assert case["untracked"] == {}, case
    assert _tf_count(name).macs == EXPECTED_MACS[name]


@pytest.mark.slow
def test_own_arithmetic_of_a_layer_with_sublayers_is_its_own(jax_report):
    by_module = jax_report["att"]["by_module"]
    # att.q: 256 MACs, FLOPs 2*256 + 32 bias adds = 544; att adds q.q^T 128 MACs, 256 FLOPs
    assert by_module["att.q"][:2] == [256, 544]
    assert by_module["att"][:2] == [384, 800] and by_module[""][:2] == [384, 800]
    assert jax_report["att"]["flops"] == 800 == _tf_count("att").flops


@pytest.mark.slow
def test_a_layer_inside_scan_is_counted_per_step(jax_report):
    # 16 MACs, 32 FLOPs a step, 6 steps, attributed to the Dense inside the scan
    assert jax_report["scan"]["by_module"]["steps.cell"][:2] == [96, 192]
    # the Dense is priced by its layer formula, as on TensorFlow and torch, once per step
    assert jax_report["scan"]["by_operator"] == {"Dense": 96}


@pytest.mark.slow
def test_lenet5_per_layer(jax_report):
    by_module = jax_report["lenet5"]["by_module"]
    # conv1 117600 MACs; FLOPs 2*117600 + 28*28*6 = 4704 bias adds = 239904
    assert by_module["conv1"][:2] == [117600, 239904]
    # relu1: one max per element, 4704; pool1: 14*14*6 = 1176 outputs x 4 window elements = 4704
    assert by_module["relu1"][:2] == [0, 4704] and by_module["pool1"][:2] == [0, 4704]
    assert by_module["conv2"][0] == 240000 and by_module["fc1"][0] == 48000
    assert by_module["fc2"][0] == 10080 and by_module["fc3"][0] == 840
    tf = _tf_count("lenet5")
    for path in ("conv1", "relu1", "pool1", "conv2", "pool2", "fc1", "fc2", "fc3"):
        assert by_module[path][:2] == [tf.by_module[path].macs, tf.by_module[path].flops], path
    assert jax_report["lenet5"]["flops"] == tf.flops


@pytest.mark.slow
def test_the_profiler_status_uses_the_traced_count(jax_report):
    assert jax_report["status"]["macs"] == 416520
    assert jax_report["status"]["flops"] == jax_report["lenet5"]["flops"]
