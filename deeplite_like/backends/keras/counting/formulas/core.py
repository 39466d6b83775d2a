"""The layers that contract: Keras' core layers and the attention layers built from the same einsums.

**Core layers** (``Dense``, ``EinsumDense``, ``Embedding``, ``ReversibleEmbedding``), as the torch
backend's matrix-product and einsum formulas (its ``linalg.py``); each formula's docstring gives its
count. LoRA (``enable_lora``) rebuilds the merged kernel every call (conv.lora_cost).

**Attention layers**, priced whole (opaque), as the torch backend prices attention:
``multi_head_attention`` prices ``MultiHeadAttention`` and ``GroupedQueryAttention`` (and says how
they differ from torch's), ``attention`` the Luong and Bahdanau layers.
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas._common as c

from ..registry import Cost, LayerCall, TensorSpec, register_layer_formula
from ._common import activation_cost, einsum_cost, einsum_output_shape, prod
from .conv import lora_cost


@register_layer_formula("keras.layers.Dense", opaque=False)
def dense(call: LayerCall) -> Cost:
    """rows * in * units MACs; + rows*units for the bias; + activation per output element.

    x (..., I) @ kernel (I, U), rows = numel(x) / I.
    """
    layer, x, out = call.layer, call.input, call.output
    in_features = x.shape[-1]
    rows = x.numel // max(in_features, 1)
    cost = Cost.contraction(rows * in_features * layer.units, out.numel if layer.use_bias else 0)
    return cost + activation_cost(call, layer.activation, out.numel) + lora_cost(layer)


@register_layer_formula("keras.layers.EinsumDense", opaque=False)
def einsum_dense(call: LayerCall) -> Cost:
    """einsum MACs (joint index space); + numel(out) for the bias; + activation per output element.

    One MAC per point of the joint index space (``abc,cd->abd``: a*b*c*d); the bias is broadcast
    over the bias axes.
    """
    layer, x, out = call.layer, call.input, call.output
    cost = einsum_cost(layer.equation, x.shape, tuple(layer.kernel.shape))
    bias = out.numel if getattr(layer, "bias", None) is not None else 0
    return cost + Cost.elementwise(bias) + activation_cost(call, layer.activation, out.numel) + lora_cost(layer)


@register_layer_formula("keras.layers.Embedding", opaque=False)
def embedding(call: LayerCall) -> Cost:
    """A look-up: 0 FLOPs, as torch's ``embedding`` (+ the LoRA rebuild when LoRA is enabled)."""
    return lora_cost(call.layer)


@register_layer_formula("keras.layers.ReversibleEmbedding", opaque=False)
def reversible_embedding(call: LayerCall) -> Cost:
    """Look-up 0; reverse: rows * D * V MACs (+3 FLOPs per logit with a logit soft-cap).

    ``reverse=True``: x (..., D) @ table^T (D, V); the soft-cap is a divide, a tanh and a multiply.
    """
    if not call.argument("reverse", 1, False):
        return lora_cost(call.layer)
    x, out = call.input, call.output
    dim = x.shape[-1]
    rows = x.numel // max(dim, 1)
    vocabulary = out.shape[-1]
    cap = 3 * out.numel if getattr(call.layer, "logit_soft_cap", None) is not None else 0
    return Cost.contraction(rows * dim * vocabulary, cap)


# -- Attention layers, priced whole (opaque), as the torch backend prices attention --------------------------
def _projection(dense, shape: tuple) -> tuple[Cost, tuple]:
    """Cost and output shape of an attention layer's ``EinsumDense`` projection of ``shape``."""
    kernel = tuple(dense.kernel.shape)
    out = einsum_output_shape(dense.equation, shape, kernel)
    bias = prod(out) if getattr(dense, "bias", None) is not None else 0
    return einsum_cost(dense.equation, shape, kernel) + Cost.elementwise(bias), out


def _masked(call: LayerCall, *specs: TensorSpec, sliding_window=None) -> bool:
    names = ("query_mask", "value_mask", "key_mask", "attention_mask")
    explicit = any(call.kwargs.get(name) is not None for name in names)
    return explicit or bool(call.kwargs.get("use_causal_mask")) or sliding_window is not None or \
        any(spec is not None and spec.masked for spec in specs)


def _apply_scores(call: LayerCall, scores: int, pv_macs: int, masked: bool, dropout: float) -> Cost:
    """Mask add, softmax, dropout (training) over the scores, then P @ V (``pv_macs``)."""
    flops = c.SOFTMAX * scores + (scores if masked else 0)
    if call.training and float(dropout or 0.0) > 0.0:
        flops += c.DROPOUT * scores
    return Cost.contraction(pv_macs, flops)


def _core(call: LayerCall, scores: int, q_elements: int, key_dim: int, value_dim: int, masked: bool,
          dropout: float) -> Cost:
    """Scale q, Q @ K^T, mask, softmax, dropout, P @ V."""
    qk, pv = scores * key_dim, scores * value_dim
    if call.kwargs.get("use_causal_mask") and call.options.causal_half:
        qk, pv = qk // 2, pv // 2
    return Cost.contraction(qk, q_elements) + _apply_scores(call, scores, pv, masked, dropout)


def _multi_head(call: LayerCall, attention_axes: tuple, use_gate: bool, dropout: float, sliding_window) -> Cost:
    layer = call.layer
    query = call.argument("query", 0)
    value = call.argument("value", 1)
    key = call.argument("key", 2) or value
    cost_q, q = _projection(layer._query_dense, query.shape)
    cost_k, k = _projection(layer._key_dense, key.shape)
    cost_v, v = _projection(layer._value_dense, value.shape)
    cost = cost_q + cost_k + cost_v
    last = len(q) - 1
    batch_dims = prod(q[i] for i in range(len(q)) if i not in attention_axes and i != last)
    scores = batch_dims * prod(q[i] for i in attention_axes) * prod(k[i] for i in attention_axes)
    masked = _masked(call, query, value, key, sliding_window=sliding_window)
    cost = cost + _core(call, scores, prod(q), q[-1], v[-1], masked, dropout)
    context = q[:-1] + (v[-1],)  # the attention output, (B, T..., heads, value_dim)
    if use_gate:
        cost_gate, _ = _projection(layer._gate_dense, query.shape)
        cost = cost + cost_gate + Cost.elementwise(prod(context))
    cost_out, _ = _projection(layer._output_dense, context)
    return cost + cost_out


@register_layer_formula("keras.layers.MultiHeadAttention")
def multi_head_attention(call: LayerCall) -> Cost:
    """Projections + scale q + QK^T + mask + softmax (5/score) + dropout + PV (+ gate); see module doc.

    ``MultiHeadAttention`` and ``GroupedQueryAttention`` (q, k, v = the projected tensors, S =
    number of attention scores = batch dims x heads x query positions x key positions; GQA
    counts its key/value heads repeated to the query heads, as torch's math path)::

        projections           query, key, value, output (and gate) ``EinsumDense``: einsum MACs,
                              + 1 FLOP per output element for each bias
        scale the query       numel(q) FLOPs (Keras multiplies q by 1/sqrt(key_dim) once)
        Q @ K^T               S * key_dim MACs
        mask add              S FLOPs when any mask applies (attention_mask, use_causal_mask,
                              query/value/key masks, a sliding window)
        softmax               5 * S FLOPs
        dropout (training)    2 * S FLOPs
        P @ V                 S * value_dim MACs
        gate (use_gate)       the gate projection + 1 multiply per attention-output element

    Attention is dense by default; with ``count_ops(..., causal_half=True)`` a causal call
    (``use_causal_mask=True``) counts half of the two contractions' MACs. Torch's
    ``nn.MultiheadAttention`` with ``need_weights=True`` scales q once as here; its SDPA path
    scales q and k (``BH * (Lq + Lk) * E``) and, with ``need_weights``, averages the weights
    over heads: those are the only differences for the same architecture.
    """
    layer = call.layer
    return _multi_head(call, tuple(layer._attention_axes), bool(getattr(layer, "_use_gate", False)),
                       layer._dropout, getattr(layer, "_sliding_window", None))


@register_layer_formula("keras.layers.GroupQueryAttention")
def grouped_query_attention(call: LayerCall) -> Cost:
    """As MultiHeadAttention with key/value heads repeated to the query heads (attention over axis 1)."""
    layer = call.layer
    return _multi_head(call, (1,), bool(getattr(layer, "use_gate", False)), layer.dropout,
                       getattr(layer, "sliding_window", None))


def _luong_inputs(call: LayerCall) -> tuple[TensorSpec, TensorSpec, TensorSpec, bool]:
    inputs = call.inputs
    query, value = inputs[0], inputs[1]
    key = inputs[2] if len(inputs) > 2 else value
    mask = call.argument("mask", 1)
    value_masked = isinstance(mask, (list, tuple)) and len(mask) > 1 and mask[1] is not None
    masked = value_masked or bool(call.kwargs.get("use_causal_mask")) or value.masked
    return query, value, key, masked


@register_layer_formula("keras.layers.Attention")
def attention(call: LayerCall) -> Cost:
    """dot: S*D MACs (+S scale); concat: S*D*(3 or 4) + S FLOPs; then mask, softmax 5S, dropout, S*Dv MACs.

    ``Attention`` (Luong) and ``AdditiveAttention`` (Bahdanau), with S = batch x Tq x Tv and D
    the feature size::

        Attention dot         Q @ K^T S*D MACs; + S for the scale (use_scale)
        Attention concat      per score and feature: add, tanh, sum (+ scale) = 3 (4); + S for
                              the score weight
        AdditiveAttention     per score and feature: add, tanh, sum (+ scale) = 3 (4)
        then                  mask add S (a value mask or use_causal_mask), softmax 5S, dropout
                              2S (training), P @ V S*Dv MACs
    """
    layer = call.layer
    query, value, key, masked = _luong_inputs(call)
    scores = query.numel // query.shape[-1] * key.shape[-2]
    dim = query.shape[-1]
    scaled = layer.scale is not None
    if layer.score_mode == "dot":
        cost = Cost.contraction(scores * dim, scores if scaled else 0)
    else:
        cost = Cost.elementwise(scores * dim * (3 + int(scaled)) + scores)
    return cost + _apply_scores(call, scores, scores * value.shape[-1], masked, layer.dropout)


@register_layer_formula("keras.layers.AdditiveAttention")
def additive_attention(call: LayerCall) -> Cost:
    """sum(scale * tanh(q + k)): S*D*(3 or 4) FLOPs; then mask, softmax 5S, dropout, S*Dv MACs."""
    layer = call.layer
    query, value, key, masked = _luong_inputs(call)
    scores = query.numel // query.shape[-1] * key.shape[-2]
    cost = Cost.elementwise(scores * query.shape[-1] * (3 + int(bool(layer.use_scale))))
    return cost + _apply_scores(call, scores, scores * value.shape[-1], masked, layer.dropout)
