"""Shared pieces of the counting-engine tests: a hermetic toy formula table and custom ops.

The engine tests check the engine (attribution, phases, safety), not the real formulas, so
they run against a small table whose rules are written here and used in the hand
derivations of every test:

    aten.mm      (m, k) @ (k, n)           MACs = m*n*k,    FLOPs = 2*m*n*k
    aten.addmm   bias + (m, k) @ (k, n)    MACs = m*n*k,    FLOPs = 2*m*n*k + m*n (bias add)
    aten.bmm     (b, m, k) @ (b, k, n)     MACs = b*m*n*k,  FLOPs = 2*b*m*n*k
    elementwise  add, sub, mul, div, relu, threshold_backward, softmax:  FLOPs = numel(out)
    aten.sum     FLOPs = numel(input)
    free         views, copies, detach, expand, ones_like, embedding, ...

The fixture swaps the real table out for this one and puts the real one back afterwards.
"""
from __future__ import annotations

import pytest
import torch

from deeplite_like.backends.torch.counting import Cost, register_formula, register_free, registry

aten = torch.ops.aten


# -- custom ops (torch.library registrations are process-wide: define each name once) ---------
@torch.library.custom_op("dltest::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    """An op nobody wrote a formula for."""
    return x.clone()


@mystery.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("dltest::priced", mutates_args=())
def priced(x: torch.Tensor) -> torch.Tensor:
    """An op that the tests give a formula: 3 FLOPs per element."""
    return x * 3


@priced.register_fake
def _(x):
    return torch.empty_like(x)


# -- the toy table -------------------------------------------------------------------------
def _mm(call):
    (m, k), (_, n) = call.args[0].shape, call.args[1].shape
    return Cost.contraction(m * n * k)


def _addmm(call):
    (m, k), (_, n) = call.args[1].shape, call.args[2].shape
    return Cost.contraction(m * n * k, extra_flops=m * n)


def _bmm(call):
    (b, m, k), (_, _, n) = call.args[0].shape, call.args[1].shape
    return Cost.contraction(b * m * n * k)


def _elementwise(call):
    return Cost.elementwise(call.out.numel())


def _sum(call):
    return Cost.elementwise(call.args[0].numel())


TOY_FREE = (aten.t, aten.view, aten._unsafe_view, aten.expand, aten.detach, aten.ones_like, aten.clone,
            aten.transpose, aten.permute, aten.alias, aten.reshape, aten.unsqueeze, aten.squeeze, aten.slice,
            aten.select, aten._to_copy, aten.copy_, aten.zeros_like, aten.empty_like, aten.embedding,
            aten.split, aten.cat, aten.full, aten.triu, aten.arange)


def install_toy_table() -> None:
    register_formula(aten.mm)(_mm)
    register_formula(aten.addmm)(_addmm)
    register_formula(aten.bmm)(_bmm)
    register_formula(aten.add, aten.sub, aten.mul, aten.div, aten.relu, aten.threshold_backward,
                     aten._softmax)(_elementwise)
    register_formula(aten.sum)(_sum)
    register_free(*TOY_FREE)


@pytest.fixture
def toy_table():
    """Only the toy table above is registered for the test; the real one is restored after."""
    saved_formulas, saved_free = dict(registry._FORMULAS), set(registry._FREE)
    registry._FORMULAS.clear()
    registry._FREE.clear()
    try:
        install_toy_table()
        yield
    finally:
        registry._FORMULAS.clear()
        registry._FORMULAS.update(saved_formulas)
        registry._FREE.clear()
        registry._FREE.update(saved_free)


def stats(op_stats) -> tuple[int, int, int]:
    """``OpStats`` as ``(macs, flops, calls)`` for compact asserts."""
    return op_stats.macs, op_stats.flops, op_stats.calls
