"""The Keras side: the same ModelProfile and views, and FlopsProfiler around a training step.

TensorFlow backend in this process (the default); the torch backend in a child process.

mlp: Input(4) -> Dense(8, relu) 'fc1' -> Dense(2) 'fc2', batch 3: the torch tests' mlp, so the
same figures (see test_torch_flops_profiler.py for the derivation):
  forward  144 MACs, 342 FLOPs (fc1 96 MACs, 192 + bias 24 + relu 24 = 240; fc2 48 MACs, 96 + 6 = 102)
  backward without input gradient: dX2 48 + dW2 48 + dW1 96 = 192 MACs; 384 + BiasAddGrad 6 + 24
           + ReluGrad 24 = 438 FLOPs (TensorFlow does not compute the first layer's input gradient)
  SGD      Mul (lr * g) + AssignSubVariableOp per element: 2 x 58 = 116 FLOPs
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

keras = pytest.importorskip("keras")
if keras.config.backend() != "tensorflow":
    pytest.skip("these tests run Keras on TensorFlow (the child-process test covers torch)", allow_module_level=True)
tf = pytest.importorskip("tensorflow")

import deeplite_like  # noqa: E402
from deeplite_like.backends.keras.model_profile import KerasFlopsProfiler, tf_op_cost  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def mlp(name: str = "mlp"):
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name="fc1"),
                             keras.layers.Dense(2, name="fc2")], name=name)


def nested():
    """block (Sequential: Dense(4) 'fc', ReLU 'act'), a residual Add, Dense(2) 'head'; batch 3:

    fc 3*4*4 = 48 MACs, 96 + bias 12 = 108 FLOPs, 20 params; act 12; add 12; head 24 MACs,
    48 + 6 = 54 FLOPs, 10 params. block 48 MACs, 120 FLOPs; model 72 MACs, 186 FLOPs, 30 params.
    """
    block = keras.Sequential([keras.layers.Dense(4, name="fc"), keras.layers.ReLU(name="act")], name="block")
    inputs = keras.Input((4,), name="x")
    summed = keras.layers.Add(name="add")([block(inputs), inputs])
    return keras.Model(inputs, keras.layers.Dense(2, name="head")(summed), name="net")


def phase(profile, name):
    stats = profile.phase(name)
    return stats.macs, stats.flops


def tape_step(model, optimizer, x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


X = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
Y = np.random.default_rng(1).standard_normal((3, 2)).astype("float32")


def test_model_profile_tree_and_aggregation():
    profile = deeplite_like.get_model_profile(nested(), input_shape=(3, 4), print_profile=False, warm_up=0)
    assert (profile.params, profile.macs, profile.flops) == (30, 72, 186)
    figures = {n.name: (n.params, n.macs, n.flops) for n in profile.modules() if n.calls}
    assert figures == {"": (30, 72, 186), "block": (20, 48, 120), "block.fc": (20, 48, 108), "block.act": (0, 0, 12),
                       "add": (0, 0, 12), "head": (10, 24, 54)}
    levels = profile.aggregated(top_modules=2)
    assert [level["depth"] for level in levels] == [0, 1, 2]  # the deepest level (block's layers) is there
    assert [(e["type"], e["value"]) for e in levels[2]["top"]["flops"]] == [("Dense", 108), ("ReLU", 12)]
    text = profile.to_text()
    assert "(fc): Dense(units=4, activation='linear')" in text and "ops: Dense x1 (48 MACs, 108 FLOPs)" in text
    assert json.loads(profile.to_json())["tree"]["name"] == ""


def test_ignore_modules_on_keras():
    profile = deeplite_like.get_model_profile(nested(), input_shape=(3, 4), print_profile=False, warm_up=0,
                                              ignore_modules=[keras.layers.ReLU, "Add"])
    # 186 - relu 12 - add 12 = 162; block 120 - 12 = 108
    assert (profile.macs, profile.flops) == (72, 162)
    assert profile.module("block").flops == 108
    assert sorted(n.name for n in profile.excluded) == ["add", "block.act"]


def test_model_profile_with_backward_matches_torch():
    profile = deeplite_like.get_model_profile(mlp(), input_shape=(3, 4), print_profile=False, warm_up=0,
                                              backward=True)
    assert phase(profile, "forward") == (144, 342)
    assert phase(profile, "backward") == (192, 438)
    assert phase(profile, "other") == (0, 6)  # the default loss: sum of the (3, 2) output
    assert profile.phase("backward").latency_s > 0


def test_gradient_tape_step():
    model, optimizer = mlp(), keras.optimizers.SGD(0.1)
    prof = deeplite_like.FlopsProfiler(model)
    assert isinstance(prof, KerasFlopsProfiler)
    prof.start_profile()
    tape_step(model, optimizer, X)
    prof.stop_profile()
    profile = prof.get_profile()
    assert phase(profile, "forward") == (144, 342)
    assert phase(profile, "backward") == (192, 438)
    assert phase(profile, "optimizer") == (0, 116)
    assert phase(profile, "other") == (0, 6)  # tf.reduce_sum over 6 elements
    assert prof.get_total_params() == 58 and profile.untracked == {}
    assert all(profile.phase(p).latency_s > 0 for p in ("forward", "backward", "optimizer"))


def test_train_on_batch_of_a_compiled_model():
    model = mlp()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.train_on_batch(X, Y)  # compiled and traced before the profiled step
    prof = KerasFlopsProfiler(model)
    figures = []
    for _ in range(2):  # profiling again gives the same numbers
        prof.start_profile()
        model.train_on_batch(X, Y)
        prof.stop_profile()
        profile = prof.get_profile()
        figures.append({k: (v.macs, v.flops, v.calls) for k, v in profile.phases.items()})
        prof.end_profile()
    assert figures[0] == figures[1]
    assert figures[0]["forward"][:2] == (144, 342)
    # the model's 438 + the MSE loss's backward on the (3, 2) output: the mean's RealDiv 6, the square's
    # two Mul 12, the subtraction's Neg 6, and 7 scalar ops of the batch reduction: 31
    assert figures[0]["backward"][:2] == (192, 438 + 31)
    assert figures[0]["optimizer"][:2] == (0, 116)


def test_nothing_stays_attached():
    from tensorflow.python.eager import backprop
    from tensorflow.python.framework import op_callbacks

    model, optimizer = mlp(), keras.optimizers.SGD(0.1)
    gradient, apply = backprop.GradientTape.gradient, keras.optimizers.Optimizer.apply
    eager = tf.config.functions_run_eagerly()
    prof = deeplite_like.FlopsProfiler(model)
    prof.start_profile()
    assert tf.config.functions_run_eagerly()
    tape_step(model, optimizer, X)
    prof.stop_profile()
    prof.end_profile()
    assert backprop.GradientTape.gradient is gradient and keras.optimizers.Optimizer.apply is apply
    assert tf.config.functions_run_eagerly() == eager
    assert not op_callbacks.should_invoke_op_callbacks()
    assert all("call" not in vars(layer) for layer in model._flatten_layers(include_self=True, recursive=True))


def test_keras_and_torch_profilers_agree_on_the_same_step():
    import torch
    from torch import nn

    torch_model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    torch_prof = deeplite_like.FlopsProfiler(torch_model)
    optimizer = torch.optim.SGD(torch_model.parameters(), lr=0.1)
    torch_prof.start_profile()
    torch_model(torch.from_numpy(X)).sum().backward()
    optimizer.step()
    torch_prof.stop_profile()

    model = mlp()
    keras_prof = deeplite_like.FlopsProfiler(model)
    keras_prof.start_profile()
    tape_step(model, keras.optimizers.SGD(0.1), X)
    keras_prof.stop_profile()
    for name in ("forward", "backward", "optimizer", "other"):
        assert phase(keras_prof.get_profile(), name) == phase(torch_prof.get_profile(), name), name


def test_inputs_and_errors():
    ids = keras.Sequential([keras.Input((5,), dtype="int32"), keras.layers.Embedding(10, 4), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="pass the inputs instead"):
        deeplite_like.get_model_profile(ids, input_shape=(3, 5), print_profile=False)
    profile = deeplite_like.get_model_profile(ids, args=(np.zeros((3, 5), "int32"),), print_profile=False, warm_up=0)
    assert profile.macs == 3 * 5 * 4 * 2  # Dense on (3, 5, 4): 15 rows x 4 x 2
    with pytest.raises(ValueError, match="meta=True"):
        deeplite_like.get_model_profile(mlp(), input_shape=(3, 4), meta=True, print_profile=False)
    with pytest.raises(TypeError, match="model_parallel_size"):
        KerasFlopsProfiler(mlp(), process_group=object())
    with pytest.raises(AttributeError, match="no method 'generate'"):
        deeplite_like.get_model_profile(mlp(), input_shape=(3, 4), func_name="generate", print_profile=False)


def test_tf_op_costs_follow_the_torch_conventions():
    a, b = tf.zeros((3, 4)), tf.zeros((4, 5))
    out = tf.matmul(a, b)
    assert tf_op_cost("MatMul", (a, b), ("transpose_a", False, "transpose_b", False), (out,)) == (60, 120)
    grad = tf.zeros((3, 5))
    assert tf_op_cost("BiasAddGrad", (grad,), (), (tf.zeros((5,)),)) == (0, 15)  # a sum of 15 elements
    assert tf_op_cost("ReluGrad", (grad, grad), (), (grad,)) == (0, 15)
    assert tf_op_cost("Reshape", (grad,), (), (grad,)) == (0, 0)
    assert tf_op_cost("NoSuchOp", (grad,), (), (grad,)) is None


CHILD = r"""
import json
import numpy as np
import keras
import deeplite_like
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
y = np.random.default_rng(1).standard_normal((3, 2)).astype("float32")
model.train_on_batch(x, y)
prof = deeplite_like.FlopsProfiler(model)
prof.start_profile()
model.train_on_batch(x, y)
prof.stop_profile()
profile = prof.get_profile()
print(json.dumps({"backend": keras.config.backend(), "profiler": type(prof).__name__,
                  "phases": {k: [v.macs, v.flops] for k, v in profile.phases.items()},
                  "update": profile.by_operator["aten._foreach_add_"].flops}))
"""


@pytest.mark.slow  # (about 7 s here)
def test_train_on_batch_on_the_torch_backend():
    pytest.importorskip("torch")
    env = dict(os.environ, KERAS_BACKEND="torch")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert (data["backend"], data["profiler"]) == ("torch", "KerasFlopsProfiler")
    assert data["phases"]["forward"] == [144, 342]
    assert data["phases"]["backward"] == [192, 438 + 31]  # as on TensorFlow: the model and the MSE's backward
    assert data["update"] == 116  # the optimizer's update p -= lr * g: _foreach_add_ with alpha, 2 x 58


class _OwnMatmul(keras.layers.Layer):
    """A Dense sublayer and an ops.matmul of its own (priced op by op in the profile's forward too)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fc = keras.layers.Dense(4, name="fc")

    def call(self, x):
        h = self.fc(x)
        return keras.ops.matmul(h, keras.ops.transpose(h))


def test_a_layers_own_matmul_is_in_the_profile():
    # x (3, 4): fc 4 -> 4: 48 MACs, 96 + 12 = 108 FLOPs; h @ h^T: (3, 4) @ (4, 3): 3*3*4 = 36 MACs,
    # 72 FLOPs. MACs 84; FLOPs 180 (as count_ops)
    model = keras.Sequential([keras.Input((4,)), _OwnMatmul(name="own")])
    profile = deeplite_like.get_model_profile(model, input_shape=(3, 4), print_profile=False, warm_up=0)
    assert (profile.macs, profile.flops) == (84, 180)
    figures = {n.name: (n.macs, n.flops) for n in profile.modules() if n.calls}
    assert figures["own"] == (84, 180) and figures["own.fc"] == (48, 108)
