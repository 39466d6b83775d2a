"""module_param_counts: every module's subtree parameters in one bottom-up pass, equal to parameter_stats of each."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.model_profile import module_params
from deeplite_like.backends.torch.params import module_param_counts, parameter_stats
from deeplite_like.zoo.torch_models import lenet5, resnet_small


def reference(model: nn.Module) -> dict[str, int]:
    """What get_model_profile used before: parameter_stats of every module, one at a time."""
    return {name: parameter_stats(module).total_params for name, module in model.named_modules()}


class TiedLM(nn.Module):
    """An embedding and a head tied as GPT-2 ties them, the head outside the embedding's parent."""

    def __init__(self, tie: str) -> None:
        super().__init__()
        self.body = nn.Module()
        self.body.emb = nn.Embedding(100, 16)  # 1600
        self.body.norm = nn.LayerNorm(16)  # 32
        self.head = nn.Linear(16, 100, bias=False)  # 1600 when untied
        if tie == "same":
            self.head.weight = self.body.emb.weight
        elif tie == "storage":
            self.head.weight = nn.Parameter(self.body.emb.weight.data)
        elif tie == "transposed":
            self.body.emb.weight = nn.Parameter(self.head.weight.data.t())


@pytest.mark.parametrize("tie", ["same", "storage", "transposed"])
def test_tied_weights_are_counted_once_per_subtree(tie):
    model = TiedLM(tie)
    counts = module_param_counts(model)
    # each part alone holds its 1600; together they share one 100x16 tensor: 1600 + 32 at the root
    assert counts == {"": 1632, "body": 1632, "body.emb": 1600, "body.norm": 32, "head": 1600}
    assert counts == reference(model)


def test_untied_model():
    counts = module_param_counts(TiedLM("none"))
    assert counts == {"": 3232, "body": 1632, "body.emb": 1600, "body.norm": 32, "head": 1600}


def test_a_module_under_two_parents_counts_in_each_and_once_above():
    shared = nn.Linear(4, 4)  # 16 + 4 = 20
    model = nn.Sequential(nn.Sequential(shared, nn.ReLU()), nn.Sequential(shared, nn.Linear(4, 2)))  # + 8 + 2
    counts = module_param_counts(model)
    # named_modules lists the shared Linear once, under its first name
    assert counts == {"": 30, "0": 20, "0.0": 20, "0.1": 0, "1": 30, "1.1": 10}
    assert counts == reference(model)


def test_a_module_twice_in_one_parent_and_views_of_one_flat_storage():
    flat = torch.zeros(20)
    views = nn.Module()
    views.a = nn.Parameter(flat[:12].view(3, 4))
    views.b = nn.Parameter(flat[12:])  # disjoint spans: 12 + 8
    twice = nn.Linear(3, 3)  # 12
    model = nn.ModuleList([twice, twice, views, nn.ModuleDict({"x": nn.Linear(2, 1)})])  # + 3
    assert module_param_counts(model) == reference(model) == {"": 35, "0": 12, "2": 20, "3": 3, "3.x": 3}


def test_zoo_models_and_meta_device_match_the_reference():
    for model in (lenet5(), resnet_small()):
        assert module_param_counts(model) == reference(model)
    with torch.device("meta"):
        meta = TiedLM("storage")
    assert module_param_counts(meta) == reference(meta)


def test_quantized_packed_weights_are_counted():
    from torch.ao.quantization import quantize_dynamic

    if not {"x86", "fbgemm", "qnnpack"} & set(torch.backends.quantized.supported_engines):
        pytest.skip("no quantized CPU engine (x86/fbgemm/qnnpack) in this torch build")
    float_model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Sequential(nn.Linear(20, 5)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = quantize_dynamic(float_model, {nn.Linear}, dtype=torch.qint8)
        counts = module_param_counts(model)
        expected = reference(model)
    # 10*20 + 20 and 20*5 + 5 packed weights and biases, out of parameters()
    assert counts == expected and counts[""] == 325 and counts["0"] == 220 and counts["2"] == 105


def test_get_model_profile_uses_it_for_every_module():
    model = TiedLM("same")
    named = list(model.named_modules())
    assert module_params(named) == {"": 1632, "body": 1632, "body.emb": 1600, "body.norm": 32, "head": 1600}
    assert module_params([]) == {}
