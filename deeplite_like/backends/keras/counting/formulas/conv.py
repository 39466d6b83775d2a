"""Sliding-window layers of rank 1-3: convolutions and pools, as the torch backend counts them.

Convolutions of rank 1-3: regular (grouped, dilated, strided), depthwise, separable, transposed.

One multiply-accumulate per (output element, weight tap) pair the kernel forms, padding
included, as the torch backend counts it (K = prod(kernel_size)); each formula's docstring
gives its count. Stride and dilation enter through the output size only; ``padding='causal'``
pads (free) and runs a valid convolution.

Pooling of ranks 1-3, as the torch backend's pooling formulas (K = prod(pool_size)); each
formula's docstring gives its count (the global pools as torch's adaptive pools to 1, or ``mean``).

Windows are priced dense: positions that fall in ``'same'`` padding count as window
elements, as in torch (Keras' average pool divides by the valid count; the cost is the same).
A ``mask`` given to global average pooling adds a multiply per input element.
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas._common as c

from ..registry import Cost, LayerCall, LayerFormula, register_layer_formula
from ._common import activation_cost, channel_axis, float_elements, named, prod, spatial_dims


def lora_cost(layer) -> Cost:
    """Rebuilding a LoRA kernel each call (``enable_lora``): ``lora_a (..., r) @ lora_b (r, ...)`` MACs,
    scaled and added (2 FLOPs per kernel element)."""
    if not getattr(layer, "lora_enabled", False):
        return Cost()
    a, b = tuple(layer.lora_kernel_a.shape), tuple(layer.lora_kernel_b.shape)
    merged = prod(a[:-1]) * prod(b[1:])
    return Cost.contraction(merged * a[-1], 2 * merged)


def _epilogue(call: LayerCall, out_elements: int) -> Cost:
    """Bias: 1 FLOP per output element; ``activation=``: its per-element cost per output element
    (``_common.py``)."""
    layer = call.layer
    bias = out_elements if getattr(layer, "use_bias", False) else 0
    return Cost.elementwise(bias) + activation_cost(call, getattr(layer, "activation", None), out_elements)


@register_layer_formula("keras.layers.Conv1D", "keras.layers.Conv2D", "keras.layers.Conv3D", opaque=False)
def conv(call: LayerCall) -> Cost:
    """numel(out) * prod(kernel_size) * C_in/groups MACs; + bias and activation per output element."""
    layer, x, out = call.layer, call.input, call.output
    c_in = x.shape[channel_axis(layer, x.rank)]
    macs = out.numel * prod(layer.kernel_size) * (c_in // layer.groups)
    return Cost.contraction(macs) + _epilogue(call, out.numel) + lora_cost(layer)


@register_layer_formula("keras.layers.DepthwiseConv1D", "keras.layers.DepthwiseConv2D", opaque=False)
def depthwise_conv(call: LayerCall) -> Cost:
    """numel(out) * prod(kernel_size) MACs (each output sees one input channel); + bias and activation
    per output element."""
    out = call.output
    return Cost.contraction(out.numel * prod(call.layer.kernel_size)) + _epilogue(call, out.numel)


@register_layer_formula("keras.layers.SeparableConv1D", "keras.layers.SeparableConv2D", opaque=False)
def separable_conv(call: LayerCall) -> Cost:
    """Depthwise numel(mid) * K + pointwise numel(out) * C_in * depth_multiplier MACs; bias, activation.

    mid = the depthwise output (spatial_out x C_in*depth_multiplier).
    """
    layer, x, out = call.layer, call.input, call.output
    c_in = x.shape[channel_axis(layer, x.rank)]
    mid_channels = c_in * layer.depth_multiplier
    positions = out.numel // layer.filters  # batch x spatial output positions
    depthwise = positions * mid_channels * prod(layer.kernel_size)
    pointwise = out.numel * mid_channels
    return Cost.contraction(depthwise + pointwise) + _epilogue(call, out.numel)


@register_layer_formula("keras.layers.Conv1DTranspose", "keras.layers.Conv2DTranspose",
                        "keras.layers.Conv3DTranspose", opaque=False)
def conv_transpose(call: LayerCall) -> Cost:
    """numel(input) * prod(kernel_size) * filters MACs (each input scatters into the kernel); + bias and
    activation per output element."""
    layer, x, out = call.layer, call.input, call.output
    macs = x.numel * prod(layer.kernel_size) * layer.filters
    return Cost.contraction(macs) + _epilogue(call, out.numel)


# -- Pools (max, average, global, adaptive) ------------------------------------------------------------------
_RANKS = ("1D", "2D", "3D")


@register_layer_formula(*(f"keras.layers.MaxPooling{r}" for r in _RANKS))
def max_pool(call: LayerCall) -> Cost:
    """numel(out) * prod(pool_size) FLOPs (one max per window element)."""
    return Cost.elementwise(float_elements(call.output) * prod(call.layer.pool_size))


@register_layer_formula(*(f"keras.layers.AveragePooling{r}" for r in _RANKS))
def avg_pool(call: LayerCall) -> Cost:
    """numel(out) * (prod(pool_size) + 1) FLOPs (sum the window, one divide)."""
    return Cost.elementwise(float_elements(call.output) * (prod(call.layer.pool_size) + 1))


@register_layer_formula(*(f"keras.layers.GlobalMaxPooling{r}" for r in _RANKS))
def global_max_pool(call: LayerCall) -> Cost:
    """N FLOPs (one max per input element)."""
    return Cost.elementwise(float_elements(call.input))


@register_layer_formula(*(f"keras.layers.GlobalAveragePooling{r}" for r in _RANKS))
def global_avg_pool(call: LayerCall) -> Cost:
    """N + numel(out) FLOPs (sum, one divide per output); + N for a mask multiply."""
    n = float_elements(call.input)
    masked = call.argument("mask", 1) is not None
    return Cost.elementwise(n + float_elements(call.output) + (n if masked else 0))


def _adaptive(divide: bool, name: str, doc: str) -> LayerFormula:
    """Adaptive max: one FLOP per element of every output window; adaptive average: the same + one
    divide per output. Window i spans [floor(i*In/Out), ceil((i+1)*In/Out)) per dimension."""
    def formula(call: LayerCall) -> Cost:
        x, out = call.input, call.output
        if not out.is_float:
            return Cost()
        spatial_in, spatial_out = spatial_dims(call.layer, x.shape), spatial_dims(call.layer, out.shape)
        planes = out.numel // max(prod(spatial_out), 1)
        flops = planes * c.adaptive_window_elements(spatial_in, spatial_out) + (out.numel if divide else 0)
        return Cost.elementwise(flops)

    return named(formula, name, doc)


register_layer_formula(*(f"keras.layers.AdaptiveAveragePooling{r}" for r in _RANKS))(_adaptive(
    True, "adaptive_avg_pool", "One FLOP per element of every output window + one divide per output."))
register_layer_formula(*(f"keras.layers.AdaptiveMaxPooling{r}" for r in _RANKS))(_adaptive(
    False, "adaptive_max_pool", "One FLOP per element of every output window."))
