"""Helpers of the formula tests: run code, price what reaches the dispatcher with the REAL table.

Most tests go through the public ``count_ops``. A minimal dispatch mode (``FormulaHarness``)
is kept for what ``count_ops`` cannot show: plain functions with no module around them, and
the fused fast paths of ``nn.TransformerEncoderLayer``, which PyTorch disables whenever a
module hook is attached (``count_ops`` attaches hooks to attribute ops to modules).
"""
from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from deeplite_like.backends.torch.counting import count_ops
from deeplite_like.backends.torch.counting import formulas  # noqa: F401  (fills the table)
from deeplite_like.backends.torch.counting.registry import CountOptions, OpCall, is_free, lookup, op_name

aten = torch.ops.aten


@dataclass
class Counted:
    """Totals of one harness run: MACs, FLOPs, per-op (macs, flops, calls), untracked op names."""

    macs: int = 0
    flops: int = 0
    ops: dict[str, list[int]] = field(default_factory=dict)
    untracked: Counter = field(default_factory=Counter)

    def op(self, name: str) -> tuple[int, int]:
        """(macs, flops) summed over the calls of one operator (``aten.mm``)."""
        macs, flops, _ = self.ops.get(name, (0, 0, 0))
        return macs, flops


class FormulaHarness(TorchDispatchMode):
    """Sums ``lookup(func)(OpCall(...))`` over every op that runs; records untracked ops."""

    def __init__(self, options: CountOptions = CountOptions()):
        super().__init__()
        self.options = options
        self.result = Counted()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = lookup(func)
        name = op_name(func)
        if formula is not None:
            macs, flops = formula(OpCall(func, args, kwargs, out, self.options))
            self.result.macs += macs
            self.result.flops += flops
            entry = self.result.ops.setdefault(name, [0, 0, 0])
            entry[0] += macs
            entry[1] += flops
            entry[2] += 1
        elif not is_free(func):
            self.result.untracked[name] += 1
        return out


def run_counted(fn: Callable[[], Any], causal_half: bool = False) -> Counted:
    """Run ``fn()`` under the harness; fails the test if an op ran untracked."""
    harness = FormulaHarness(CountOptions(causal_half=causal_half))
    with harness:
        fn()
    assert not harness.result.untracked, f"untracked ops: {dict(harness.result.untracked)}"
    return harness.result


class Fn(nn.Module):
    """Wraps a function so that ``count_ops`` can run it."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def count(model_or_fn: nn.Module | Callable[..., Any], *args, **kwargs):
    """``count_ops`` with the real table; fails the test if an op ran untracked."""
    model = model_or_fn if isinstance(model_or_fn, nn.Module) else Fn(model_or_fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. torch's "LSTM with projections is not supported with oneDNN"
        result = count_ops(model, *args, warn_untracked=False, **kwargs)
    assert not result.untracked, f"untracked ops: {result.untracked}"
    return result


def flop_counter_flops(fn: Callable[[], Any]) -> int:
    """FLOPs by ``torch.utils.flop_counter.FlopCounterMode`` (2 x MACs of contractions only)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return counter.get_total_flops()


def call(op, *args, options: CountOptions = CountOptions(), **kwargs):
    """Price one op overload on given (meta) arguments without running it on a device.

    The output is computed by running the op on meta tensors, so the formula sees real shapes.
    """
    out = op(*args, **kwargs)
    formula = lookup(op)
    assert formula is not None, f"no formula for {op}"
    return formula(OpCall(op, args, kwargs, out, options))
