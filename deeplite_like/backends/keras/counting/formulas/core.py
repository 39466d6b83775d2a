"""Core layers: ``Dense``, ``EinsumDense``, ``Embedding``, ``ReversibleEmbedding``.

As the torch backend's matmul and einsum formulas; each formula's docstring gives its count. LoRA
(``enable_lora``) rebuilds the merged kernel every call (conv.lora_cost).
"""
from __future__ import annotations

from ..registry import Cost, LayerCall, register_layer_formula
from ._common import activation_cost, einsum_cost
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
