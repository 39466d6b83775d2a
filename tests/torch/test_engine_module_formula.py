"""A module formula prices a whole module instead of the ops inside it."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import (Cost, FormulaError, ForwardError, UntrackedOpWarning, count_ops,
                                                    register_module_formula, unregister_module_formula)

from .engine_fixtures import mystery, stats, toy_table  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("toy_table")


class Block(nn.Module):
    """Runs an op with no formula inside: only a module formula can price it."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(mystery(self.fc1(x)))


class SubBlock(Block):
    pass


class Wrap(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)


def block_formula(module, args, kwargs, output):
    """Both projections per row: rows*(4*8 + 8*4) MACs, plus one FLOP per output element."""
    rows = args[0].shape[0]
    return Cost.contraction(rows * (4 * 8 + 8 * 4), extra_flops=output.numel())


@pytest.fixture
def block_priced():
    register_module_formula(Block)(block_formula)
    yield
    unregister_module_formula(Block)


@pytest.mark.usefixtures("block_priced")
def test_module_formula_replaces_the_inner_ops():
    model = nn.Sequential(nn.Linear(4, 4), Block())
    with warnings.catch_warnings():
        warnings.simplefilter("error", UntrackedOpWarning)  # mystery inside Block is not looked at
        result = count_ops(model, torch.randn(2, 4))
    # Block, batch 2: MACs = 2*(32 + 32) = 128; FLOPs = 2*128 + output 2*4 = 264
    assert stats(result.by_module["1"]) == (128, 264, 1)
    assert stats(result.by_operator["module:Block"]) == (128, 264, 1)
    assert {k: stats(v) for k, v in result.module_ops["1"].items()} == {"module:Block": (128, 264, 1)}
    assert "1.fc1" not in result.by_module and "aten.addmm" in result.by_operator
    # Linear(4, 4), batch 2: MACs 2*4*4 = 32, FLOPs 64 + bias 8 = 72
    assert stats(result.by_module["0"]) == (32, 72, 1)
    assert (result.macs, result.flops) == (160, 336)
    assert result.untracked == {}


@pytest.mark.usefixtures("block_priced")
def test_subclass_uses_the_base_class_formula_under_its_own_name():
    result = count_ops(SubBlock(), torch.randn(3, 4))
    # rows 3: MACs = 3*64 = 192; FLOPs = 384 + 3*4 = 396
    assert stats(result.by_operator["module:SubBlock"]) == (192, 396, 1)
    assert stats(result.by_module[""]) == (192, 396, 1)


def test_without_a_module_formula_the_inner_ops_are_counted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UntrackedOpWarning)
        result = count_ops(Block(), torch.randn(2, 4))
    # fc1: 2*4*8 = 64 MACs, 128 + 16 FLOPs; fc2: 2*8*4 = 64 MACs, 128 + 8 FLOPs; mystery untracked
    assert (result.macs, result.flops) == (128, 280)
    assert result.untracked == {"dltest.mystery": 1}


def test_registering_twice_needs_override():
    register_module_formula(Block)(block_formula)
    try:
        with pytest.raises(ValueError, match="override=True"):
            register_module_formula(Block)(lambda m, a, k, o: Cost())
        with pytest.raises(TypeError):
            register_module_formula(int)
    finally:
        unregister_module_formula(Block)


def test_a_raising_module_formula_names_the_module():
    @register_module_formula(Block)
    def broken(module, args, kwargs, output):
        return 3  # not a Cost

    try:
        with pytest.raises(ForwardError, match=r"module 'block' \(Block\)") as info:
            count_ops(Wrap(), torch.randn(2, 4))
    finally:
        unregister_module_formula(Block)
    assert isinstance(info.value.__cause__, FormulaError)
