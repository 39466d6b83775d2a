"""Keras ``total_params`` is Keras' own ``model.count_params()`` (every weight, batch-norm moving
statistics included, as non-trainable); the split stays in the details; a compare across
backends states each framework's convention. Values derived by hand in comments.
"""
import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras import KerasProfiler  # noqa: E402
from deeplite_like.reports import CompareReport  # noqa: E402

L = keras.layers


def _conv_bn():
    return keras.Sequential([keras.Input((6, 6, 3)), L.Conv2D(8, 3, name="conv"), L.BatchNormalization(name="bn"),
                             L.ReLU(), L.GlobalAveragePooling2D(), L.Dense(2, name="fc")])


def _params(model):
    profiler = KerasProfiler.from_inputs(model, np.ones((1, 6, 6, 3), "float32"))
    total = profiler.compute_status("total_params")
    return total, profiler.compute_status("trainable_params"), profiler.get_status("total_params").details


def test_total_params_counts_batch_norm_statistics_as_keras_does():
    # conv 3*3*3*8 + 8 = 224; bn gamma + beta 16 (trainable), moving mean + variance 16 (state);
    # fc 8*2 + 2 = 18. Keras count_params: 224 + 32 + 18 = 274; trainable 224 + 16 + 18 = 258
    model = _conv_bn()
    total, trainable, details = _params(model)
    assert total == model.count_params() == 274 and trainable == 258
    assert {k: details[k] for k in ("parameters", "non_trainable", "frozen", "state")} == {
        "parameters": 258, "non_trainable": 16, "frozen": 0, "state": 16}
    assert details["convention"].startswith("Keras: every weight")


def test_frozen_layers_are_non_trainable_parameters_not_state():
    # conv frozen: trainable 16 + 18 = 34; non-trainable (Keras) 224 frozen + 16 state = 240
    model = _conv_bn()
    model.get_layer("conv").trainable = False
    total, trainable, details = _params(model)
    assert (total, trainable) == (274, 34) and total == model.count_params()
    assert (details["non_trainable"], details["frozen"], details["state"], details["parameters"]) == (240, 224, 16, 258)


def test_a_model_without_batch_norm_is_unchanged():
    # Dense 4 -> 3: 15; 3 -> 1: 4 -> 19, all trainable, no state
    model = keras.Sequential([keras.Input((4,)), L.Dense(3), L.Dense(1)])
    total, trainable, details = _params(model)
    assert (total, trainable, details["state"]) == (19, 19, 0)


def test_resnet50_matches_keras_summary():
    # Keras' own model.summary() for ResNet50 (weights=None): Total params 25,636,712, of which
    # 53,120 non-trainable (the moving mean and variance of 53 batch norms: 2 x 26,560 channels)
    model = keras.applications.ResNet50(weights=None)
    profiler = KerasProfiler.from_inputs(model, np.zeros((1, 224, 224, 3), "float32"))
    assert profiler.compute_status("total_params") == model.count_params() == 25_636_712
    assert profiler.get_status("total_params").details["state"] == 53_120


def test_a_cross_backend_compare_states_each_convention():
    from deeplite_like.metrics import TotalParams

    def statuses(value, convention):
        return {"total_params": TotalParams(value, {"convention": convention})}

    report = CompareReport([("net_torch", "torch", statuses(258, "PyTorch: parameters only")),
                            ("net_keras", "keras", statuses(274, "Keras: every weight"))])
    notes = [n for n in report._notes() if "convention" in n]
    assert notes == ["Total parameters: each backend follows its own framework's convention, so the values may "
                     "differ for the same network: net_torch: PyTorch: parameters only; net_keras: Keras: every weight"]
    same = CompareReport([("a", "keras", statuses(1, "Keras: every weight")),
                          ("b", "keras", statuses(1, "Keras: every weight"))])
    assert not [n for n in same._notes() if "convention" in n]
