"""``aten._grouped_mm`` (mixture-of-experts matmuls): every operand rank, backward, and meta.

Hand-built calls; transformers' Mixtral is in ``test_engine_moe_transformers.py``.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import count_ops


class Grouped(nn.Module):
    """``torch._grouped_mm(x, self.w, offs=offs)`` with a weight of the given shape."""

    def __init__(self, *weight_shape: int):
        super().__init__()
        self.w = nn.Parameter(torch.randn(*weight_shape))

    def forward(self, x, offs=None):
        return torch._grouped_mm(x, self.w, offs=offs)


def _offs(*ends: int) -> torch.Tensor:
    return torch.tensor(ends, dtype=torch.int32)


def _square_loss(y: torch.Tensor) -> torch.Tensor:
    return (y * y).sum()  # (the CPU kernel rejects the expanded gradient that .sum() gives)


@pytest.mark.parametrize("meta", [False, True])
@pytest.mark.parametrize("ends,rows", [((4, 7, 10), 10), ((0, 10, 10), 10), ((2, 2, 6), 6)])
def test_2d_by_3d_prices_the_routed_rows(meta, ends, rows):
    # x (10, 16) routed to 3 experts W (3, 16, 8): rows * 16 * 8 MACs, rows = offs[-1] (the
    # rows the groups cover). 10 rows: 1,280 MACs; 6 rows: 768. FLOPs 2 * MACs (no bias).
    # On meta offs has no values: priced from the shape (all 10 rows), as transformers routes them all.
    counted = count_ops(Grouped(3, 16, 8), torch.randn(10, 16), _offs(*ends), meta=meta)
    expected_rows = 10 if meta else rows
    assert counted.macs == expected_rows * 16 * 8
    assert counted.flops == 2 * counted.macs
    assert counted.untracked == {}


@pytest.mark.parametrize("meta", [False, True])
def test_3d_by_3d_is_a_batched_product(meta):
    # (4, 5, 16) x (4, 16, 8): 4 * 5 * 16 * 8 = 2,560 MACs
    counted = count_ops(Grouped(4, 16, 8), torch.randn(4, 5, 16), meta=meta)
    assert (counted.macs, counted.flops) == (2_560, 5_120)


@pytest.mark.parametrize("meta", [False, True])
def test_2d_by_2d_splits_the_contraction(meta):
    # (5, 16) x (16, 8), K split into groups [0, 6) and [6, 16): out (2, 5, 8); MACs 5 * 16 * 8 = 640
    counted = count_ops(Grouped(16, 8), torch.randn(5, 16), _offs(6, 16), meta=meta)
    assert (counted.macs, counted.flops) == (640, 1_280)


def test_2d_by_2d_counts_only_the_covered_contraction():
    # K groups end at 12 of 16: 5 * 12 * 8 = 480 MACs
    counted = count_ops(Grouped(16, 8), torch.randn(5, 16), _offs(6, 12))
    assert counted.macs == 480


@pytest.mark.parametrize("meta", [False, True])
def test_3d_by_2d_splits_the_columns(meta):
    # (3, 5, 16) x (16, 8), N split [0, 3), [3, 5), [5, 8): out (5, 8); group g: 5 * 16 * n_g -> 5 * 16 * 8 = 640
    counted = count_ops(Grouped(16, 8), torch.randn(3, 5, 16), _offs(3, 5, 8), meta=meta)
    assert (counted.macs, counted.flops) == (640, 1_280)


@pytest.mark.parametrize("meta", [False, True])
def test_backward_is_two_grouped_products(meta):
    # forward (10, 16) x (3, 16, 8): 1,280 MACs; backward: dX = dY (10, 8) x W^T (3, 8, 16) -> 1,280,
    # dW = X^T (16, 10) x dY (10, 8) with K=10 split by offs -> 16 * 10 * 8 = 1,280. Total 3,840.
    x = torch.randn(10, 16, requires_grad=True)
    counted = count_ops(Grouped(3, 16, 8), x, _offs(4, 7, 10), backward=True, loss_fn=_square_loss, meta=meta)
    assert counted.phases["forward"].macs == 1_280
    assert counted.phases["backward"].macs == 2 * 1_280
    assert counted.untracked == {}


def test_backward_without_input_grad_computes_only_dw_for_3d():
    # (4, 5, 16) x (4, 16, 8): forward 2,560; dW = X^T (4, 16, 5) x dY (4, 5, 8) = 2,560; no dX.
    counted = count_ops(Grouped(4, 16, 8), torch.randn(4, 5, 16), backward=True, loss_fn=_square_loss)
    assert (counted.phases["forward"].macs, counted.phases["backward"].macs) == (2_560, 2_560)
