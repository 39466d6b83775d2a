"""Matrix-product formulas: what F.linear / torch.matmul / einsum become, priced by hand."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from tests.torch._formula_harness import aten, call, count, flop_counter_flops, run_counted

torch.manual_seed(0)


def test_linear_2d_is_addmm_with_bias_add():
    # F.linear((3, 8), W(4, 8), b) -> addmm: MACs = 3*4*8 = 96; FLOPs = 2*96 + 3*4 bias adds = 204
    x, w, b = torch.randn(3, 8), torch.randn(4, 8), torch.randn(4)
    result = count(F.linear, x, w, b)
    assert (result.macs, result.flops) == (96, 204)
    assert result.by_operator["aten.addmm"].calls == 1
    assert flop_counter_flops(lambda: F.linear(x, w, b)) == 2 * 96  # peer counts the product only


def test_nn_linear_on_3d_input_flattens_rows():
    # Linear(8, 4) on (2, 5, 8): 10 rows -> MACs = 10*8*4 = 320; FLOPs = 640 + 10*4 = 680
    result = count(nn.Linear(8, 4), torch.randn(2, 5, 8))
    assert (result.macs, result.flops) == (320, 680)


def test_linear_without_bias_is_mm():
    # Linear(8, 4, bias=False) on (2, 5, 8): mm (10, 8) @ (8, 4): MACs = 320, FLOPs = 640, no bias
    result = count(nn.Linear(8, 4, bias=False), torch.randn(2, 5, 8))
    assert (result.macs, result.flops) == (320, 640)
    assert set(result.by_operator) >= {"aten.mm"}


# peer: what FlopCounterMode reports (it has no formula for aten.dot / aten.mv: it says 0 there)
@pytest.mark.parametrize("a_shape, b_shape, macs, op, peer", [
    ((8,), (8,), 8, "aten.dot", 0),                   # dot: k = 8
    ((8,), (8, 3), 24, "aten.mm", 48),                # (1, 8) @ (8, 3): 1*3*8 = 24
    ((3, 8), (8,), 24, "aten.mv", 0),                 # mv: 3*8 = 24
    ((2, 3, 8), (8,), 48, "aten.mv", 0),              # flattened to (6, 8) @ (8,): 6*8 = 48
    ((8,), (2, 8, 3), 48, "aten.bmm", 96),            # (2, 1, 8) @ (2, 8, 3): 2*1*3*8 = 48
    ((2, 3, 8), (8, 5), 240, "aten.mm", 480),         # (6, 8) @ (8, 5): 6*5*8 = 240
    ((2, 1, 3, 8), (4, 8, 5), 960, "aten.bmm", 1920),  # broadcast to 8 batches of (3, 8) @ (8, 5): 8*3*5*8 = 960
])
def test_matmul_1d_and_broadcast_operands(a_shape, b_shape, macs, op, peer):
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    result = count(torch.matmul, a, b)
    assert (result.macs, result.flops) == (macs, 2 * macs)  # the broadcast expand/clone is free
    assert op in result.by_operator
    assert flop_counter_flops(lambda: torch.matmul(a, b)) == peer


def test_matmul_and_linear_formulas_when_seen_whole():
    # aten.matmul / aten.linear / aten.einsum decompose on CPU; their own formulas agree with the parts.
    meta = dict(device="meta")
    a, b = torch.empty(2, 1, 3, 8, **meta), torch.empty(4, 8, 5, **meta)
    assert call(aten.matmul.default, a, b) == (960, 1920)  # numel(out) 2*4*3*5 = 120, * k 8 = 960
    v = torch.empty(8, **meta)
    assert call(aten.matmul.default, v, v) == (8, 16)  # scalar out, k = 8
    x, w, bias = torch.empty(2, 5, 8, **meta), torch.empty(4, 8, **meta), torch.empty(4, **meta)
    assert call(aten.linear.default, x, w, bias) == (320, 680)  # as nn.Linear above
    q, k = torch.empty(2, 3, 4, 5, **meta), torch.empty(2, 3, 6, 5, **meta)
    # bhqd,bhkd->bhqk: product space b*h*q*k*d = 2*3*4*6*5 = 720
    assert call(aten.einsum.default, "bhqd,bhkd->bhqk", [q, k]) == (720, 1440)
    # ...qd,...kd->...qk with an ellipsis over (2, 3): the same 720
    assert call(aten.einsum.default, "...qd,...kd->...qk", [q, k]) == (720, 1440)
    # nothing summed (outer product): 3*4 = 12 multiplies, as the mul it runs as; one operand: the trace, 3 adds
    assert call(aten.einsum.default, "i,j->ij", [torch.empty(3, **meta), torch.empty(4, **meta)]) == (0, 12)
    assert call(aten.einsum.default, "ii", [torch.empty(3, 3, **meta)]) == (0, 3)
    # implicit output (ij,jk: j appears twice, so it is summed): 3*4*5 = 60 MACs
    assert call(aten.einsum.default, "ij,jk", [torch.empty(3, 4, **meta), torch.empty(4, 5, **meta)]) == (60, 120)


@pytest.mark.parametrize("equation, shapes, macs, flops", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], 120, 240),       # bmm: 2*3*5*4 = 120
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)], 720, 1440),  # bmm (6, 4, 5) @ (6, 5, 6): 6*4*6*5 = 720
    ("ij,ij->i", [(3, 4), (3, 4)], 12, 24),                    # bmm (3, 1, 4) @ (3, 4, 1): 3*1*1*4 = 12
    ("i,j->ij", [(3,), (4,)], 0, 12),                          # outer product runs as mul: 12 FLOPs, no MAC
    ("ii->", [(3, 3)], 0, 3),                                  # trace: diagonal (free) + sum of 3 = 3
])
def test_einsum_as_it_decomposes(equation, shapes, macs, flops):
    operands = [torch.randn(s) for s in shapes]
    result = run_counted(lambda: torch.einsum(equation, *operands))
    assert (result.macs, result.flops) == (macs, flops)
    # FlopCounterMode agrees on contractions and misses the elementwise outer product and the sum
    assert flop_counter_flops(lambda: torch.einsum(equation, *operands)) == 2 * macs


def test_addmm_alpha_beta_and_baddbmm():
    bias, a, b = torch.randn(3), torch.randn(2, 4), torch.randn(4, 3)
    # addmm: MACs 2*3*4 = 24; add 6; beta=0.5 scales self (+6); alpha=2 scales the product (+6)
    assert run_counted(lambda: torch.addmm(bias, a, b)).flops == 48 + 6
    assert run_counted(lambda: torch.addmm(bias, a, b, beta=0.5, alpha=2)).flops == 48 + 18
    assert run_counted(lambda: torch.addmm(bias, a, b, beta=0)).flops == 48  # beta = 0: no add at all
    s, b1, b2 = torch.randn(2, 3, 5), torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    # baddbmm: MACs 2*3*5*4 = 120; add 2*3*5 = 30
    result = run_counted(lambda: torch.baddbmm(s, b1, b2))
    assert (result.macs, result.flops) == (120, 270)
    # addbmm sums over the batch: MACs 120; one add per (3, 5) output = 15
    result = run_counted(lambda: torch.addbmm(torch.randn(3, 5), b1, b2))
    assert (result.macs, result.flops) == (120, 255)


def test_mv_addmv_dot_addr():
    m, v = torch.randn(3, 4), torch.randn(4)
    assert run_counted(lambda: torch.mv(m, v)).macs == 12  # 3*4
    result = run_counted(lambda: torch.addmv(torch.randn(3), m, v))
    assert (result.macs, result.flops) == (12, 24 + 3)  # + 3 adds
    assert run_counted(lambda: torch.dot(v, v)).macs == 4
    result = run_counted(lambda: torch.addr(torch.randn(3, 4), torch.randn(3), v))
    assert (result.macs, result.flops) == (12, 24 + 12)  # outer 3*4 products + 12 adds


def test_bilinear_layer_trilinear_kernel():
    # nn.Bilinear(3, 4, 5) on batch 2: contract x1 (2, 3) with W (5, 3, 4) over i: 2*5*3*4 = 120 MACs,
    # then with x2 (2, 4) over j: 2*5*4 = 40 MACs -> 160 MACs; bias add 2*5 = 10 -> FLOPs 330
    layer = nn.Bilinear(3, 4, 5)
    result = count(layer, torch.randn(2, 3), torch.randn(2, 4))
    assert (result.macs, result.flops) == (160, 330)


def test_addmm_activation_fused():
    # _addmm_activation (relu): MACs 2*3*4 = 24, add 6, relu 6 -> FLOPs 48 + 12 = 60; gelu (tanh, 9/elem): 48 + 6 + 54
    bias, a, b = torch.randn(3), torch.randn(2, 4), torch.randn(4, 3)
    assert run_counted(lambda: torch.ops.aten._addmm_activation(bias, a, b)).flops == 60
    assert run_counted(lambda: torch.ops.aten._addmm_activation(bias, a, b, use_gelu=True)).flops == 108


# -- FP8 -----------------------------------------------------------------------------------------
def test_scaled_mm_fp8_on_cpu_and_meta():
    # (48, 80) @ (80, 112) in float8_e4m3fn, per-tensor scales: 48*112*80 = 430,080 MACs;
    # FLOPs 2*430,080 + one scale multiply per output 48*112 = 5376 -> 865,536.
    # FlopCounterMode counts the product: 2 * 430,080.
    a = torch.randn(48, 80).to(torch.float8_e4m3fn)
    b = torch.randn(112, 80).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0)

    def run():
        return torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)

    result = run_counted(run)
    assert (result.macs, result.flops) == (430_080, 865_536)
    assert result.op("aten._scaled_mm") == (430_080, 865_536)
    assert flop_counter_flops(run) == 2 * 430_080
    # with a bias: one more FLOP per output (5376)
    meta = dict(device="meta")
    bias = torch.empty(112, dtype=torch.bfloat16, **meta)
    assert call(aten._scaled_mm.default, a.to("meta"), b.to("meta"), one.to("meta"), one.to("meta"), bias,
                out_dtype=torch.bfloat16) == (430_080, 865_536 + 5376)


def test_scaled_grouped_mm_fp8_prices_each_group_and_its_scales():
    # (64, 32) rows routed to 4 experts of (32, 48) by offs 16/32/48/64: 64*32*48 = 98,304 MACs;
    # FLOPs 2*98,304 + one scale multiply per output 64*48 = 3072 -> 199,680 (meta: CPU has no kernel)
    meta = dict(device="meta")
    a = torch.empty(64, 32, dtype=torch.float8_e4m3fn, **meta)
    b = torch.empty(4, 48, 32, dtype=torch.float8_e4m3fn, **meta).transpose(-2, -1)
    offs = torch.tensor([16, 32, 48, 64], dtype=torch.int32)
    out = torch.empty(64, 48, dtype=torch.bfloat16, **meta)
    from deeplite_like.backends.torch.counting.registry import OpCall, lookup
    op = aten._scaled_grouped_mm.default
    args = (a, b, torch.empty(64, **meta), torch.empty(4, 48, **meta), offs)
    assert lookup(op)(OpCall(op, args, {"out_dtype": torch.bfloat16}, out)) == (98_304, 199_680)


def test_tensor_checks_are_free():
    # torch._check_tensor_all (129 transformers model files) runs aten._is_all_true: a check, free,
    # never untracked; the matmul beside it is 2*3*4 = 24 MACs
    def run():
        x = torch.randn(2, 3)
        torch._check_tensor_all(x == x, lambda: "no NaN")
        return x @ torch.randn(3, 4)

    result = run_counted(run)  # (fails on any untracked op)
    assert result.macs == 24
