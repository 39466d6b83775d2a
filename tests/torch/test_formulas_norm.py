"""Normalisation formulas. N = input elements, R = statistics groups:

batch statistics: 6N + 4R (+N weight, +N bias);  running statistics (eval BN): 2N + 2C (+N, +N)
RMS norm: 3N + 3R (+N weight);  backward grad_input 9N + 2R (+N weight), grad_weight 2N, grad_bias N
"""
import pytest
import torch
from torch import nn

from tests.torch._formula_harness import aten, call, count

torch.manual_seed(0)
X = torch.randn(2, 4, 6, 6)  # N = 288


@pytest.mark.parametrize("layer, train, flops", [
    # BatchNorm2d(4) train: R = C = 4: 6*288 + 4*4 + 288 + 288 = 2320
    (nn.BatchNorm2d(4), True, 2320),
    # eval, running stats: 2*288 + 2*4 + 288 + 288 = 1160
    (nn.BatchNorm2d(4), False, 1160),
    # no affine: train 1728 + 16 = 1744; eval 576 + 8 = 584
    (nn.BatchNorm2d(4, affine=False), True, 1744),
    (nn.BatchNorm2d(4, affine=False), False, 584),
    # no running stats: batch statistics even in eval: 2320
    (nn.BatchNorm2d(4, track_running_stats=False), False, 2320),
    # LayerNorm(6): R = 288/6 = 48 rows: 6*288 + 4*48 + 2*288 = 2496
    (nn.LayerNorm(6), True, 2496),
    (nn.LayerNorm(6, elementwise_affine=False), True, 1920),  # 1728 + 192
    (nn.LayerNorm(6, bias=False), True, 2208),                # 1728 + 192 + 288
    # LayerNorm([6, 6]): R = 8: 8*288 + 32 = 2336
    (nn.LayerNorm([6, 6]), True, 2336),
    # GroupNorm(2, 4): R = 2 samples * 2 groups = 4: 8*288 + 16 = 2320
    (nn.GroupNorm(2, 4), True, 2320),
    # InstanceNorm2d(4): batch norm over (1, 8, 6, 6), R = 8, no affine: 6*288 + 32 = 1760; affine: + 576
    (nn.InstanceNorm2d(4), False, 1760),
    (nn.InstanceNorm2d(4, affine=True), True, 2336),
    # RMSNorm(6) decomposes on CPU: pow 288, mean 288 + 48, add eps 48, rsqrt 48, mul 288, weight 288
    # = 3*288 + 3*48 + 288 = 1296; without weight 1008
    (nn.RMSNorm(6), True, 1296),
    (nn.RMSNorm(6, elementwise_affine=False), True, 1008),
], ids=lambda v: repr(v) if isinstance(v, nn.Module) else str(v))
def test_norm_layers(layer, train, flops):
    result = count(layer.train(train), X)
    assert (result.macs, result.flops) == (0, flops)


def test_batch_norm_1d_on_2d_input():
    # BatchNorm1d(4) on (3, 4): N = 12, C = 4: 8*12 + 16 = 112
    assert count(nn.BatchNorm1d(4), torch.randn(3, 4)).flops == 112


def test_fused_rms_norm_equals_its_decomposition():
    # the fused kernels (rms_norm / _fused_rms_norm, e.g. on CUDA) cost what the CPU decomposition costs
    x, w = X.to("meta"), torch.empty(6, device="meta")
    assert call(aten._fused_rms_norm.default, x, [6], w, 1e-5) == (0, 1296)
    assert call(aten.rms_norm.default, x, [6], None, 1e-5) == (0, 1008)


def test_batch_norm_op_variants():
    # the functional / export-time variants of batch norm, priced on meta tensors: train 2320, eval 1160
    x, c = X.to("meta"), torch.empty(4, device="meta")
    assert call(aten._native_batch_norm_legit.default, x, c, c, c.clone(), c.clone(), True, 0.1, 1e-5) == (0, 2320)
    assert call(aten._native_batch_norm_legit.no_stats, x, c, c, True, 0.1, 1e-5) == (0, 2320)
    assert call(aten._native_batch_norm_legit_no_training.default, x, c, c, c, c, 0.1, 1e-5) == (0, 1160)
    assert call(aten._batch_norm_with_update.default, x, c, c, c.clone(), c.clone(), 0.1, 1e-5) == (0, 2320)
    assert call(aten._batch_norm_no_update.default, x, c, c, c, c, 0.1, 1e-5) == (0, 1160)


def _backward_flops(layer, op, requires_grad=True):
    x = X.clone().requires_grad_(requires_grad)
    stats = count(layer, x, backward=True).by_operator[op]
    assert stats.macs == 0
    return stats.flops


def test_layer_norm_backward():
    # all grads: grad_input 9*288 + 2*48 + 288 (weight) = 2976; grad_weight 2*288 = 576; grad_bias 288 -> 3840
    assert _backward_flops(nn.LayerNorm(6), "aten.native_layer_norm_backward") == 3840
    # the input needs no grad: output_mask [False, True, True]: 576 + 288 = 864
    assert _backward_flops(nn.LayerNorm(6), "aten.native_layer_norm_backward", requires_grad=False) == 864


def test_batch_and_group_norm_backward():
    # training batch norm: 9*288 + 2*4 + 288 + 576 + 288 = 3752; group norm (R = 4) the same
    assert _backward_flops(nn.BatchNorm2d(4), "aten.native_batch_norm_backward") == 3752
    assert _backward_flops(nn.GroupNorm(2, 4), "aten.native_group_norm_backward") == 3752
    # eval batch norm (running stats): grad_input dy*rstd*w 2*288; grad_weight 4*288; grad_bias 288 -> 2016
    assert _backward_flops(nn.BatchNorm2d(4).eval(), "aten.native_batch_norm_backward") == 2016
