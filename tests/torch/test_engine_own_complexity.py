"""deeplite-profiler's custom-module hook: a module's own ``compute_module_complexity(inputs, outputs)``."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import (Cost, FormulaError, ForwardError, UntrackedOpWarning, count_ops,
                                                    register_module_formula, unregister_module_formula)

from .engine_fixtures import mystery, stats, toy_table  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("toy_table")


class CustomConv(nn.Conv2d):
    """deeplite's own test module: a 2-bit conv that declares 0 MACs (deeplite's dict)."""

    def compute_module_complexity(self, inputs, outputs):
        return dict(flops=0, param_size={"weight": 2 / 8}, activation_size=4 / 8)


class Projection(nn.Module):
    """Runs an op with no formula; declares its cost from the shapes it is given."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.seen = []

    def forward(self, x):
        return mystery(self.fc(x))

    def compute_module_complexity(self, inputs, outputs):
        self.seen.append((tuple(inputs[0].shape), tuple(outputs.shape)))
        return {"flops": inputs[0].shape[0] * 4 * 8}  # deeplite's flops: multiply-accumulates


class OursCost(Projection):
    def compute_module_complexity(self, inputs, outputs):
        return Cost(macs=7, flops=20)


class OursDict(Projection):
    def compute_module_complexity(self, inputs, outputs):
        return {"macs": 5, "flops": 11}


class Number(Projection):
    def compute_module_complexity(self, inputs, outputs):
        return 9


class Inherits(Projection):
    pass


def test_deeplite_dict_flops_are_the_module_macs_and_inner_ops_are_not_counted():
    model = nn.Sequential(nn.Linear(4, 4), Projection())
    with warnings.catch_warnings():
        warnings.simplefilter("error", UntrackedOpWarning)  # mystery inside is never looked at
        result = count_ops(model, torch.randn(3, 4))
    # Projection, batch 3: flops (= MACs) 3*4*8 = 96 -> FLOPs 2*96 = 192
    assert stats(result.by_module["1"]) == (96, 192, 1)
    assert stats(result.by_operator["module:Projection"]) == (96, 192, 1)
    assert "1.fc" not in result.by_module
    # Linear(4, 4), batch 3: 48 MACs, 96 + bias 12 = 108 FLOPs
    assert (result.macs, result.flops) == (48 + 96, 108 + 192)
    assert model[1].seen == [((3, 4), (3, 8))]  # called with the input tuple and the output


def test_deeplite_custom_conv_declaring_zero_is_zero_and_sizes_do_not_change_counting():
    model = nn.Sequential(CustomConv(3, 32, kernel_size=5, stride=1, padding=2), nn.ReLU())
    result = count_ops(model, torch.randn(1, 3, 8, 8))
    assert stats(result.by_module["0"]) == (0, 0, 1)
    assert stats(result.by_operator["module:CustomConv"]) == (0, 0, 1)
    assert "aten.convolution" not in result.by_operator
    assert result.macs == 0 and result.flops == 32 * 8 * 8  # the ReLU only: one FLOP per element


@pytest.mark.parametrize("cls, expected", [(OursCost, (7, 20)), (OursDict, (5, 11)), (Number, (9, 18)),
                                           (Inherits, (2 * 32, 2 * 64))])
def test_every_return_form_and_inheritance(cls, expected):
    result = count_ops(cls(), torch.randn(2, 4))
    assert (result.macs, result.flops) == expected
    assert stats(result.by_operator[f"module:{cls.__name__}"]) == (*expected, 1)


def test_a_registered_formula_of_a_subclass_wins_over_the_inherited_method():
    register_module_formula(Inherits)(lambda m, a, k, o: Cost(1, 3))
    try:
        assert (count_ops(Inherits(), torch.randn(2, 4)).macs, count_ops(Projection(), torch.randn(2, 4)).macs) \
            == (1, 64)
    finally:
        unregister_module_formula(Inherits)


class Bad(Projection):
    def compute_module_complexity(self, inputs, outputs):
        return {"param_size": 4}


def test_a_result_without_flops_names_the_module_and_the_contract():
    with pytest.raises(ForwardError, match=r"module '0' \(Bad\)") as info:
        count_ops(nn.Sequential(Bad()), torch.randn(2, 4))
    assert isinstance(info.value.__cause__, FormulaError)
    assert "Bad.compute_module_complexity returned a dict with keys ['param_size']; it needs 'flops'" \
        in str(info.value)
