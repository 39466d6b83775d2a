"""deeplite-profiler's names in the Keras backend: ``TFProfiler``, functions, evaluation helpers."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like import Device  # noqa: E402

# The torch test's data (tests/torch/test_deeplite_names.py), class axis last, uneven batches (3 + 1):
# top-1 = 3 of 4 samples = 75 %, top-2 = 100 %, missclass 25 %.
BATCHES = [(np.array([[3., 2., 1.], [3., 2., 1.], [1., 2., 3.]], "float32"), np.array([0, 1, 2])),
           (np.array([[1., 3., 2.]], "float32"), np.array([1]))]


def identity_model():
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(3, use_bias=False, kernel_initializer="identity")])


def test_import_star_brings_deeplites_names():
    namespace: dict = {}
    exec("from deeplite_like.backends.keras import *", namespace)
    for name in ("TFProfiler", "KerasProfiler", "ComputeFlops", "ComputeComplexity", "ComputeSize", "ComputeParams",
                 "ComputeMemory", "ComputeLayerwiseSummary", "ComputeExecutionTime", "get_accuracy", "get_topk",
                 "get_missclass", "EvalLossFunction", "EvaluationFunction"):
        assert name in namespace, name
    assert namespace["TFProfiler"] is namespace["KerasProfiler"]
    assert namespace["ComputeFlops"] is namespace["ComputeComplexity"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        namespace["ComputeComplexity"](num_bytes=4, export=False)
    with pytest.warns(UserWarning, match="num_bytes=1"):
        namespace["ComputeComplexity"](num_bytes=1)


def test_accuracy_missclass_topk():
    from deeplite_like.backends.keras import get_accuracy, get_missclass, get_topk

    model = identity_model()
    assert get_accuracy(model, BATCHES) == 75.0
    assert get_missclass(model, BATCHES, device=Device.CPU) == 25.0
    assert get_topk(model, BATCHES, topk=(1, 2)) == {"top-1": 75.0, "top-2": 100.0}
    assert get_accuracy(model, BATCHES, transform=lambda x, y: (-x, y)) == 0.0
    with pytest.raises(ValueError, match="unknown device"):
        get_accuracy(model, BATCHES, device="tpu")


def test_eval_loss_function():
    from deeplite_like.backends.keras import EvalLossFunction

    def loss_fn(model, batch):
        return {"constant": 1.0, "size": float(batch[0].shape[0])}

    # batch of 3: 1 + 3 = 4; batch of 1: 2; mean 3.0
    assert EvalLossFunction(loss_fn)(identity_model(), BATCHES) == 3.0


def test_tfprofiler_profiles_a_keras_model():
    from deeplite_like.backends.keras import ComputeFlops, TFProfiler

    profiler = TFProfiler(identity_model(), {"test": BATCHES}, register_defaults=False)
    profiler.register_profiler_function(ComputeFlops())
    # Dense 3 -> 3 without bias, batch 1: 9 MACs, 18 FLOPs
    assert profiler.compute_status("macs") == 9
    assert profiler.compute_status("flops") == 18
