"""Quantized kernels (``torch.ao.quantization``, static and dynamic): the float twin's cost.

A quantized model does the same arithmetic as the float model it was converted from, in int8:
each ``quantized::`` op is priced as its float counterpart (a MAC is a MAC, whatever the
width), so a quantized model counts the MACs of its float twin.

Re-quantising an output (scale, round, clamp to int8) is part of every quantized kernel and
is not counted, as a float kernel's rounding is not; ``quantize_per_tensor`` /
``quantize_per_channel`` / ``dequantize`` (float <-> int8 conversions at the model's edges,
which the float twin does not run) are free, as casts are.

The packed weights are read by ``_conv_weight`` / ``_linear_weight``; the cost of each op
family is listed in ``_q``.
"""
from __future__ import annotations

from typing import Any

import torch

from ..registry import Cost, OpCall, register_formula, register_free
from ._common import MISSING, numel, ops, prod, shape
from .elementwise import CELU, HARDSWISH, HARDTANH, LEAKY_RELU, RELU, SIGMOID, SOFTMAX
from .reduction import _running_stats_cost, normalisation_cost

quantized = torch.ops.quantized


def _q(*names: str) -> list[Any]:
    """The ``quantized::`` packets named that this torch build has (the others are recorded in ``MISSING``).

    What each family of them costs::

        conv{1,2,3}d[_relu]          out * (C_in/groups) * prod(kernel) MACs; + out bias, + out relu
        conv_transpose{1,2,3}d       input * (C_out/groups) * prod(kernel) MACs; + out for a bias
        linear[_relu][_dynamic]      rows * in * out MACs; + rows*out bias, + rows*out relu
        add, mul [_relu], _scalar    1 FLOP per output element (+1 relu)
        matmul                       as ``aten.matmul``: out * k MACs
        cat                          free (``cat_relu``: 1 FLOP per output element)
        activations, softmax, norms  the float formula's FLOPs per element (``elementwise.py``, ...)
    """
    found = []
    for name in names:
        if hasattr(quantized, name):
            found.append(getattr(quantized, name))
        else:
            MISSING.append(f"quantized::{name}")
    return found


def _conv_weight(packed: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight, bias) of a packed conv: ``conv{2,3}d_unpack`` (1-D convs are packed as 2-D).

    Weights live in packed
    parameter objects, whose shapes are read with ``quantized::conv2d_unpack`` / ``conv3d_unpack``
    / ``linear_unpack`` (free): the conv weight is (C_out, C_in / groups, *kernel), the transposed
    conv weight (C_in, C_out / groups, *kernel), the linear weight (out, in).
    """
    unpack = quantized.conv3d_unpack if "Conv3d" in str(getattr(packed, "_type", lambda: "")()) else \
        quantized.conv2d_unpack
    return unpack(packed)


def _linear_weight(packed: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight, bias) of a packed linear: ``linear_unpack``; the weight is (out, in)."""
    return quantized.linear_unpack(packed)


def _quantized_conv(transposed: bool, relu: bool):
    def formula(call: OpCall) -> Cost:
        x, out = call.args[0], call.out
        weight, bias = _conv_weight(call.args[1])
        w = shape(weight)
        if len(w) == x.dim() + 1:  # a 1-D conv packed as 2-D: weight (C_out, C_in/g, 1, k)
            w = w[:2] + w[3:]
        per_element = w[1] * prod(w[2:])
        macs = (numel(x) if transposed else numel(out)) * per_element
        return Cost.contraction(macs, numel(out) * (int(bias is not None) + RELU * int(relu)))

    kind = "conv_transpose" if transposed else "conv"
    formula.__name__ = formula.__qualname__ = f"quantized_{kind}{'_relu' if relu else ''}"
    formula.__doc__ = (f"quantized {kind}: MACs from the packed weight as the float {kind} "
                       f"(+ out FLOPs for a bias{', + out for the ReLU' if relu else ''}).")
    return formula


register_formula(*_q("conv1d", "conv2d", "conv3d"))(_quantized_conv(False, False))
register_formula(*_q("conv1d_relu", "conv2d_relu", "conv3d_relu"))(_quantized_conv(False, True))
register_formula(*_q("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"))(_quantized_conv(True, False))


def _quantized_linear(relu: bool):
    def formula(call: OpCall) -> Cost:
        weight, bias = _linear_weight(call.args[1])
        out_features, in_features = shape(weight)
        rows = numel(call.args[0]) // max(in_features, 1)
        outputs = rows * out_features
        return Cost.contraction(rows * in_features * out_features,
                                outputs * (int(bias is not None) + RELU * int(relu)))

    formula.__name__ = formula.__qualname__ = f"quantized_linear{'_relu' if relu else ''}"
    formula.__doc__ = (f"quantized linear (static or dynamic): rows*in*out MACs (+ rows*out FLOPs for a bias"
                       f"{', + rows*out for the ReLU' if relu else ''}).")
    return formula


register_formula(*_q("linear", "linear_dynamic", "linear_dynamic_fp16"))(_quantized_linear(False))
register_formula(*_q("linear_relu", "linear_relu_dynamic", "linear_relu_dynamic_fp16"))(_quantized_linear(True))


def _per_output(flops_per_element: int, name: str):
    def formula(call: OpCall) -> Cost:
        out = call.out[0] if isinstance(call.out, (tuple, list)) else call.out
        return Cost.elementwise(flops_per_element * numel(out))

    formula.__name__ = formula.__qualname__ = name
    formula.__doc__ = f"{flops_per_element} FLOP(s) per output element (quantized or float)."
    return formula


register_formula(*_q("add", "add_out", "add_scalar", "add_scalar_out", "mul", "mul_out", "mul_scalar",
                     "mul_scalar_out", "threshold"))(_per_output(1, "quantized_binary"))
register_formula(*_q("add_relu", "add_relu_out", "add_scalar_relu", "add_scalar_relu_out", "mul_relu", "mul_relu_out",
                     "mul_scalar_relu", "mul_scalar_relu_out"))(_per_output(1 + RELU, "quantized_binary_relu"))
register_formula(*_q("cat_relu"))(_per_output(RELU, "quantized_cat_relu"))
register_formula(*_q("hardswish"))(_per_output(HARDSWISH, "quantized_hardswish"))
register_formula(*_q("sigmoid"))(_per_output(SIGMOID, "quantized_sigmoid"))
register_formula(*_q("leaky_relu"))(_per_output(LEAKY_RELU, "quantized_leaky_relu"))
register_formula(*_q("relu6"))(_per_output(HARDTANH, "quantized_relu6"))
register_formula(*_q("elu"))(_per_output(3, "quantized_elu"))
register_formula(*_q("celu"))(_per_output(CELU, "quantized_celu"))
register_formula(*_q("softmax"))(_per_output(SOFTMAX, "quantized_softmax"))


@register_formula(*_q("matmul"))
def quantized_matmul(call: OpCall) -> Cost:
    """qa (..., m, k) @ qb (..., k, n): out * k MACs, as ``aten.matmul``."""
    return Cost.contraction(numel(call.out) * shape(call.args[0])[-1])


@register_formula(*_q("batch_norm1d", "batch_norm2d", "batch_norm3d", "batch_norm"))
def quantized_batch_norm(call: OpCall) -> Cost:
    """Quantized batch norm (running statistics): 2N + 2C (+N weight, +N bias), as the float eval form."""
    x, weight, bias = call.args[0], call.args[1], call.args[2]
    return _running_stats_cost(numel(x), shape(x)[1] if x.dim() > 1 else 1, weight is not None, bias is not None)


@register_formula(*_q("layer_norm"))
def quantized_layer_norm(call: OpCall) -> Cost:
    """Quantized layer norm: 6N + 4R (+N weight, +N bias), R = N / prod(normalized_shape)."""
    x, normalized, weight, bias = call.args[:4]
    rows = numel(x) // max(prod(normalized), 1)
    return normalisation_cost(numel(x), rows, weight is not None, bias is not None)


@register_formula(*_q("group_norm"))
def quantized_group_norm(call: OpCall) -> Cost:
    """Quantized group norm: 6N + 4*B*G (+N weight, +N bias)."""
    x, groups, weight, bias = call.args[:4]
    return normalisation_cost(numel(x), shape(x)[0] * int(groups), weight is not None, bias is not None)


@register_formula(*_q("instance_norm"))
def quantized_instance_norm(call: OpCall) -> Cost:
    """Quantized instance norm: 6N + 4*B*C (+N weight, +N bias)."""
    x, weight, bias = call.args[:3]
    return normalisation_cost(numel(x), shape(x)[0] * shape(x)[1], weight is not None, bias is not None)


# Conversions at the model's edges, packing and reading quantization parameters: no model arithmetic.
register_free(*_q("cat", "conv2d_prepack", "conv3d_prepack", "conv1d_prepack", "conv_transpose1d_prepack",
                  "conv_transpose2d_prepack", "conv_transpose3d_prepack", "linear_prepack", "linear_prepack_fp16",
                  "conv2d_unpack", "conv3d_unpack", "linear_unpack", "linear_unpack_fp16"))
register_free(*ops("quantize_per_tensor", "quantize_per_tensor_dynamic", "quantize_per_channel", "q_scale",
                   "q_zero_point", "q_per_channel_scales", "q_per_channel_zero_points", "q_per_channel_axis",
                   "int_repr", "qscheme", "_make_per_channel_quantized_tensor"))
