"""Convolutions of every rank (1-3), grouped, depthwise, dilated, strided and transposed.

One multiply-accumulate per (output element, weight tap) pair that the kernel forms, padding
included (a padded zero is multiplied like any input)::

    regular:    MACs = numel(out)   * (C_in / groups)  * prod(kernel)   weight (C_out, C_in/g, *k)
    transposed: MACs = numel(input) * (C_out / groups) * prod(kernel)   weight (C_in, C_out/g, *k)

Stride and dilation enter through the output size only. A bias is 1 FLOP per output element.
``nn.Conv*`` with ``padding_mode='circular'|'reflect'|'replicate'`` pads first (free) and then
runs a plain convolution. ``F.conv*d`` reach the counter as ``aten.convolution``.
"""
from __future__ import annotations

from ..registry import Cost, OpCall, register_formula
from ._common import aten, bind, numel, ops, prod, shape
from .activation import RELU


def conv_macs(input_t, weight, out, transposed: bool) -> int:
    """MACs of one convolution from its input, weight and output shapes."""
    w = shape(weight)
    per_element = w[1] * prod(w[2:])
    return (numel(input_t) if transposed else numel(out)) * per_element


def _conv(call: OpCall, transposed: bool | None = None, input_name: str = "input") -> Cost:
    a = bind(call)
    x = a.get(input_name, a.get("self"))
    if transposed is None:
        transposed = bool(a.get("transposed", False))
    out = call.out
    bias = a.get("bias")
    return Cost.contraction(conv_macs(x, a["weight"], out, transposed), numel(out) if bias is not None else 0)


@register_formula(aten.convolution, aten._convolution, aten.convolution_overrideable,
                  aten.conv1d, aten.conv2d, aten.conv3d)
def convolution(call: OpCall) -> Cost:
    """Convolution (transposed or not): see the module docstring; + numel(out) FLOPs for a bias."""
    return _conv(call)


@register_formula(*ops("conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                       "cudnn_convolution_transpose", "slow_conv_transpose2d", "slow_conv_transpose3d"))
def conv_transpose(call: OpCall) -> Cost:
    """Transposed convolution: numel(input) * (C_out/g) * prod(kernel) MACs; + numel(out) for a bias."""
    return _conv(call, transposed=True)


@register_formula(*ops("mkldnn_convolution", "cudnn_convolution", "miopen_convolution", "_slow_conv2d_forward",
                       "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d", "thnn_conv2d",
                       "_conv_depthwise2d", "conv_depthwise3d", "_nnpack_spatial_convolution"))
def backend_convolution(call: OpCall) -> Cost:
    """Backend-specific regular convolution kernels: numel(out) * (C_in/g) * prod(kernel) MACs (+ bias)."""
    return _conv(call, transposed=False)


@register_formula(aten.cudnn_convolution_relu)
def convolution_relu(call: OpCall) -> Cost:
    """Fused conv + bias + ReLU: conv MACs, + numel(out) for the bias, + 1 FLOP/element for ReLU."""
    return _conv(call, transposed=False) + Cost.elementwise(RELU * numel(call.out))


@register_formula(aten.cudnn_convolution_add_relu)
def convolution_add_relu(call: OpCall) -> Cost:
    """Fused conv + bias + alpha*z + ReLU: conv MACs, + add (1, +1 if alpha != 1) + ReLU (1) per element."""
    a = bind(call)
    per_element = 1 + RELU + (0 if a["alpha"] in (None, 1, 1.0) else 1)
    return _conv(call, transposed=False) + Cost.elementwise(per_element * numel(call.out))


@register_formula(aten.conv_tbc)
def conv_tbc(call: OpCall) -> Cost:
    """Time-batch-channel conv, weight (k, C_in, C_out): numel(out) * C_in * k MACs + numel(out) bias."""
    k, c_in, _ = shape(call.args[1])
    return Cost.contraction(numel(call.out) * c_in * k, numel(call.out))


@register_formula(aten.convolution_backward, aten.convolution_backward_overrideable)
def convolution_backward(call: OpCall) -> Cost:
    """Per output_mask: grad_input and grad_weight each cost the forward MACs; grad_bias numel(grad_out) FLOPs.

    (torch's FlopCounterMode over-counts grad_weight of grouped convolutions by ``groups``.)
    """
    a = bind(call)
    grad_out, mask = a["grad_output"], a["output_mask"]
    forward = conv_macs(a["input"], a["weight"], grad_out, bool(a["transposed"]))
    macs = forward * (int(bool(mask[0])) + int(bool(mask[1])))
    bias = numel(grad_out) if mask[2] else 0
    return Cost.contraction(macs, bias)
