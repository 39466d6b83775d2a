"""The Keras engine's per-element costs are the torch backend's; the formula table resolves on
this Keras version; importing the engine imports no framework; TensorFlow is imported quietly.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deeplite_like.backends.keras import _tf
from deeplite_like.backends.keras.counting.formulas import _common as c

ROOT = Path(__file__).resolve().parents[2]


def test_per_element_costs_match_the_torch_backend():
    pytest.importorskip("torch")
    from deeplite_like.backends.torch.counting.formulas import conv as pooling, elementwise as activation, rnn
    from deeplite_like.backends.torch.counting.formulas import reduction as norm, vision as interpolate

    for name in ("RELU", "HARDTANH", "LEAKY_RELU", "SOFTSHRINK", "CELU", "SIGMOID", "TANH", "SILU", "GELU",
                 "GELU_TANH", "HARDSIGMOID", "HARDSWISH", "SOFTPLUS", "MISH", "LOG_SIGMOID", "GLU"):
        assert getattr(c, name) == getattr(activation, name), name
    assert c.SOFTMAX == activation.SOFTMAX
    assert (c.LINEAR, c.BILINEAR, c.TRILINEAR, c.BICUBIC) == (interpolate.LINEAR, interpolate.BILINEAR,
                                                              interpolate.TRILINEAR, interpolate.BICUBIC)
    assert {k: c.GATES[k] for k in ("lstm", "gru", "rnn")} == {
        "lstm": rnn.GATES[rnn.LSTM], "gru": rnn.GATES[rnn.GRU], "rnn": rnn.GATES[rnn.RNN_TANH]}
    assert (c.lstm_gate_math(), c.gru_gate_math(), c.rnn_gate_math()) == (
        rnn.GATE_MATH[rnn.LSTM], rnn.GATE_MATH[rnn.GRU], rnn.GATE_MATH[rnn.RNN_TANH])
    for n, groups, weight, bias in ((96, 3, True, True), (60, 10, False, True), (7, 1, False, False)):
        assert c.normalisation_cost(n, groups, weight, bias) == tuple(norm.normalisation_cost(n, groups, weight, bias))
    for sizes in (((5, 5), (2, 2)), ((7,), (3,)), ((4, 6, 9), (3, 4, 2))):
        assert c.adaptive_window_elements(*sizes) == pooling.adaptive_window_elements(*sizes)


def test_every_built_in_formula_resolves_on_this_keras_version():
    keras = pytest.importorskip("keras")
    from deeplite_like.backends.keras.counting import registry

    registry.lookup(keras.layers.Dense, {})  # resolves every public name once
    assert registry.MISSING == []


def test_the_elementwise_activation_table_has_no_unknown_keras_name():
    keras = pytest.importorskip("keras")
    from deeplite_like.backends.keras.counting.formulas._common import ACTIVATIONS

    public = {name for name in dir(keras.activations) if not name.startswith("_")}
    # gelu_tanh: gelu(approximate=True), reached through a partial or an alias, not a public name
    assert set(ACTIVATIONS) <= public | {"hard_silu", "silu", "gelu_tanh"}


# -- quiet, lazy imports ---------------------------------------------------------------------
_CHILD = """
import json, sys
import deeplite_like.backends.keras.counting as counting
before = sorted(m for m in ("keras", "tensorflow", "torch") if m in sys.modules)
from deeplite_like.backends.keras._tf import import_keras
keras = import_keras()
print(json.dumps({"before": before, "backend": keras.config.backend()}))
"""


@pytest.mark.slow  # (about 4 s here)
def test_importing_the_engine_imports_no_framework_and_tensorflow_is_imported_quietly():
    pytest.importorskip("keras")
    env = {k: v for k, v in os.environ.items() if k != _tf.USER_LOG_LEVEL_VARIABLE}
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["before"] == []
    # TensorFlow's C++ start-up lines (oneDNN, cpu_feature_guard, absl) did not reach stderr
    for marker in ("oneDNN", "cpu_feature_guard", "absl::InitializeLog", "I0000"):
        assert marker not in done.stderr, done.stderr


def test_native_output_is_captured_and_restored(capfd):
    with _tf.native_output_silenced(quiet=True) as captured:
        os.write(2, b"I0000 native line\n")
        os.write(1, b"printed by C\n")
    os.write(2, b"after\n")
    out, err = capfd.readouterr()
    assert "native line" in captured.text and "printed by C" in captured.text
    assert err == "after\n" and out == ""


def test_the_users_log_level_means_nothing_is_silenced(monkeypatch, capfd):
    monkeypatch.setenv(_tf.USER_LOG_LEVEL_VARIABLE, "0")
    with _tf.native_output_silenced() as captured:
        os.write(2, b"shown\n")
    assert captured.text == "" and capfd.readouterr().err == "shown\n"
    monkeypatch.delenv(_tf.USER_LOG_LEVEL_VARIABLE)
    with _tf.native_output_silenced(quiet=False) as captured:  # asked for explicitly
        os.write(2, b"also shown\n")
    assert capfd.readouterr().err == "also shown\n"
