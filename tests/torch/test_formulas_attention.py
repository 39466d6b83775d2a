"""Attention formulas: SDPA kernels (priced as their math reference) and the fused MHA /
TransformerEncoderLayer fast paths (priced exactly as the unfused training-mode path).

SDPA with BH = batch*heads, Lq, Lk, head sizes E, Ev:
  MACs  = BH*Lq*Lk*E (Q.K^T) + BH*Lq*Lk*Ev (P.V)
  FLOPs = 2*MACs + BH*(Lq + Lk)*E (scale q, k) + 5*BH*Lq*Lk (softmax) [+ BH*Lq*Lk mask add]
"""
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from deeplite_like.backends.torch.counting.registry import CountOptions
from tests.torch._formula_harness import aten, call, count, flop_counter_flops, run_counted

torch.manual_seed(0)
Q, K, V = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
# BH = 6, L = 5, E = 8: QK 6*5*5*8 = 1200, PV 1200 -> MACs 2400;
# scale 6*(5+5)*8 = 480; softmax 5*6*25 = 750; mask add 6*25 = 150
DENSE = (2400, 4800 + 480 + 750)            # 6030
MASKED = (2400, 4800 + 480 + 750 + 150)     # 6180
CAUSAL_HALF = (1200, 2400 + 480 + 750 + 150)  # 3780: half the MACs, the rest unchanged

SDPA_CASES = {
    "dense": (dict(), DENSE),
    "causal": (dict(is_causal=True), MASKED),  # dense by default: the causal mask is an add like any mask
    "bool_mask": (dict(attn_mask=torch.ones(5, 5, dtype=torch.bool).tril()), MASKED),
    "float_mask": (dict(attn_mask=torch.zeros(5, 5)), MASKED),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_cpu_kernel(case):
    kwargs, expected = SDPA_CASES[case]
    result = run_counted(lambda: F.scaled_dot_product_attention(Q, K, V, **kwargs))
    assert result.ops.keys() == {"aten._scaled_dot_product_flash_attention_for_cpu"}  # the fused CPU kernel ran
    assert (result.macs, result.flops) == expected


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_cpu_kernel_equals_math_path(case):
    # the math backend runs mul (scale q, k), bmm, add (mask), _safe_softmax, bmm: the same count
    kwargs, expected = SDPA_CASES[case]
    with sdpa_kernel(SDPBackend.MATH):
        result = run_counted(lambda: F.scaled_dot_product_attention(Q, K, V, **kwargs))
    assert "aten.bmm" in result.ops
    assert (result.macs, result.flops) == expected
    # FlopCounterMode sees the math path's bmm: 2*MACs. It has no formula for the CPU kernel (it says 0).
    with sdpa_kernel(SDPBackend.MATH):
        assert flop_counter_flops(lambda: F.scaled_dot_product_attention(Q, K, V, **kwargs)) == 2 * 2400
    assert flop_counter_flops(lambda: F.scaled_dot_product_attention(Q, K, V, **kwargs)) == 0


def test_sdpa_causal_half_option():
    # causal_half: is_causal=True counts half of QK and PV MACs: 1200; FLOPs 2400 + 480 + 750 + 150 = 3780
    result = run_counted(lambda: F.scaled_dot_product_attention(Q, K, V, is_causal=True), causal_half=True)
    assert (result.macs, result.flops) == CAUSAL_HALF
    # an explicit mask tensor is never inspected: still dense under causal_half
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    result = run_counted(lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=mask), causal_half=True)
    assert (result.macs, result.flops) == MASKED
    # through count_ops

    def causal(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (count(causal, Q, K, V, causal_half=True).macs, count(causal, Q, K, V).macs) == (1200, 2400)


def test_sdpa_shapes_the_cpu_kernel_rejects_run_math_and_agree_with_the_formula():
    # q (2,3,4,8), k (2,3,6,8), v (2,3,6,16): Ev != E runs the math path on CPU.
    # BH 6: QK 6*4*6*8 = 1152, PV 6*4*6*16 = 2304 -> MACs 3456; scale 6*(4+6)*8 = 480;
    # softmax 5*6*24 = 720 -> FLOPs 6912 + 480 + 720 = 8112
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 16)
    result = run_counted(lambda: F.scaled_dot_product_attention(q, k, v))
    assert (result.macs, result.flops) == (3456, 8112)
    meta = [t.to("meta") for t in (q, k, v)]
    assert call(aten._scaled_dot_product_flash_attention_for_cpu.default, *meta) == (3456, 8112)


def test_sdpa_grouped_query_attention():
    # q (2,4,5,8), k/v (2,2,5,8): K, V repeated to 4 heads. BH 8: QK 8*25*8 = 1600, PV 1600 -> MACs 3200;
    # scale 8*(5+5)*8 = 640; softmax 5*8*25 = 1000 -> FLOPs 6400 + 1640 = 8040
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    fused = run_counted(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    with sdpa_kernel(SDPBackend.MATH):
        math = run_counted(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    assert (fused.macs, fused.flops) == (math.macs, math.flops) == (3200, 8040)


def test_sdpa_dropout_and_cuda_kernels_priced_on_meta():
    # dropout_p > 0 runs the math path on CPU: + bernoulli_ (free), div_ and mul on the 150 scores = +300
    result = run_counted(lambda: F.scaled_dot_product_attention(Q, K, V, dropout_p=0.5))
    assert (result.macs, result.flops) == (2400, 6030 + 300)
    q, k, v = (t.to("meta") for t in (Q, K, V))
    # the CUDA kernels, priced by the same reference (called on meta tensors: no GPU needed)
    assert call(aten._scaled_dot_product_efficient_attention.default, q, k, v, None, False, 0.5) == (2400, 6330)
    assert call(aten._scaled_dot_product_efficient_attention.default, q, k, v, torch.zeros(5, 5, device="meta"),
                False) == MASKED
    assert call(aten._scaled_dot_product_flash_attention.default, q, k, v, 0.0, True) == MASKED
    assert call(aten._scaled_dot_product_flash_attention.default, q, k, v, 0.0, True,
                options=CountOptions(causal_half=True)) == CAUSAL_HALF
    assert call(aten._scaled_dot_product_cudnn_attention.default, q, k, v, None, False) == DENSE


def _sdpa_step(*tensors, math=False, **kwargs):
    leaves = [t.clone().requires_grad_() for t in tensors]

    def step():
        if math:
            with sdpa_kernel(SDPBackend.MATH):
                F.scaled_dot_product_attention(*leaves, **kwargs).sum().backward()
        else:
            F.scaled_dot_product_attention(*leaves, **kwargs).sum().backward()
    return step


def test_sdpa_backward_cpu_kernel_recomputes_the_scores():
    # math autograd: dS = dO.V^T, dV = P^T.dO, dQ = dS.K, dK = dS^T.Q: 2*(1200 + 1200) = 4800 MACs;
    # FLOPs 9600 + softmax backward 4*150 = 600 + scale grads 6*(5+5)*8 = 480 -> 10680.
    # The CPU flash kernel keeps no probabilities: its backward first recomputes Q.K^T (1200 MACs)
    # and P = exp(scale*S - lse) (3 FLOPs per score: 450): 6000 MACs, 12000 + 600 + 480 + 450 = 13530.
    fused = run_counted(_sdpa_step(Q, K, V))
    assert fused.op("aten._scaled_dot_product_flash_attention_for_cpu_backward") == (6000, 13530)
    math = run_counted(_sdpa_step(Q, K, V, math=True))
    assert fused.macs - math.macs == 1200 and fused.flops - math.flops == 2 * 1200 + 450
    # torch's own counter prices the fused (CUDA) backward kernels the same way, 2.5x the forward's
    # MACs (it does not count the CPU kernel at all): 6000 MACs = 12000 FLOPs of contractions
    from torch.utils.flop_counter import sdpa_backward_flop

    assert sdpa_backward_flop(Q.shape, Q.shape, K.shape, V.shape) == 2 * 6000


def test_sdpa_backward_gqa_and_mask_recompute():
    # GQA backward also sums dK, dV over the repeated heads: BH*Lk*(E + Ev) = 8*5*16 = 640 FLOPs
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    fused = run_counted(_sdpa_step(q, k, v, enable_gqa=True))
    math = run_counted(_sdpa_step(q, k, v, math=True, enable_gqa=True))
    # math backward: 2*(1600 + 1600) = 6400 MACs; 12800 + 4*200 + 640 + 640 = 14880 FLOPs.
    # fused: + recomputed QK 1600 MACs (3200 FLOPs) + 3 FLOPs per score (600) -> (8000, 18680)
    assert fused.op("aten._scaled_dot_product_flash_attention_for_cpu_backward") == (8000, 18680)
    assert (fused.macs - math.macs, fused.flops - math.flops) == (1600, 3200 + 600)
    # with a mask the recomputation adds it again: 4 FLOPs per score (150 scores)
    mask = torch.zeros(5, 5)
    fused = run_counted(_sdpa_step(Q, K, V, attn_mask=mask))
    math = run_counted(_sdpa_step(Q, K, V, math=True, attn_mask=mask))
    assert (fused.macs - math.macs, fused.flops - math.flops) == (1200, 2400 + 4 * 150)


# -- varlen kernels called directly (flash / memory-efficient), priced on meta tensors -------------
def test_flash_attention_forward_padded_and_packed():
    # padded (B=2, L=5, H=3, E=8): as SDPA's dense forward, DENSE = (2400, 6030)
    q = torch.empty(2, 5, 3, 8, device="meta")
    out = call(aten._flash_attention_forward.default, q, q, q, None, None, 5, 5, 0.0, False, False)
    assert out == DENSE
    # packed: sequences of 3 and 2 tokens (cumulative starts 0, 3, 5), 3 heads of 8:
    # pairs 3*3 + 2*2 = 13 per head; MACs 3 heads * 13 * (8 + 8) = 624;
    # FLOPs 1248 + scale q and k 3*(5+5)*8 = 240 + softmax 5*39 = 195 -> 1683
    packed = torch.empty(5, 3, 8, device="meta")
    cum = torch.tensor([0, 3, 5], dtype=torch.int32)
    out = aten._flash_attention_forward.default(packed, packed, packed, cum.to("meta"), cum.to("meta"), 3, 3,
                                                0.0, False, False)
    from deeplite_like.backends.torch.counting.registry import OpCall, lookup
    formula = lookup(aten._flash_attention_forward.default)
    args = (packed, packed, packed, cum, cum, 3, 3, 0.0, False, False)
    assert formula(OpCall(aten._flash_attention_forward.default, args, {}, out)) == (624, 1683)
    # backward: 2.5x the MACs (1560); FLOPs 3120 + softmax backward 4*39 = 156 + scale grads 240
    # + recompute 3*39 = 117 -> 3633
    grads = aten._flash_attention_backward.default
    bargs = (packed, packed, packed, packed, packed, torch.empty(3, 5, device="meta"), cum, cum, 3, 3, 0.0,
             False, torch.empty(2, dtype=torch.int64, device="meta"), torch.empty(0, device="meta"))
    assert lookup(grads)(OpCall(grads, bargs, {}, (packed, packed, packed))) == (1560, 3633)
    # on the meta device a packed batch has no lengths: refused by name
    with pytest.raises(ValueError, match="needs the sequence lengths"):
        formula(OpCall(aten._flash_attention_forward.default, (packed, packed, packed, cum.to("meta"),
                                                                  cum.to("meta"), 3, 3, 0.0, False, False), {}, out))


def test_efficient_attention_forward_and_backward_padded():
    # (B=2, L=5, H=3, E=8), custom_mask_type 1 (causal): MASKED = (2400, 6180); backward as the
    # fused SDPA backward with a causal mask: 6000 MACs; 12000 + 600 + 480 + 4*150 -> 13680
    q = torch.empty(2, 5, 3, 8, device="meta")
    assert call(aten._efficient_attention_forward.default, q, q, q, None, None, None, 5, 5, 0.0, 1) == MASKED
    from deeplite_like.backends.torch.counting.registry import OpCall, lookup
    op = aten._efficient_attention_backward.default
    args = (q, q, q, q, None, q, None, None, 5, 5, torch.empty(2, 3, 5, device="meta"), 0.0,
            torch.empty((), device="meta"), torch.empty((), device="meta"), 1, False)
    assert lookup(op)(OpCall(op, args, {}, (q, q, q, None))) == (6000, 13680)


# -- nn.MultiheadAttention: E = 16, 4 heads (hd 4), batch 2, length 5 ---------------------------
# in-projection: 10 rows * 16 * 48 = 7680 MACs + 480 bias; out-projection 10*16*16 = 2560 MACs + 160 bias;
# QK and PV: 8*5*5*4 = 800 MACs each -> MACs = 7680 + 800 + 800 + 2560 = 11840.
# need_weights=True (explicit path): q scale 8*5*4 = 160, softmax 5*200 = 1000, head average of the
#   weights (a mean over heads: 200 + 50 = 250): FLOPs = 23680 + 480 + 160 + 160 + 1000 + 250 = 25730
# need_weights=False (SDPA): scale q and k 8*(5+5)*4 = 320, softmax 1000: FLOPs = 23680 + 480 + 160 + 320 + 1000 = 25640
# a key-padding or attention mask adds 200 (one add per score); both: +200 more to merge them.
MHA_X = torch.randn(2, 5, 16)
KPM = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
CAUSAL_MASK = torch.ones(5, 5, dtype=torch.bool).triu(1)
MHA_CASES = {
    "weights": (dict(), (11840, 25730)),
    "no_weights": (dict(need_weights=False), (11840, 25640)),
    "padding_mask": (dict(key_padding_mask=KPM), (11840, 25930)),
    "attn_mask_no_weights": (dict(attn_mask=CAUSAL_MASK, need_weights=False), (11840, 25840)),
    "both_masks": (dict(attn_mask=CAUSAL_MASK, key_padding_mask=KPM), (11840, 26130)),
}


@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multihead_attention_fast_path_equals_training_path(case):
    kwargs, expected = MHA_CASES[case]
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    mha.train()
    train = run_counted(lambda: mha(MHA_X, MHA_X, MHA_X, **kwargs))
    mha.eval()
    with torch.no_grad():
        fast = run_counted(lambda: mha(MHA_X, MHA_X, MHA_X, **kwargs))
    assert "aten._native_multi_head_attention" in fast.ops  # the fused op really ran
    assert "aten._native_multi_head_attention" not in train.ops
    assert (train.macs, train.flops) == (fast.macs, fast.flops) == expected


def test_multihead_attention_fast_path_through_count_ops():
    mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        result = count(mha, MHA_X, MHA_X, MHA_X)
    assert "aten._native_multi_head_attention" in result.by_operator
    assert (result.macs, result.flops) == (11840, 25730)


# -- nn.TransformerEncoderLayer(16, 4, dim_feedforward=32), batch 2, length 5 ---------------------
# N = 2*5*16 = 160 elements, 10 tokens. self-attention (need_weights=False): 11840 MACs, 25640 FLOPs;
# 2 residual adds 320; 2 layer norms (6N + 4*10 + 2N) = 2*1320 = 2640;
# linear1 10*16*32 = 5120 MACs + 320 bias; ReLU 320 (GELU 5*320 = 1600); linear2 5120 MACs + 160 bias.
# MACs = 11840 + 10240 = 22080; FLOPs = 25640 + 320 + 2640 + 20480 + 320 + 320 + 160 = 49880 (GELU: 51160)
# a src_mask adds one add per score: 8*25 = 200.
TEL_X = torch.randn(2, 5, 16)
TEL_CASES = {
    "relu": (dict(), dict(), (22080, 49880)),
    "gelu_norm_first": (dict(activation="gelu", norm_first=True), dict(), (22080, 51160)),
    "src_mask": (dict(), dict(src_mask=torch.zeros(5, 5)), (22080, 50080)),
    "bool_src_mask": (dict(), dict(src_mask=CAUSAL_MASK), (22080, 50080)),
}


@pytest.mark.parametrize("case", list(TEL_CASES))
def test_transformer_encoder_layer_fast_path_equals_training_path(case):
    ctor, kwargs, expected = TEL_CASES[case]
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, **ctor)
    layer.train()
    train = run_counted(lambda: layer(TEL_X, **kwargs))
    layer.eval()
    with torch.no_grad():
        fast = run_counted(lambda: layer(TEL_X, **kwargs))
    assert fast.ops.keys() == {"aten._transformer_encoder_layer_fwd"}  # the whole layer in one op
    assert (train.macs, train.flops) == (fast.macs, fast.flops) == expected


def test_transformer_encoder_layer_with_hooks_takes_the_slow_path_and_counts_the_same():
    # count_ops attaches module hooks, which disable PyTorch's fast path: the unfused ops are counted
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
    with torch.no_grad():
        result = count(layer, TEL_X)
    assert "aten._transformer_encoder_layer_fwd" not in result.by_operator
    assert (result.macs, result.flops) == (22080, 49880)


def test_transformer_encoder_layer_training_dropout_adds_its_masks():
    # dropout=0.1 in training: attention probs 2*200 (math SDPA path), dropout1 2*160, FFN dropout 2*320,
    # dropout2 2*160 -> 400 + 320 + 640 + 320 = 1680 FLOPs more than 49880
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True).train()
    result = run_counted(lambda: layer(TEL_X))
    assert (result.macs, result.flops) == (22080, 49880 + 1680)


def test_transformer_encoder_nested_fast_path_prices_each_sequence():
    # nn.TransformerEncoder in eval + no_grad turns a padding mask into a nested tensor of lengths 5 and 3;
    # each layer prices 8 tokens. Per token: in-proj 768 + out-proj 256 + FFN 2*512 = 2048 MACs -> 16384;
    # attention 2 * 4 heads * L^2 * 4 = 32*L^2 -> 32*(25 + 9) = 1088. Per layer 17472 MACs; 2 layers 34944.
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    # (torch warns that nested tensors are a prototype once per process: not asserted, it may be gone)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = run_counted(lambda: encoder(TEL_X, src_key_padding_mask=KPM))
    assert result.ops.keys() == {"aten._transformer_encoder_layer_fwd"}
    assert result.macs == 34944
    # FLOPs per sequence (B=1, L): 2*MACs + in/out bias 64L + scale 32L + softmax 20L^2 + adds 32L
    # + norms 2*(128L + 4L) + biases 48L + ReLU 32L = 2*MACs + 472L + 20L^2 -> per layer
    # 34944 + 472*8 + 20*34 = 34944 + 3776 + 680 = 39400; 2 layers 78800
    assert result.flops == 78800


# -- FlexAttention (a higher-order operator) --------------------------------------------------------
FLEX_Q = torch.randn(2, 3, 128, 16)


class _Flex(nn.Module):
    def __init__(self, block_mask=None, compiled=False):
        super().__init__()
        self.block_mask = block_mask
        from torch.nn.attention.flex_attention import flex_attention

        self.attend = torch.compile(flex_attention) if compiled else flex_attention

    def forward(self, q, k, v):
        return self.attend(q, k, v, block_mask=self.block_mask)


def _causal_block_mask():
    from torch.nn.attention.flex_attention import create_block_mask

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    return create_block_mask(causal, None, None, 128, 128, device="cpu", BLOCK_SIZE=32)


@pytest.mark.parametrize("compiled", [False, True])
def test_flex_attention_counts_as_dense_attention(compiled):
    # B=2, H=3, L=128, E=Ev=16: MACs 6 * 128*128 * (16 + 16) = 3,145,728;
    # FLOPs 2 * MACs + scale q and k 6*(128+128)*16 = 24,576 + softmax 5 * 98,304 = 491,520 -> 6,807,552
    from deeplite_like.backends.torch import count_ops
    import torch.nn.attention.flex_attention as flex

    before = flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    with torch.no_grad():  # (FlexAttention has no CPU backward)
        counted = count_ops(_Flex(compiled=compiled), FLEX_Q, FLEX_Q, FLEX_Q)
    assert (counted.macs, counted.flops) == (3_145_728, 6_807_552)
    assert counted.untracked == {} and counted.by_operator["higher_order.flex_attention"].calls == 1
    assert flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG == before  # the switch counting needs is put back
    # the same as SDPA's dense count on the same shapes
    sdpa = run_counted(lambda: F.scaled_dot_product_attention(FLEX_Q, FLEX_Q, FLEX_Q))
    assert (sdpa.macs, sdpa.flops) == (counted.macs, counted.flops)


def test_flex_attention_block_mask_dense_by_default_block_sparse_as_an_option():
    # A causal mask_mod is an add per score (6 * 16,384 = 98,304 FLOPs), dense by default.
    # causal_half=True counts the pairs of the blocks the mask keeps: 32x32 blocks, 4 query blocks
    # keeping 1, 2, 3, 4 key blocks = 10 of 16 blocks, 10 * 1024 = 10,240 pairs per (batch, head):
    # MACs 6 * 10,240 * 32 = 1,966,080 (SDPA's causal_half is exactly half: 1,572,864).
    from deeplite_like.backends.torch import count_ops

    mask = _causal_block_mask()
    with torch.no_grad():
        dense = count_ops(_Flex(mask), FLEX_Q, FLEX_Q, FLEX_Q)
        sparse = count_ops(_Flex(mask), FLEX_Q, FLEX_Q, FLEX_Q, causal_half=True)
    assert (dense.macs, dense.flops) == (3_145_728, 6_807_552 + 98_304)
    # FLOPs: 2 * MACs + scale 24,576 + (softmax 5 + mask 1) * 61,440 scores
    assert (sparse.macs, sparse.flops) == (1_966_080, 2 * 1_966_080 + 24_576 + 6 * 61_440)


def test_flex_attention_backward_is_the_fused_backward():
    # flex_attention_backward (CUDA only) priced from its arguments: as the fused SDPA backward,
    # 2.5x the forward's MACs: 2*(QK + PV) + QK = 5 * 6 * 16,384 * 16 = 7,864,320;
    # FLOPs 2 * MACs + softmax backward 4/score 393,216 + scale grads 24,576 + recompute 3/score 294,912
    from deeplite_like.backends.torch.counting.formulas.attention import flex_attention_cost

    mask = _causal_block_mask().as_tuple()
    noop = (*mask[:-1], type("noop", (), {"__name__": "noop_mask"})())
    q = torch.empty(2, 3, 128, 16, device="meta")
    args = (q, q, q, q, torch.empty(2, 3, 128, device="meta"), q, None, None, None, noop, 0.25, {}, (), ())
    cost = flex_attention_cost(args, CountOptions(), backward=True)
    assert cost == (7_864_320, 2 * 7_864_320 + 393_216 + 24_576 + 294_912)


def test_transformers_flex_attention_counts_as_eager_and_sdpa():
    # the tiny Llama of test_model_code_sees_its_model.py: forward 181,248 MACs whatever the kernel
    transformers = pytest.importorskip("transformers")
    from deeplite_like.backends.torch import count_ops

    counts = {}
    for impl in ("eager", "sdpa", "flex_attention"):
        config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                                          max_position_embeddings=64, attn_implementation=impl)
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(config).eval()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            counted = count_ops(model, torch.randint(0, 100, (1, 8)))
        assert counted.untracked == {}
        counts[impl] = counted.macs
    assert counts == {"eager": 181_248, "sdpa": 181_248, "flex_attention": 181_248}


@pytest.mark.parametrize("family", ["llama", "vit"])
def test_meta_backward_prices_the_kernel_the_models_device_runs(family):
    # On meta torch runs attention's math path; the CPU runs its flash kernel, whose backward
    # recomputes Q.K^T. A meta count of a CPU model follows the CPU: real == meta, and the
    # difference to the math path is the recomputed Q.K^T (llama: 2 layers * 4 heads * 8*8*8 = 4096).
    transformers = pytest.importorskip("transformers")
    from deeplite_like.backends.torch import count_ops

    torch.manual_seed(0)
    if family == "llama":
        config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                          max_position_embeddings=64, attn_implementation="sdpa")
        model, x = transformers.LlamaForCausalLM(config).train(), torch.randint(1, 128, (1, 8))
    else:
        config = transformers.ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, image_size=16, patch_size=4,
                                        attn_implementation="sdpa")
        model, x = transformers.ViTModel(config).train(), torch.randn(1, 3, 16, 16)

    def loss(output):
        return output[0].float().sum()

    real = count_ops(model, x, backward=True, loss_fn=loss)
    meta = count_ops(model, x, backward=True, meta=True, loss_fn=loss)
    assert (meta.macs, meta.flops) == (real.macs, real.flops)
    with sdpa_kernel(SDPBackend.MATH):
        math = count_ops(model, x, backward=True, loss_fn=loss)
    # ViT: 16 patches + the class token = 17 tokens: 2 layers * 4 heads * 17*17*8 = 18,496
    assert real.macs - math.macs == {"llama": 4096, "vit": 18_496}[family]
