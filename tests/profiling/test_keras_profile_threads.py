"""Keras training-step profiles in several threads, and the process-wide changes a profile makes.

A profile wraps ``Optimizer.apply`` and ``GradientTape.gradient`` on their classes and sets
``tf.config.run_functions_eagerly(True)``: shared by the running profiles, made by the first
and undone by the last, whatever the order; each thread sees only its own model and steps.

mlp (the torch tests' mlp): Input(4) -> Dense(8, relu) -> Dense(2), 58 parameters, batch 3:
forward 144 MACs, 342 FLOPs; backward 192 MACs, 438 FLOPs; SGD 116 FLOPs (derived in
test_keras_profile.py and test_torch_flops_profiler.py).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

keras = pytest.importorskip("keras")
if keras.config.backend() != "tensorflow":
    pytest.skip("these tests run Keras on TensorFlow", allow_module_level=True)
tf = pytest.importorskip("tensorflow")

from tensorflow.python.eager import backprop  # noqa: E402

from deeplite_like.backends.keras.counting.tf_ops import TF_COSTS, TF_FREE, tf_op_cost  # noqa: E402
from deeplite_like.backends.keras.model_profile import KerasFlopsProfiler  # noqa: E402

X = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
GRADIENT = backprop.GradientTape.__dict__["gradient"]
APPLY = keras.optimizers.Optimizer.apply


def mlp(name):
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu", name=f"{name}_fc1"),
                             keras.layers.Dense(2, name=f"{name}_fc2")], name=name)


def tape_step(model, optimizer):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(X, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))


def figures(profile):
    return {name: (stats.macs, stats.flops) for name, stats in profile.phases.items()}


EXPECTED = {"forward": (144, 342), "backward": (192, 438), "optimizer": (0, 116), "other": (0, 6)}


def _assert_nothing_left(*models):
    assert backprop.GradientTape.__dict__["gradient"] is GRADIENT
    assert keras.optimizers.Optimizer.apply is APPLY
    for model in models:
        assert all("call" not in vars(layer) for layer in model._flatten_layers(include_self=True, recursive=True))


def test_overlapping_profiles_in_two_threads_count_their_own_step():
    """Thread a starts, b starts, both step three times at once, a stops first, then b."""
    models = {"a": mlp("a"), "b": mlp("b")}
    both_started, a_stopped = threading.Barrier(2, timeout=60), threading.Event()
    profiles, errors = {}, []

    def run(name):
        try:
            model, optimizer = models[name], keras.optimizers.SGD(0.1)
            prof = KerasFlopsProfiler(model)
            prof.start_profile()
            both_started.wait()
            tape_step(model, optimizer)
            if name == "b":
                a_stopped.wait(60)  # b stops last: a class-level patch undone per profile would now be lost
                assert tf.config.functions_run_eagerly()  # still held by b after a stopped
            prof.stop_profile()
            if name == "a":
                a_stopped.set()
            profiles[name] = prof.get_profile()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            a_stopped.set()

    threads = [threading.Thread(target=run, args=(name,)) for name in models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    for name in models:
        assert figures(profiles[name]) == EXPECTED, name  # one step each: the other thread's is not in it
        assert {n.name for n in profiles[name].modules() if n.calls} == {"", f"{name}_fc1", f"{name}_fc2"}
    assert not tf.config.functions_run_eagerly()
    _assert_nothing_left(*models.values())


def test_the_users_eager_setting_is_put_back_not_just_false():
    model = mlp("m")
    tf.config.run_functions_eagerly(True)  # the user's own choice
    try:
        with KerasFlopsProfiler(model):
            tape_step(model, keras.optimizers.SGD(0.1))
        assert tf.config.functions_run_eagerly()
    finally:
        tf.config.run_functions_eagerly(False)
    _assert_nothing_left(model)


def test_a_step_that_raises_leaves_nothing_behind_once_stopped():
    model = mlp("m")
    with pytest.raises(ValueError):
        with KerasFlopsProfiler(model):
            model(np.ones((3, 5), "float32"))  # 5 features for a 4-feature input
    assert not tf.config.functions_run_eagerly()
    _assert_nothing_left(model)


def test_stop_in_another_thread_is_refused_and_the_profile_keeps_running():
    model = mlp("m")
    prof = KerasFlopsProfiler(model)
    prof.start_profile()
    errors = []
    other = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, prof.stop_profile)))
    other.start()
    other.join(30)
    assert "thread that called start_profile" in str(errors[0].value) and prof.started
    tape_step(model, keras.optimizers.SGD(0.1))
    prof.stop_profile()
    assert figures(prof.get_profile()) == EXPECTED
    _assert_nothing_left(model)


def test_momentum_updates_are_priced():
    """SGD(0.1, momentum=0.9) per element: m*0.9, g*lr, their difference (m assigned: free), p += m
    (AssignAddVariableOp, as torch's add_): 4 FLOPs x 58 parameters = 232."""
    model = mlp("m")
    with KerasFlopsProfiler(model) as prof:
        tape_step(model, keras.optimizers.SGD(0.1, momentum=0.9))
    assert figures(prof.get_profile())["optimizer"] == (0, 232)
    assert prof.get_profile().by_operator["AssignAddVariableOp"].flops == 58


def test_tf_op_tables_do_not_overlap():
    assert not TF_FREE & set(TF_COSTS)
    value = tf.zeros((3, 4))
    # an update of 12 elements written through a resource handle (no output): 1 FLOP each
    assert tf_op_cost("AssignAddVariableOp", (object(), value), (), ()) == (0, 12)
    assert tf_op_cost("AssignSubVariableOp", (object(), value), (), ()) == (0, 12)
    assert tf_op_cost("AssignVariableOp", (object(), value), (), ()) == (0, 0)  # a copy
    step = tf.constant(1, tf.int64)
    assert tf_op_cost("AssignAddVariableOp", (object(), step), (), ()) == (0, 0)  # the step counter: integer
