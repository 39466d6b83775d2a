"""Pooling formulas, ranks 1-3. K = prod(kernel): max numel(out)*K, avg numel(out)*(K + 1);
adaptive pools: the elements of every output window (+ one divide per output for avg)."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from deeplite_like.backends.torch.counting.formulas.conv import adaptive_window_elements
from tests.torch._formula_harness import count, run_counted

torch.manual_seed(0)
X1 = torch.randn(1, 2, 7)
X2 = torch.randn(1, 2, 7, 7)
X3 = torch.randn(1, 2, 5, 5, 5)


@pytest.mark.parametrize("layer, x, flops", [
    # MaxPool1d(3, 2) on length 7: out (7-3)//2 + 1 = 3, 2 channels: 6 outputs * 3 = 18
    (nn.MaxPool1d(3, 2), X1, 18),
    # MaxPool2d(3, 2, padding=1) on 7x7: out (7+2-3)//2 + 1 = 4: 2*16 = 32 outputs * 9 = 288
    (nn.MaxPool2d(3, 2, padding=1), X2, 288),
    # MaxPool2d(2, 2, dilation=2, ceil_mode=True) on 7x7: out ceil((7-2-1)/2) + 1 = 3: 18 outputs * 4 = 72
    (nn.MaxPool2d(2, 2, dilation=2, ceil_mode=True), X2, 72),
    # MaxPool3d(2) on 5^3: out 2^3 per channel: 16 outputs * 8 = 128
    (nn.MaxPool3d(2), X3, 128),
    # AvgPool1d(3, 2): 6 outputs * (3 + 1) = 24
    (nn.AvgPool1d(3, 2), X1, 24),
    # AvgPool2d(3, 2, padding=1): 32 * (9 + 1) = 320
    (nn.AvgPool2d(3, 2, padding=1), X2, 320),
    # AvgPool3d(2): 16 * (8 + 1) = 144
    (nn.AvgPool3d(2), X3, 144),
    # AdaptiveAvgPool2d((3, 2)) on 7x7: rows windows [0,3) [2,5) [4,7) = 9; cols [0,4) [3,7) = 8;
    # 2 channels: 2*9*8 = 144 + 6 outputs * 2 divides = 156
    (nn.AdaptiveAvgPool2d((3, 2)), X2, 156),
    # AdaptiveAvgPool2d(1) runs as mean: 98 + 2 = 100 (the adaptive formula gives the same: 2*49 + 2)
    (nn.AdaptiveAvgPool2d(1), X2, 100),
    # AdaptiveAvgPool1d(3) on 7: windows 3 + 3 + 3 = 9: 2*9 + 6 = 24
    (nn.AdaptiveAvgPool1d(3), X1, 24),
    # AdaptiveAvgPool3d(2) on 5^3: windows [0,3) [2,5) -> 6 per dim: 2*216 + 16 = 448
    (nn.AdaptiveAvgPool3d(2), X3, 448),
    # AdaptiveMaxPool1d(3): 2*9 = 18; 2d (3): 2*9*9 = 162; 3d (2): 2*216 = 432
    (nn.AdaptiveMaxPool1d(3), X1, 18),
    (nn.AdaptiveMaxPool2d(3), X2, 162),
    (nn.AdaptiveMaxPool3d(2), X3, 432),
    # LPPool2d(2, 2) decomposes: pow 98 + avg_pool2d 18 outputs * 5 = 90 + sign, abs, relu, mul, mul, pow on 18 = 108
    (nn.LPPool2d(2, 2), X2, 296),
    # FractionalMaxPool2d(2, output_size=3): 18 outputs * 4 = 72
    (nn.FractionalMaxPool2d(2, output_size=3), X2, 72),
], ids=lambda v: repr(v) if isinstance(v, nn.Module) else "")
def test_pooling_forward(layer, x, flops):
    result = count(layer, x)
    assert (result.macs, result.flops) == (0, flops)


def test_adaptive_windows_when_upsampling():
    # 4 -> 6: windows [0,1) [0,2) [1,2) [2,3) [2,4) [3,4) = 1+2+1+1+2+1 = 8; 4 -> 8: eight windows of 1
    assert adaptive_window_elements([4], [6]) == 8
    assert adaptive_window_elements([4, 4], [6, 8]) == 64


@pytest.mark.parametrize("fn, x, op, flops", [
    # max-pool backward: one add per grad element: 32
    (lambda x: F.max_pool2d(x, 3, 2, padding=1), X2, "aten.max_pool2d_with_indices_backward", 32),
    # avg-pool backward: (K + 1) per grad element: 32 * 10 = 320
    (lambda x: F.avg_pool2d(x, 3, 2, padding=1), X2, "aten.avg_pool2d_backward", 320),
    # adaptive avg backward: as the forward, 156
    (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), X2, "aten._adaptive_avg_pool2d_backward", 156),
    # adaptive max backward: 18 grad elements
    (lambda x: F.adaptive_max_pool2d(x, 3), X2, "aten.adaptive_max_pool2d_backward", 18),
    # 3-D, kernel 2 on 5^3: 16 grad elements; max 16, avg 16 * (8 + 1) = 144
    (lambda x: F.max_pool3d(x, 2), X3, "aten.max_pool3d_with_indices_backward", 16),
    (lambda x: F.avg_pool3d(x, 2), X3, "aten.avg_pool3d_backward", 144),
])
def test_pooling_backward(fn, x, op, flops):
    leaf = x.clone().requires_grad_()
    result = run_counted(lambda: fn(leaf).sum().backward())
    assert result.op(op) == (0, flops)
