"""Interpolation: per OUTPUT element, a weighted sum of n neighbours = 2n - 1 FLOPs
(linear 3, bilinear 7, trilinear 15, bicubic 31); nearest is an indexed copy: free."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from tests.torch._formula_harness import count, run_counted

torch.manual_seed(0)
X = torch.randn(1, 2, 4, 4)


@pytest.mark.parametrize("kwargs, flops", [
    (dict(size=(6, 8), mode="nearest"), 0),                  # free
    (dict(scale_factor=1.5, mode="nearest"), 0),
    (dict(size=(6, 8), mode="nearest-exact"), 0),
    (dict(size=(6, 8), mode="bilinear"), 7 * 96),            # out 2*6*8 = 96 elements
    (dict(size=(6, 6), mode="bilinear"), 7 * 72),            # out 2*6*6 = 72
    (dict(scale_factor=1.5, mode="bilinear"), 7 * 72),       # the same output size, the same count
    (dict(scale_factor=2, mode="bilinear", align_corners=True), 7 * 128),  # out 2*8*8 = 128
    (dict(size=(6, 8), mode="bicubic"), 31 * 96),
    (dict(scale_factor=1.5, mode="bicubic"), 31 * 72),
    # area runs as adaptive avg pooling 4 -> 6 (windows 8 rows) and 4 -> 8 (8 cols): 2*8*8 + 96 divides
    (dict(size=(6, 8), mode="area"), 128 + 96),
    # antialias bilinear 4x4 -> 2x2, scale 2: support 1*2 = 2, taps 2*2 + 1 = 5, 9 FLOPs per output of a pass;
    # width pass -> (1, 2, 4, 2): 16 * 9 = 144; height pass -> (1, 2, 2, 2): 8 * 9 = 72 -> 216
    (dict(size=(2, 2), mode="bilinear", antialias=True), 216),
])
def test_interpolate_2d(kwargs, flops):
    result = count(lambda x: F.interpolate(x, **kwargs), X)
    assert (result.macs, result.flops) == (0, flops)


def test_interpolate_1d_and_3d():
    # linear (1, 2, 5) -> 7: 14 outputs * 3 = 42; nearest 1-D free
    assert count(lambda x: F.interpolate(x, size=7, mode="linear"), torch.randn(1, 2, 5)).flops == 42
    assert count(lambda x: F.interpolate(x, size=7, mode="nearest"), torch.randn(1, 2, 5)).flops == 0
    # trilinear (1, 2, 3, 3, 3) scale 2 -> 6^3: 2*216 = 432 outputs * 15 = 6480; nearest 3-D free
    x3 = torch.randn(1, 2, 3, 3, 3)
    assert count(nn.Upsample(scale_factor=2, mode="trilinear"), x3).flops == 6480
    assert count(nn.Upsample(scale_factor=2, mode="nearest"), x3).flops == 0


def test_interpolate_backward():
    # bilinear backward: each of the 96 grad elements goes to 4 neighbours: 4 mul + 4 add = 8 -> 768
    x = X.clone().requires_grad_()
    result = run_counted(lambda: F.interpolate(x, size=(6, 8), mode="bilinear").sum().backward())
    assert result.op("aten.upsample_bilinear2d_backward") == (0, 768)
    # nearest backward sums grads: 1 per grad element = 96
    result = run_counted(lambda: F.interpolate(x, size=(6, 8), mode="nearest").sum().backward())
    assert result.op("aten.upsample_nearest2d_backward") == (0, 96)


def test_grid_sample_and_affine_grid():
    grid = torch.rand(1, 3, 3, 2) * 2 - 1
    # grid_sample bilinear: out (1, 2, 3, 3) = 18 elements * 7 = 126; nearest 0; bicubic 18 * 31 = 558
    assert run_counted(lambda: F.grid_sample(X, grid, align_corners=False)).op("aten.grid_sampler_2d") == (0, 126)
    assert run_counted(lambda: F.grid_sample(X, grid, mode="nearest", align_corners=False)).flops == 0
    assert run_counted(lambda: F.grid_sample(X, grid, mode="bicubic", align_corners=False)).op(
        "aten.grid_sampler_2d") == (0, 558)
    # affine_grid: out (1, 3, 3, 2) = 18 coordinates, each a 3-term dot with a theta row: 54 MACs
    result = run_counted(lambda: F.affine_grid(torch.randn(1, 2, 3), [1, 2, 3, 3], align_corners=False))
    assert (result.macs, result.flops) == (54, 108)


def test_pixel_shuffle_and_unfold_are_free_fold_sums():
    assert count(nn.PixelShuffle(2), torch.randn(1, 8, 2, 2)).flops == 0
    assert count(nn.Unfold(2), X).flops == 0
    # F.fold (col2im) of (1, 12, 9) into 4x4 with kernel 2: overlapping patches are summed, 108 inputs
    assert count(nn.Fold((4, 4), 2), torch.randn(1, 12, 9)).flops == 108


def test_grid_sample_backward():
    # bilinear, grad_output (1, 2, 3, 3) = 18 elements, 4 neighbours: input grad 8 + grid grad 8 per element
    x, grid = X.clone().requires_grad_(), (torch.rand(1, 3, 3, 2) * 2 - 1).requires_grad_()
    result = run_counted(lambda: F.grid_sample(x, grid, align_corners=False).sum().backward())
    assert result.op("aten.grid_sampler_2d_backward") == (0, 18 * 16)
    fixed_grid = grid.detach()  # only the input's grad: 18 * 8
    result = run_counted(lambda: F.grid_sample(x, fixed_grid, align_corners=False).sum().backward())
    assert result.op("aten.grid_sampler_2d_backward") == (0, 18 * 8)
