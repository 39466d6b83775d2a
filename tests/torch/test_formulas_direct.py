"""Formulas for ops a CPU forward rarely shows (backend kernels, composites seen whole, backward ops),
priced directly on their arguments; each expected value derived by hand."""
import pytest
import torch
from torch.nn import functional as F

from deeplite_like.backends.torch.counting.registry import OpCall, lookup
from tests.torch._formula_harness import aten, call, run_counted

torch.manual_seed(0)
META = dict(device="meta")


def price(op, *args, out=None, **kwargs):
    """A formula on given arguments, for ops with no meta kernel (the output is given or unused)."""
    return lookup(op)(OpCall(op, args, kwargs, out))


# Conv2d(3, 8, 3, stride=2, padding=1) on 1x3x32x32: out 1x8x16x16 = 2048; MACs = 2048 * 3*3*3 = 55296
X_CONV = torch.empty(1, 3, 32, 32, **META)
W_CONV, B_CONV = torch.empty(8, 3, 3, 3, **META), torch.empty(8, **META)
OUT_CONV = torch.empty(1, 8, 16, 16, **META)


def test_backend_convolution_kernels():
    op = aten.mkldnn_convolution.default
    assert price(op, X_CONV, W_CONV, B_CONV, [1, 1], [2, 2], [1, 1], 1, out=OUT_CONV) == (55296, 110592 + 2048)
    op = aten.cudnn_convolution.default  # no bias argument
    assert price(op, X_CONV, W_CONV, [1, 1], [2, 2], [1, 1], 1, False, False, True, out=OUT_CONV) == (55296, 110592)
    # conv + bias + ReLU: + 2048 bias + 2048 ReLU
    op = aten.cudnn_convolution_relu.default
    assert price(op, X_CONV, W_CONV, B_CONV, [2, 2], [1, 1], [1, 1], 1, out=OUT_CONV) == (55296, 110592 + 4096)
    # conv + bias + z + ReLU: + 2048 bias + (add 1 + ReLU 1) * 2048; alpha != 1 adds one more per element
    op = aten.cudnn_convolution_add_relu.default
    assert price(op, X_CONV, W_CONV, OUT_CONV, None, B_CONV, [2, 2], [1, 1], [1, 1], 1, out=OUT_CONV) \
        == (55296, 110592 + 2048 + 4096)
    assert price(op, X_CONV, W_CONV, OUT_CONV, 0.5, B_CONV, [2, 2], [1, 1], [1, 1], 1, out=OUT_CONV) \
        == (55296, 110592 + 2048 + 6144)


def test_composite_transposed_conv_and_conv_tbc():
    # conv_transpose2d seen whole: ConvTranspose2d(4, 8, 3, stride=2) on 2x4x6x6: 2*4*36 * 8 * 9 = 20736 MACs,
    # bias 2*8*13*13 = 2704
    x, w, b = torch.empty(2, 4, 6, 6, **META), torch.empty(4, 8, 3, 3, **META), torch.empty(8, **META)
    assert call(aten.conv_transpose2d.input, x, w, b, [2, 2]) == (20736, 41472 + 2704)
    # conv_tbc: input (T=10, B=2, C_in=4), weight (k=3, 4, 8), pad 1: out (10, 2, 8) = 160; MACs 160*4*3 = 1920
    x, w, b = torch.randn(10, 2, 4), torch.randn(3, 4, 8), torch.randn(8)
    assert run_counted(lambda: torch.conv_tbc(x, w, b, 1)).op("aten.conv_tbc") == (1920, 3840 + 160)


def test_composite_norms_seen_whole():
    x = torch.empty(2, 4, 6, 6, **META)  # N = 288
    # instance_norm: R = 2*4 = 8: 6*288 + 32 = 1760
    assert call(aten.instance_norm.default, x, None, None, None, None, True, 0.1, 1e-5, False) == (0, 1760)
    # group_norm(2 groups) with weight and bias: R = 4: 8*288 + 16 = 2320
    c = torch.empty(4, **META)
    assert call(aten.group_norm.default, x, 2, c, c) == (0, 2320)


def test_norm_backward_variants():
    x, c = torch.empty(2, 4, 6, 6, **META), torch.empty(4, **META)
    # batch_norm_backward (pairs with _batch_norm_with_update): 9*288 + 2*4 + 288 + 576 + 288 = 3752
    op = aten.batch_norm_backward.default
    assert price(op, x, x, c, c, c, c, c, True, 1e-5, [True, True, True], c) == (0, 3752)
    op = aten.cudnn_batch_norm_backward.default
    assert price(op, x, x, c, c, c, c, c, 1e-5, c) == (0, 3752)
    # _fused_rms_norm_backward over the last dim 6 (R = 48): grad_input 6*288 + 48 + 288 (weight),
    # grad_weight 2*288 -> 2640
    op = aten._fused_rms_norm_backward.default
    assert price(op, x, x, [6], torch.empty(2, 4, 6, 1, **META), torch.empty(6, **META), [True, True]) == (0, 2640)


def test_dropout_backward_and_masked_scale():
    # grad * mask * scale: 2 per element of (3, 4) = 24
    grad, mask = torch.empty(3, 4, **META), torch.empty(3, 4, dtype=torch.bool, **META)
    assert call(aten.native_dropout_backward.default, grad, mask, 2.0) == (0, 24)
    assert price(aten._masked_scale.default, grad, mask, 2.0, out=grad) == (0, 24)


def test_outer_and_logit():
    # outer (3,) x (4,) seen whole: 12 products (MACs)
    assert call(aten.outer.default, torch.empty(3, **META), torch.empty(4, **META)) == (12, 24)
    # logit on 12 elements: 3 each (sub, div, log); with eps clamping: 5 each
    y = torch.rand(3, 4)
    assert run_counted(lambda: torch.logit(y)).flops == 36
    assert run_counted(lambda: torch.logit(y, eps=1e-6)).flops == 60


def test_one_dimensional_pools_seen_whole():
    x = torch.empty(1, 2, 7, **META)
    # max over windows of 3, stride 2: 6 outputs * 3 = 18; avg: 6 * (3 + 1) = 24
    assert call(aten.max_pool1d.default, x, [3], [2]) == (0, 18)
    assert call(aten.max_pool1d_with_indices.default, x, [3], [2]) == (0, 18)
    assert call(aten.avg_pool1d.default, x, [3], [2]) == (0, 24)
    # adaptive to 3: windows 3 + 3 + 3 per channel: avg 2*9 + 6 = 24; max 18
    assert call(aten.adaptive_avg_pool1d.default, x, [3]) == (0, 24)
    assert call(aten.adaptive_max_pool1d.default, x, [3]) == (0, 18)


X4 = torch.randn(1, 2, 4, 4)


@pytest.mark.parametrize("fn, x, op, flops", [
    # linear backward: 14 grad elements * (2 neighbours * 2) = 56
    (lambda x: F.interpolate(x, size=7, mode="linear"), torch.randn(1, 2, 5), "aten.upsample_linear1d_backward", 56),
    # trilinear backward: 432 grad elements * 16 = 6912
    (lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), torch.randn(1, 2, 3, 3, 3),
     "aten.upsample_trilinear3d_backward", 6912),
    # bicubic backward: 96 grad elements * 32 = 3072
    (lambda x: F.interpolate(x, size=(6, 8), mode="bicubic"), X4, "aten.upsample_bicubic2d_backward", 3072),
    # anti-aliased bilinear backward: as its forward (216, see test_formulas_interpolate)
    (lambda x: F.interpolate(x, size=(2, 2), mode="bilinear", antialias=True), X4,
     "aten._upsample_bilinear2d_aa_backward", 216),
    # adaptive avg 3-D backward, 2^3 from 5^3: windows 6 per dim: 2*216 + 16 divides = 448
    (lambda x: F.adaptive_avg_pool3d(x, 2), torch.randn(1, 2, 5, 5, 5), "aten._adaptive_avg_pool3d_backward", 448),
    # embedding bag (mean) backward: 4 looked-up rows of 3: adds 12 + mean divides 12 = 24
    (lambda w: F.embedding_bag(torch.tensor([1, 2, 3, 4]), w, torch.tensor([0, 2]), mode="mean"),
     torch.randn(10, 3), "aten._embedding_bag_backward", 24),
])
def test_backward_ops(fn, x, op, flops):
    leaf = x.clone().requires_grad_()
    assert run_counted(lambda: fn(leaf).sum().backward()).op(op) == (0, flops)


def test_bicubic_antialias_and_logcumsumexp():
    # bicubic AA 4x4 -> 2x2: interp size 4, scale 2: support 4, taps 9, 17 FLOPs per output of a pass:
    # width pass (1, 2, 4, 2) 16 * 17 = 272; height pass (1, 2, 2, 2) 8 * 17 = 136 -> 408
    assert run_counted(lambda: F.interpolate(X4, size=(2, 2), mode="bicubic", antialias=True)).flops == 408
    # logcumsumexp over 24 elements: exp, add, log each = 72
    assert run_counted(lambda: torch.randn(2, 4, 3).logcumsumexp(1)).op("aten.logcumsumexp") == (0, 72)
