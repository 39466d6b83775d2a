"""deeplite-profiler's names in the PyTorch backend: functions, evaluation helpers, ``import *``."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like import ComputeEvalMetric, Device
from deeplite_like.functions import EvaluationFunction

# Scores of 3 classes per sample and their targets, in an uneven split of batches (3 + 1):
#   a [3, 2, 1] target 0: top-1 hit          b [3, 2, 1] target 1: top-1 miss, top-2 hit
#   c [1, 2, 3] target 2: top-1 hit          d [1, 3, 2] target 1: top-1 hit (second batch)
# top-1 = 3 of 4 samples = 75 %; top-2 = 4 of 4 = 100 %. (deeplite averaged the per-batch
# means: (2/3 + 1/1) / 2 = 83.33 %, which weighs the lone sample d as much as a, b and c.)
BATCHES = [(torch.tensor([[3., 2., 1.], [3., 2., 1.], [1., 2., 3.]]), torch.tensor([0, 1, 2])),
           (torch.tensor([[1., 3., 2.]]), torch.tensor([1]))]


def identity_model(classes: int = 3) -> nn.Module:
    model = nn.Linear(classes, classes)
    with torch.no_grad():
        model.weight.copy_(torch.eye(classes))
        model.bias.zero_()
    return model


def test_import_star_brings_deeplites_names():
    namespace: dict = {}
    exec("from deeplite_like.backends.torch import *", namespace)
    for name in ("TorchProfiler", "ComputeFlops", "ComputeComplexity", "ComputeSize", "ComputeParams", "ComputeMemory",
                 "ComputeLayerwiseSummary", "ComputeExecutionTime", "get_accuracy", "get_topk", "get_missclass",
                 "EvalLossFunction", "EvaluationFunction"):
        assert name in namespace, name
    assert namespace["ComputeFlops"] is namespace["ComputeComplexity"]


def test_compute_complexity_accepts_deeplites_options():
    from deeplite_like.backends.torch import ComputeComplexity

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        function = ComputeComplexity(num_bytes=4, export=False)
    assert (function.num_bytes, function.export) == (4, False)
    with pytest.warns(UserWarning, match=r"num_bytes=2\): sizes and memory are read from each tensor's real dtype"):
        ComputeComplexity(num_bytes=2)
    with pytest.warns(UserWarning, match=r"export=True\) writes no file here"):
        ComputeComplexity(export=True)
    with pytest.raises(ValueError, match="num_bytes"):
        ComputeComplexity(num_bytes=0)


def test_accuracy_missclass_topk_count_samples_not_batch_means():
    from deeplite_like.backends.torch import get_accuracy, get_missclass, get_topk

    model = identity_model().train()
    assert get_accuracy(model, BATCHES) == 75.0
    assert get_missclass(model, BATCHES) == 25.0
    assert get_topk(model, BATCHES, topk=(1, 2)) == {"top-1": 75.0, "top-2": 100.0}
    assert get_topk(model, BATCHES, Device.CPU, 2) == {"top-2": 100.0}
    assert model.training  # left as found
    assert isinstance(get_accuracy, EvaluationFunction)


def test_transform_and_device():
    from deeplite_like.backends.torch import get_accuracy

    model = identity_model()
    # negated scores rank every target below another class: a->2, b->2, c->0, d->0, all misses
    assert get_accuracy(model, BATCHES, transform=lambda x, y: (-x, y)) == 0.0
    assert get_accuracy(model, BATCHES, device=Device.CPU) == 75.0
    assert get_accuracy(model, BATCHES, device="CPU") == 75.0
    with pytest.raises(ValueError, match=r"asked for device cuda but Linear is on cpu.*model.to\('cuda'\)"):
        get_accuracy(model, BATCHES, device=Device.GPU)
    with pytest.raises(ValueError, match="topk"):
        from deeplite_like.backends.torch import get_topk
        get_topk(model, BATCHES, topk=(0,))


def test_eval_loss_function_is_the_mean_over_batches_of_summed_dicts():
    from deeplite_like.backends.torch import EvalLossFunction

    seen = []

    def loss_fn(model, batch):
        seen.append(model.training)
        return {"constant": torch.tensor(1.0), "size": torch.tensor(float(batch[0].shape[0]))}

    model = identity_model().train()
    # batch of 3: 1 + 3 = 4; batch of 1: 1 + 1 = 2; mean 3.0
    assert EvalLossFunction(loss_fn)(model, BATCHES) == 3.0
    assert seen == [False, False] and model.training


def test_get_topk_feeds_compute_eval_metric_with_deeplites_keys():
    from deeplite_like.backends.torch import TorchProfiler, get_topk

    # 5 classes, identity scores: sample i scores class i highest; targets 0, 1, 2, 4 -> 3 of 4 top-1 hits
    # (the last sample scores class 3 highest); top-5 of 5 classes is always 100 %.
    x = torch.eye(5)[[0, 1, 2, 3]]
    data = {"test": [(x, torch.tensor([0, 1, 2, 4]))]}
    function = ComputeEvalMetric(get_topk, "top-1", unit_name="%")
    function.add_secondary_metric("top-5", unit_name="%")
    profiler = TorchProfiler(identity_model(5), data, register_defaults=False)
    profiler.register_profiler_function(function)
    assert profiler.compute_status("top-1") == 75.0
    assert profiler.compute_status("top-5") == 100.0


def test_filter_call_rval():
    f = EvaluationFunction.filter_call_rval
    assert f({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert f({"a": 1}, return_dict=False) == 1
    assert f({"a": 1, "b": 2}, return_dict=False, return_keys="b") == 2
    assert f(5, return_dict=True, key_for_non_dict="acc") == {"acc": 5}
    assert f({"a": 1, "b": 2}, return_dict=True, return_keys=("a",)) == {"a": 1}
    with pytest.raises(ValueError, match="give key_for_non_dict"):
        f(5, return_dict=True)
    with pytest.raises(ValueError, match="give return_keys"):
        f({"a": 1, "b": 2}, return_dict=False)
