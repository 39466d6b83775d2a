"""Ops with no formula are counted 0, listed and warned about once; custom ops can be priced."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import (Cost, FormulaError, ForwardError, UntrackedOpWarning, count_ops,
                                                   register_formula, unregister)

from .engine_fixtures import priced, mystery, stats, toy_table  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("toy_table")


class UsesMystery(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return mystery(mystery(self.fc(x)))


def test_untracked_op_is_reported_and_warned_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = count_ops(UsesMystery(), torch.randn(2, 4))
    untracked_warnings = [w for w in caught if issubclass(w.category, UntrackedOpWarning)]
    assert len(untracked_warnings) == 1
    assert "dltest.mystery (2 calls)" in str(untracked_warnings[0].message)
    assert result.untracked == {"dltest.mystery": 2}
    # counted as 0: only the Linear(4, 4), batch 2: MACs 2*4*4 = 32, FLOPs 64 + bias 8 = 72
    assert (result.macs, result.flops) == (32, 72)
    assert "dltest.mystery" not in result.by_operator


def test_warning_can_be_turned_off_but_the_op_is_still_listed():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UntrackedOpWarning)
        result = count_ops(UsesMystery(), torch.randn(2, 4), warn_untracked=False)
    assert result.untracked == {"dltest.mystery": 2}


def test_custom_op_with_a_registered_formula():
    @register_formula("dltest::priced")
    def priced_formula(call):
        """3 FLOPs per output element."""
        return Cost.elementwise(3 * call.out.numel())

    class UsesPriced(nn.Module):
        def forward(self, x):
            return priced(x)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UntrackedOpWarning)  # the op must not be untracked
            result = count_ops(UsesPriced(), torch.randn(2, 5))
    finally:
        unregister("dltest::priced")
    # 3 FLOPs x 10 elements = 30; the multiply inside the op's implementation is not seen again
    assert (result.macs, result.flops) == (0, 30)
    assert stats(result.by_operator["dltest.priced"]) == (0, 30, 1)
    assert result.untracked == {}


def test_a_raising_formula_is_reported_with_the_op_and_shapes():
    @register_formula("dltest::priced")
    def broken(call):
        raise KeyError("oops")

    class UsesPriced(nn.Module):
        def forward(self, x):
            return priced(x)

    try:
        with pytest.raises(ForwardError) as info:
            count_ops(UsesPriced(), torch.randn(2, 5))
    finally:
        unregister("dltest::priced")
    formula_error = info.value.__cause__
    assert isinstance(formula_error, FormulaError)
    assert "dltest.priced" in str(formula_error) and "Tensor[float32, 2x5]" in str(formula_error)
    assert isinstance(formula_error.__cause__, KeyError)


def test_count_options_reach_the_formulas():
    @register_formula("dltest::priced")
    def halves(call):
        """4 FLOPs per element, 2 when counting causal attention as half."""
        return Cost.elementwise((2 if call.options.causal_half else 4) * call.out.numel())

    class UsesPriced(nn.Module):
        def forward(self, x):
            return priced(x)

    try:
        dense = count_ops(UsesPriced(), torch.randn(3))
        half = count_ops(UsesPriced(), torch.randn(3), causal_half=True)
    finally:
        unregister("dltest::priced")
    assert (dense.flops, half.flops) == (4 * 3, 2 * 3)
