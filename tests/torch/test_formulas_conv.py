"""Convolution formulas: ranks 1-3, grouped, depthwise, strided, dilated, transposed, backward.

regular:    MACs = numel(out)   * (C_in / groups)  * prod(kernel)
transposed: MACs = numel(input) * (C_out / groups) * prod(kernel);  bias: numel(out) FLOPs
"""
import pytest
import torch
from torch import nn

from tests.torch._formula_harness import count, flop_counter_flops

torch.manual_seed(0)

CASES = [
    # Conv2d(3, 8, 3, stride=2, padding=1) on 1x3x32x32: out 16x16;
    # MACs = 8*16*16 * 3*3*3 = 55296; bias 8*16*16 = 2048
    (nn.Conv2d(3, 8, 3, stride=2, padding=1), (1, 3, 32, 32), 55296, 2048),
    # Conv1d(4, 8, 3, stride=2, padding=1, dilation=2) on 2x4x10: L = (10 + 2 - 2*2 - 1)//2 + 1 = 4;
    # MACs = 2*8*4 * 4*3 = 768; bias 2*8*4 = 64
    (nn.Conv1d(4, 8, 3, stride=2, padding=1, dilation=2), (2, 4, 10), 768, 64),
    # Conv3d(4, 8, 3, bias=False) on 1x4x5x5x5: out 3x3x3; MACs = 8*27 * 4*27 = 23328; no bias
    (nn.Conv3d(4, 8, 3, bias=False), (1, 4, 5, 5, 5), 23328, 0),
    # grouped Conv2d(4, 8, 3, groups=2) on 2x4x6x6: out 4x4; MACs = 2*8*16 * (4/2)*9 = 4608; bias 256
    (nn.Conv2d(4, 8, 3, groups=2), (2, 4, 6, 6), 4608, 256),
    # depthwise Conv2d(4, 4, 3, padding=1, groups=4) on 1x4x5x5: out 5x5; MACs = 4*25 * 1*9 = 900; bias 100
    (nn.Conv2d(4, 4, 3, padding=1, groups=4), (1, 4, 5, 5), 900, 100),
    # depthwise Conv1d(6, 12, 5, stride=2, groups=6) on 1x6x11: L = (11-5)//2 + 1 = 4;
    # MACs = 12*4 * 1*5 = 240; bias 48
    (nn.Conv1d(6, 12, 5, stride=2, groups=6), (1, 6, 11), 240, 48),
    # depthwise Conv3d(2, 2, 2, dilation=2, groups=2) on 1x2x5x5x5: out 5 - 2 = 3 per dim;
    # MACs = 2*27 * 1*8 = 432; bias 54
    (nn.Conv3d(2, 2, 2, dilation=2, groups=2), (1, 2, 5, 5, 5), 432, 54),
    # ConvTranspose2d(4, 8, 3, stride=2) on 2x4x6x6: out (6-1)*2 + 3 = 13;
    # MACs = numel(in) 2*4*36 * 8 * 9 = 20736; bias 2*8*13*13 = 2704
    (nn.ConvTranspose2d(4, 8, 3, stride=2), (2, 4, 6, 6), 20736, 2704),
    # ConvTranspose1d(4, 8, 3, stride=2, output_padding=1, groups=2) on 2x4x10: out (10-1)*2 + 3 + 1 = 22;
    # MACs = 2*4*10 * (8/2) * 3 = 960; bias 2*8*22 = 352
    (nn.ConvTranspose1d(4, 8, 3, stride=2, output_padding=1, groups=2), (2, 4, 10), 960, 352),
    # ConvTranspose3d(2, 4, 2, stride=2) on 1x2x3x3x3: out 6 per dim; MACs = 2*27 * 4 * 8 = 1728; bias 4*216 = 864
    (nn.ConvTranspose3d(2, 4, 2, stride=2), (1, 2, 3, 3, 3), 1728, 864),
    # ConvTranspose2d(4, 6, 3, padding=1, dilation=2, groups=2) on 1x4x5x5:
    # out (5-1) - 2*1 + 2*(3-1) + 1 = 7; MACs = 4*25 * (6/2) * 9 = 2700; bias 6*49 = 294
    (nn.ConvTranspose2d(4, 6, 3, padding=1, dilation=2, groups=2), (1, 4, 5, 5), 2700, 294),
    # Conv2d(4, 8, 3, padding=1, padding_mode='circular') on 2x4x6x6: the circular pad is free,
    # then a plain conv on 2x4x8x8 -> 6x6: MACs = 2*8*36 * 4*9 = 20736; bias 576
    (nn.Conv2d(4, 8, 3, padding=1, padding_mode="circular"), (2, 4, 6, 6), 20736, 576),
]


@pytest.mark.parametrize("layer, shape, macs, bias_flops", CASES,
                         ids=lambda c: repr(c) if isinstance(c, nn.Module) else None)
def test_convolution_forward(layer, shape, macs, bias_flops):
    x = torch.randn(shape)
    result = count(layer, x)
    assert (result.macs, result.flops) == (macs, 2 * macs + bias_flops)
    assert flop_counter_flops(lambda: layer(x)) == 2 * macs  # peer: products only, no bias


def test_functional_conv_and_meta_agree():
    # F.conv2d reaches the counter as aten.convolution, as the module does; meta=True prices the same
    layer = nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x = torch.randn(1, 3, 32, 32)
    assert count(lambda t: torch.nn.functional.conv2d(t, layer.weight, layer.bias, 2, 1), x).macs == 55296
    assert count(layer, x, meta=True).macs == 55296


def test_convolution_backward_grad_weight_and_bias_only():
    # Conv2d(3, 8, 3, stride=2, padding=1) on 1x3x32x32 (MACs 55296, bias 2048), backward with an
    # input that does not require grad: output_mask = [False, True, True]:
    # grad_weight 55296 MACs + grad_bias sum over 8*16*16 = 2048 FLOPs
    layer = nn.Conv2d(3, 8, 3, stride=2, padding=1)
    result = count(layer, torch.randn(1, 3, 32, 32), backward=True)
    stats = result.by_operator["aten.convolution_backward"]
    assert (stats.macs, stats.flops) == (55296, 2 * 55296 + 2048)


def test_convolution_backward_with_input_grad_matches_peer():
    # input requires grad: grad_input (55296) + grad_weight (55296) MACs; grad_bias 2048 FLOPs
    layer = nn.Conv2d(3, 8, 3, stride=2, padding=1)
    x = torch.randn(1, 3, 32, 32, requires_grad=True)
    result = count(layer, x, backward=True)
    stats = result.by_operator["aten.convolution_backward"]
    assert (stats.macs, stats.flops) == (110592, 2 * 110592 + 2048)

    def step():
        layer(x).sum().backward()
    # FlopCounterMode: forward 2*55296 + backward 4*55296 (it ignores the bias and the sum)
    assert flop_counter_flops(step) == 6 * 55296


def test_grouped_convolution_backward_peer_overcounts_grad_weight():
    # grouped Conv2d(4, 8, 3, groups=2) on 2x4x6x6: forward MACs 4608 (see CASES);
    # backward with input grad: grad_input 4608 + grad_weight 4608 MACs
    layer = nn.Conv2d(4, 8, 3, groups=2)
    x = torch.randn(2, 4, 6, 6, requires_grad=True)
    stats = count(layer, x, backward=True).by_operator["aten.convolution_backward"]
    assert stats.macs == 2 * 4608

    def step():
        layer(x).sum().backward()
    # FlopCounterMode prices grad_weight as a conv over all C_in (not C_in/groups): 2 * 4608 * groups too much
    assert flop_counter_flops(step) == 2 * 4608 * (1 + 1 + 2)


def test_transposed_convolution_backward():
    # ConvTranspose2d(4, 8, 3, stride=2) on 2x4x6x6: forward MACs 20736; grad_input + grad_weight = 2*20736,
    # grad_bias = numel(grad_out) = 2*8*13*13 = 2704
    layer = nn.ConvTranspose2d(4, 8, 3, stride=2)
    x = torch.randn(2, 4, 6, 6, requires_grad=True)
    stats = count(layer, x, backward=True).by_operator["aten.convolution_backward"]
    assert (stats.macs, stats.flops) == (41472, 2 * 41472 + 2704)
