"""Attention: ``scaled_dot_product_attention`` kernels and the fused MHA / encoder-layer paths.

Every fused kernel is priced as its math reference (``_scaled_dot_product_attention_math``,
which is what runs on the meta device, under dropout, or for shapes the fused kernels
reject), so a model counts the same whichever kernel PyTorch picks.

The forward's rows are in ``attention_cost``, the backward's in ``attention_backward_cost``, the
varlen kernels' pairs in ``_sequence_pairs``.
"""
from __future__ import annotations

from typing import Any

import torch

from ..registry import Cost, CountOptions, Formula, OpCall, register_formula
from ._common import aten, bind, ops, prod, shape
from .elementwise import GELU, RELU
from .linalg import linear_cost
from .reduction import normalisation_cost
from .elementwise import SOFTMAX, SOFTMAX_BACKWARD


def _dims(query, key, value) -> tuple[int, int, int, int, int, int]:
    """(BH, Lq, Lk, E, Ev, kv_heads_ratio) for (..., L, E) shaped q, k, v."""
    q, k, v = shape(query), shape(key), shape(value)
    bh = prod(q[:-2])
    ratio = q[-3] // k[-3] if len(q) >= 3 and len(k) >= 3 and k[-3] else 1
    return bh, q[-2], k[-2], q[-1], v[-1], ratio


def attention_cost(bh: int, lq: int, lk: int, e: int, ev: int, *, masked: bool = False, causal: bool = False,
                   dropout: bool = False, options: CountOptions | None = None) -> Cost:
    """SDPA's math reference: QK^T and PV MACs, q/k scaling, mask add, softmax, dropout FLOPs.

    With BH = batch * query
    heads, Lq/Lk the query/key lengths, E the q/k head size and Ev the value head size::

        Q @ K^T                  BH * Lq * Lk * E   MACs
        P @ V                    BH * Lq * Lk * Ev  MACs
        scale q and k            BH * (Lq + Lk) * E FLOPs   (each by sqrt(scale), as the math path)
        mask add                 BH * Lq * Lk       FLOPs   (attn_mask given, or is_causal)
        softmax                  5 * BH * Lq * Lk   FLOPs
        dropout (p > 0)          2 * BH * Lq * Lk   FLOPs   (scale the mask, multiply)

    Attention is dense by default: a causal mask is an add like any mask. With
    ``CountOptions.causal_half`` an ``is_causal=True`` kernel counts half of the two contractions'
    MACs (an explicit mask tensor is never inspected, so it always counts dense). GQA (fewer
    key/value heads) costs as if K and V were repeated to the query heads, as the math path does.
    """
    return _forward_cost(bh, lq * lk, lq, lk, e, ev, masked=masked, causal=causal, dropout=dropout, options=options)


def attention_backward_cost(bh: int, lq: int, lk: int, e: int, ev: int, *, gqa: bool = False, causal: bool = False,
                            dropout: bool = False, options: CountOptions | None = None, recompute: bool = False,
                            masked: bool = False) -> Cost:
    """Autograd of SDPA's math reference; ``recompute``: a fused kernel's, which first recomputes
    the scores and probabilities (below).

    Backward, as the kernel that runs does it. The math reference's autograd: dS = dO @ V^T,
    dV = P^T @ dO, dQ = dS @ K, dK = dS^T @ Q (2 * (QK + PV) MACs), softmax backward 4 FLOPs per
    score, the two scale grads BH*(Lq + Lk)*E, a dropout mask multiply 1 per score, and for GQA the
    sums of dK, dV over repeated heads BH*Lk*(E + Ev). The fused kernels (CPU flash, CUDA flash,
    memory-efficient, cuDNN) keep no probabilities: their backward first recomputes Q @ K^T and
    P = exp(scale * S - logsumexp) block by block, one more QK of MACs and 3 FLOPs per score (scale,
    subtract, exp; +1 with a mask), so a fused backward is 2.5x its forward's MACs when E = Ev, as
    FlopCounterMode counts it (``docs/conventions.rst`` has both figures).
    """
    return _backward_cost(bh, lq * lk, lq, lk, e, ev, gqa=gqa, causal=causal, dropout=dropout, options=options,
                          recompute=recompute, masked=masked)


def _forward_cost(heads: int, pairs: int, q_tokens: int, k_tokens: int, e: int, ev: int, *, masked: bool,
                  causal: bool, dropout: bool, options: CountOptions | None) -> Cost:
    """Attention over ``pairs`` (query, key) pairs per head (Lq * Lk, or a packed batch's sum of
    Lq_i * Lk_i) and ``q_tokens`` / ``k_tokens`` queries and keys per head."""
    qk, pv = heads * pairs * e, heads * pairs * ev
    if causal and options is not None and options.causal_half:
        qk, pv = qk // 2, pv // 2
    scores = heads * pairs
    flops = heads * (q_tokens + k_tokens) * e + SOFTMAX * scores
    flops += scores if (masked or causal) else 0
    flops += 2 * scores if dropout else 0
    return Cost.contraction(qk + pv, flops)


def _backward_cost(heads: int, pairs: int, q_tokens: int, k_tokens: int, e: int, ev: int, *, gqa: bool,
                   causal: bool, dropout: bool, options: CountOptions | None, recompute: bool, masked: bool) -> Cost:
    """The backward of ``_forward_cost``'s attention (below)."""
    qk, pv = heads * pairs * e, heads * pairs * ev
    if causal and options is not None and options.causal_half:
        qk, pv = qk // 2, pv // 2
    scores = heads * pairs
    flops = SOFTMAX_BACKWARD * scores + heads * (q_tokens + k_tokens) * e
    flops += scores if dropout else 0
    flops += heads * k_tokens * (e + ev) if gqa else 0
    if recompute:
        flops += 3 * scores + (scores if (masked or causal) else 0)
    return Cost.contraction(2 * (qk + pv) + (qk if recompute else 0), flops)


def _sdpa(mask_name: str | None) -> Formula:
    """The formula of an SDPA kernel whose mask argument is ``mask_name`` (None: it takes no mask)."""

    def formula(call: OpCall) -> Cost:
        a = bind(call)
        bh, lq, lk, e, ev, _ = _dims(a["query"], a["key"], a["value"])
        masked = mask_name is not None and a.get(mask_name) is not None
        return attention_cost(bh, lq, lk, e, ev, masked=masked, causal=bool(a.get("is_causal")),
                              dropout=float(a.get("dropout_p") or 0.0) > 0.0, options=call.options)

    formula.__name__ = formula.__qualname__ = f"sdpa_{mask_name or 'no_mask'}"
    formula.__doc__ = "SDPA: QK^T + PV MACs; scale, mask, softmax (5), dropout FLOPs (as the math reference)."
    return formula


# CPU flash kernel, math, composite.
register_formula(aten._scaled_dot_product_flash_attention_for_cpu, aten._scaled_dot_product_attention_math,
                 aten.scaled_dot_product_attention)(_sdpa("attn_mask"))
# CUDA flash kernel (no mask argument): as ``_scaled_dot_product_flash_attention_for_cpu``.
register_formula(aten._scaled_dot_product_flash_attention)(_sdpa(None))
# Memory-efficient / cuDNN / overrideable kernels (mask as ``attn_bias``): as the CPU kernel.
register_formula(aten._scaled_dot_product_efficient_attention, aten._scaled_dot_product_cudnn_attention,
                 aten._scaled_dot_product_fused_attention_overrideable)(_sdpa("attn_bias"))


@register_formula(*ops("_scaled_dot_product_flash_attention_for_cpu_backward",
                       "_scaled_dot_product_flash_attention_backward",
                       "_scaled_dot_product_efficient_attention_backward",
                       "_scaled_dot_product_cudnn_attention_backward",
                       "_scaled_dot_product_fused_attention_overrideable_backward"))
def sdpa_backward(call: OpCall) -> Cost:
    """Fused SDPA backward: recomputed QK + 2*(QK + PV) MACs; recompute, softmax backward 4/score,
    scale grads, dropout, GQA head sums FLOPs."""
    a = bind(call)
    bh, lq, lk, e, ev, ratio = _dims(a["query"], a["key"], a["value"])
    masked = a.get("attn_mask") is not None or a.get("attn_bias") is not None
    return attention_backward_cost(bh, lq, lk, e, ev, gqa=ratio > 1, causal=bool(a.get("is_causal")),
                                   dropout=float(a.get("dropout_p") or 0.0) > 0.0, options=call.options,
                                   recompute=True, masked=masked)


def _sequence_pairs(query: Any, key: Any, cum_q: Any, cum_k: Any, name: str) -> tuple[int, int, int, int]:
    """``(heads, pairs, q_tokens, k_tokens)`` of a varlen kernel's (B, L, H, E) or packed (T, H, E) inputs.

    ``pairs``: the (query, key) pairs per head over the batch: B * Lq * Lk for padded tensors,
    sum(Lq_i * Lk_i) for a packed batch (``cum_q``/``cum_k``: cumulative sequence starts).

    The varlen kernels ``_flash_attention_forward/_backward`` and ``_efficient_attention_*`` take
    (batch, L, heads, E) tensors, or packed (total tokens, heads, E) ones with cumulative sequence
    lengths: a packed batch is priced sequence by sequence (sum of Lq_i * Lk_i), which needs the
    lengths' values (real tensors; on the meta device they are refused by name).
    """
    q, k = shape(query), shape(key)
    if cum_q is None or cum_k is None or len(q) == 4:
        batch, lq, heads = q[0], q[1], q[2]
        return heads, batch * lq * k[1], batch * lq, batch * k[1]
    if cum_q.is_meta or cum_k.is_meta:
        raise ValueError(f"{name} on a packed batch needs the sequence lengths (the values of its cumulative "
                         "lengths), which meta tensors do not have: count with real tensors")
    starts_q, starts_k = [int(v) for v in cum_q.tolist()], [int(v) for v in cum_k.tolist()]
    pairs = sum((starts_q[i + 1] - starts_q[i]) * (starts_k[i + 1] - starts_k[i]) for i in range(len(starts_q) - 1))
    return q[1], pairs, q[0], k[0]


def _varlen_cost(call: OpCall, cum_q: str, cum_k: str, backward: bool) -> Cost:
    """The varlen flash / memory-efficient kernels: as SDPA's fused kernels, over the pairs they run."""
    a = bind(call)
    heads, pairs, q_tokens, k_tokens = _sequence_pairs(a["query"], a["key"], a.get(cum_q), a.get(cum_k), call.name)
    e, ev = shape(a["query"])[-1], shape(a["value"])[-1]
    causal = bool(a.get("is_causal")) or int(a.get("custom_mask_type") or 0) > 0
    masked = a.get("bias") is not None
    dropout = float(a.get("dropout_p") or 0.0) > 0.0
    if backward:
        return _backward_cost(heads, pairs, q_tokens, k_tokens, e, ev, gqa=heads != shape(a["key"])[-2],
                              causal=causal, dropout=dropout, options=call.options, recompute=True, masked=masked)
    return _forward_cost(heads, pairs, q_tokens, k_tokens, e, ev, masked=masked, causal=causal, dropout=dropout,
                         options=call.options)


@register_formula(aten._flash_attention_forward)
def flash_attention_forward(call: OpCall) -> Cost:
    """Varlen flash attention forward: SDPA's cost over the (query, key) pairs of each sequence."""
    return _varlen_cost(call, "cum_seq_q", "cum_seq_k", backward=False)


@register_formula(aten._flash_attention_backward)
def flash_attention_backward(call: OpCall) -> Cost:
    """Varlen flash attention backward: the fused SDPA backward over each sequence's pairs."""
    return _varlen_cost(call, "cum_seq_q", "cum_seq_k", backward=True)


@register_formula(aten._efficient_attention_forward)
def efficient_attention_forward(call: OpCall) -> Cost:
    """Varlen memory-efficient attention forward (custom_mask_type > 0: causal)."""
    return _varlen_cost(call, "cu_seqlens_q", "cu_seqlens_k", backward=False)


@register_formula(aten._efficient_attention_backward)
def efficient_attention_backward(call: OpCall) -> Cost:
    """Varlen memory-efficient attention backward."""
    return _varlen_cost(call, "cu_seqlens_q", "cu_seqlens_k", backward=True)


def mha_cost(batch: int, lq: int, lk: int, embed: int, heads: int, *, in_bias: bool, out_bias: bool,
             masked: bool, need_weights: bool, average_weights: bool, options: CountOptions | None) -> Cost:
    """``nn.MultiheadAttention`` (packed, equal q/k/v sizes) as ``F.multi_head_attention_forward`` runs it.

    in-projections (q: batch*lq rows, k and v: batch*lk rows, E -> E each), attention, out
    projection. With ``need_weights`` the attention is the explicit path: q scaled once
    (BH*lq*hd), QK^T (mask via baddbmm: +1/score), softmax, PV, and the head average of the
    weights (a mean: BH*lq*lk + batch*lq*lk); without, SDPA's formula.
    """
    hd = embed // heads
    bh = batch * heads
    cost = linear_cost(batch * lq, embed, embed, in_bias) + linear_cost(2 * batch * lk, embed, embed, in_bias)
    if need_weights:
        scores = bh * lq * lk
        flops = bh * lq * hd + SOFTMAX * scores + (scores if masked else 0)
        if average_weights:
            flops += scores + batch * lq * lk
        cost = cost + Cost.contraction(bh * lq * lk * hd * 2, flops)
    else:
        cost = cost + attention_cost(bh, lq, lk, hd, hd, masked=masked, options=options)
    return cost + linear_cost(batch * lq, embed, embed, out_bias)


def _lengths(x) -> list[int] | None:
    """Per-sequence lengths of a nested (B, L_i, E) tensor, or None for a dense one."""
    if not getattr(x, "is_nested", False):
        return None
    return [int(size[0]) for size in x._nested_tensor_size().tolist()]


@register_formula(aten._native_multi_head_attention)
def native_multi_head_attention(call: OpCall) -> Cost:
    """MHA fast path (eval + no_grad, batch_first): exactly the unfused path's cost (``mha_cost``).

    A nested (padding-free) input is priced sequence by sequence, as it runs.
    """
    a = bind(call)
    q, k = a["query"], a["key"]
    heads, embed = int(a["num_head"]), int(a["embed_dim"])
    common = dict(in_bias=a["qkv_bias"] is not None, out_bias=a["proj_bias"] is not None,
                  masked=a["mask"] is not None, need_weights=bool(a["need_weights"]),
                  average_weights=bool(a["average_attn_weights"]), options=call.options)
    q_lengths, k_lengths = _lengths(q), _lengths(k)
    if q_lengths is not None:
        k_lengths = k_lengths or q_lengths
        total = Cost()
        for lq, lk in zip(q_lengths, k_lengths):
            total = total + mha_cost(1, lq, lk, embed, heads, **common)
        return total
    batch, lq = shape(q)[:2]
    return mha_cost(batch, lq, shape(k)[1], embed, heads, **common)


def encoder_layer_cost(batch: int, length: int, embed: int, heads: int, ffn: int, *, use_gelu: bool,
                       masked: bool, options: CountOptions | None) -> Cost:
    """One ``nn.TransformerEncoderLayer`` (either norm order) as its unfused forward runs it."""
    tokens = batch * length
    n = tokens * embed
    cost = mha_cost(batch, length, length, embed, heads, in_bias=True, out_bias=True, masked=masked,
                    need_weights=False, average_weights=False, options=options)
    cost = cost + Cost.elementwise(2 * n)
    cost = cost + normalisation_cost(n, tokens, True, True) + normalisation_cost(n, tokens, True, True)
    cost = cost + linear_cost(tokens, embed, ffn, True) + linear_cost(tokens, ffn, embed, True)
    return cost + Cost.elementwise((GELU if use_gelu else RELU) * tokens * ffn)


@register_formula(aten._transformer_encoder_layer_fwd)
def transformer_encoder_layer(call: OpCall) -> Cost:
    """``nn.TransformerEncoderLayer`` fast path: exactly the unfused layer's cost.

    self-attention (``mha_cost``, need_weights=False) + 2 residual adds (N = B*L*E each) +
    2 layer norms (6N + 4*B*L + 2N) + linear1 (E -> F) + ReLU (1) or GELU (5) per B*L*F + linear2.
    A nested (padding-free) input, as ``nn.TransformerEncoder`` makes from a padding mask, is
    priced sequence by sequence.
    """
    a = bind(call)
    src = a["src"]
    embed, heads = int(a["embed_dim"]), int(a["num_heads"])
    common = dict(use_gelu=bool(a["use_gelu"]), masked=a["mask"] is not None, options=call.options)
    ffn = shape(a["ffn_weight_1"])[0]
    lengths = _lengths(src)
    if lengths is not None:
        total = Cost()
        for length in lengths:
            total = total + encoder_layer_cost(1, length, embed, heads, ffn, **common)
        return total
    batch, length, _ = shape(src)
    return encoder_layer_cost(batch, length, embed, heads, ffn, **common)


# -- FlexAttention (a higher-order operator: ``recorder.CountingMode`` routes it here) ------------
def _kept_pairs(block_mask: tuple, lq: int, lk: int) -> int | None:
    """(query, key) pairs per (batch, head) summed over the blocks a ``BlockMask`` keeps, over B x H.

    ``block_mask`` is ``BlockMask.as_tuple()``: (q length, kv length, kv_num_blocks, kv_indices,
    full_kv_num_blocks, full_kv_indices, ..., block sizes, mask_mod). A kept block counts every
    (query, key) pair in it, the last, partial block its real size. None: the block counts have no
    values here (meta tensors).
    """
    kv_num, kv_indices, full_num, full_indices = block_mask[2:6]  # (batch, heads, q blocks[, slots])
    q_block, kv_block = int(block_mask[-3]), int(block_mask[-2])
    if any(t is not None and (t.is_meta or type(t) is not torch.Tensor) for t in (kv_num, kv_indices, full_num,
                                                                                      full_indices)):
        return None
    rows = (lq - torch.arange(kv_num.shape[-1]) * q_block).clamp(0, q_block)  # queries per q block
    cols_of = (lk - torch.arange(max(kv_indices.shape[-1], 1)) * kv_block).clamp(0, kv_block)  # keys per kv block
    pairs = 0
    for num, indices in ((kv_num, kv_indices), (full_num, full_indices)):
        if num is None or indices is None:
            continue
        kept = torch.arange(indices.shape[-1]) < num.unsqueeze(-1)  # (..., q blocks, slots)
        cols = (cols_of[indices.long().clamp(0, cols_of.numel() - 1)] * kept).sum(-1)  # keys kept per q block
        pairs += int((cols * rows).sum())
    return pairs


def flex_attention_cost(args: tuple, options: CountOptions | None, backward: bool) -> Cost:
    """``flex_attention`` / ``flex_attention_backward``: as SDPA over the (query, key) pairs.

    Dense by default, as every attention here: B x Hq x Lq x Lk pairs, a ``mask_mod`` an add per
    score like any mask. With ``causal_half`` (``CountOptions``: count masked-out attention as not
    run) the pairs are those of the blocks the block mask keeps, as the fused kernel skips the others.
    A ``score_mod``'s own arithmetic is not priced (it is a traced function, not an operator).
    Backward: the fused kernel's (recomputed scores included, 2.5x the forward's MACs).
    """
    query, key, value = args[:3]
    block_mask = args[9] if backward else args[4]
    (batch, heads, lq, e), (_, kv_heads, lk, _), ev = shape(query), shape(key), shape(value)[-1]
    bh = batch * heads
    pairs = bh * lq * lk  # over the whole batch and every query head
    if options is not None and options.causal_half:
        kept = _kept_pairs(block_mask, lq, lk)
        if kept is not None:  # the block mask's batch and head dimensions may be broadcast (size 1)
            kv_num = block_mask[2]
            pairs = kept * (batch // max(kv_num.shape[0], 1)) * (heads // max(kv_num.shape[1], 1))
    masked = getattr(block_mask[-1], "__name__", "") != "noop_mask"
    # one "head" holding every pair: the per-pair terms scale with ``pairs``, the per-token ones with BH * L
    if backward:
        return _backward_cost(1, pairs, bh * lq, bh * lk, e, ev, gqa=heads != kv_heads, causal=False,
                              dropout=False, options=None, recompute=True, masked=masked)
    return _forward_cost(1, pairs, bh * lq, bh * lk, e, ev, masked=masked, causal=False, dropout=False, options=None)


#: Higher-order operators priced whole, by name (their inner operators are not priced again).
HIGHER_ORDER_FORMULAS = {
    "flex_attention": lambda args, options: flex_attention_cost(args, options, backward=False),
    "flex_attention_backward": lambda args, options: flex_attention_cost(args, options, backward=True),
}
