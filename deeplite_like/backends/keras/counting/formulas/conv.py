"""Convolutions of rank 1-3: regular (grouped, dilated, strided), depthwise, separable, transposed.

One multiply-accumulate per (output element, weight tap) pair the kernel forms, padding
included, as the torch backend counts it (K = prod(kernel_size)); each formula's docstring
gives its count. Stride and dilation enter through the output size only; ``padding='causal'``
pads (free) and runs a valid convolution.
"""
from __future__ import annotations

from ..registry import Cost, LayerCall, register_layer_formula
from ._common import activation_cost, channel_axis, prod


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
    (``conventions.py``)."""
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
