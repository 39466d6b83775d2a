"""Normalisation layers. N = input elements, R = statistics groups (rows for layer norm,
channels for batch norm, batch*groups for group norm, batch*channels for instance norm)::

    batch statistics   mean N+R; variance (sub, square, sum) 3N + divide R; rstd (add eps,
                       rsqrt) 2R                                            -> 4N + 4R
    normalise          (x - mean) * rstd                                   -> 2N
    affine             * weight N, + bias N (each only when present)
    layer / group / instance / batch norm (training):  6N + 4R (+N weight, +N bias)
    batch norm with running statistics (eval): rstd 2C + normalise 2N      -> 2N + 2C (+N, +N)
    RMS norm:  square N, mean N+R, add eps R, rsqrt R, scale N             -> 3N + 3R (+N weight)
               (exactly what ``nn.RMSNorm`` costs where it decomposes, as on CPU)

Running-statistics updates (momentum, per channel) are book-keeping and not counted.
Instance norm runs as batch norm over (1, batch*channels, ...), so it is priced by the same
formula. Backward (per element of the input; R as above)::

    grad_input   xhat 2N, g = dy*w N (with weight), g*xhat N, two sums 2N, two means 2R,
                 combine (sub, mul, sub, mul) 4N                            -> 9N + 2R (+N)
    grad_weight  sum(dy * xhat) 2N;   grad_bias  sum(dy) N
    batch norm eval: grad_input dy*rstd (*w) N (+N); grad_weight xhat 2N + 2N; grad_bias N
"""
from __future__ import annotations

from ..registry import Cost, OpCall, register_formula
from ._common import aten, bind, is_float, numel, ops, prod, shape


def normalisation_cost(n: int, groups: int, weight: bool, bias: bool) -> Cost:
    """Normalise with batch statistics over ``groups`` groups of ``n`` elements in total."""
    return Cost.elementwise(6 * n + 4 * groups + n * int(weight) + n * int(bias))


def _running_stats_cost(n: int, channels: int, weight: bool, bias: bool) -> Cost:
    return Cost.elementwise(2 * n + 2 * channels + n * int(weight) + n * int(bias))


def _batch_norm(x, weight, bias, training: bool) -> Cost:
    if not is_float(x):
        return Cost()
    n = numel(x)
    channels = shape(x)[1] if x.dim() > 1 else 1
    if training:
        return normalisation_cost(n, channels, weight is not None, bias is not None)
    return _running_stats_cost(n, channels, weight is not None, bias is not None)


@register_formula(aten.native_batch_norm, aten.batch_norm, aten._batch_norm_impl_index, aten.cudnn_batch_norm,
                  aten.miopen_batch_norm, aten._native_batch_norm_legit_functional)
def batch_norm(call: OpCall) -> Cost:
    """Batch norm: training 6N + 4C (+N weight, +N bias); eval (running stats) 2N + 2C (+N, +N)."""
    a = bind(call)
    return _batch_norm(a["input"], a["weight"], a["bias"], bool(a["training"]))


@register_formula(aten._native_batch_norm_legit)
def batch_norm_legit(call: OpCall) -> Cost:
    """``_native_batch_norm_legit`` (with or without running stats): as ``native_batch_norm``."""
    a = bind(call)
    return _batch_norm(a["input"], a["weight"], a["bias"], bool(a["training"]))


@register_formula(aten._native_batch_norm_legit_no_training)
def batch_norm_no_training(call: OpCall) -> Cost:
    """Batch norm from running statistics: 2N + 2C (+N weight, +N bias)."""
    a = bind(call)
    return _batch_norm(a["input"], a["weight"], a["bias"], False)


@register_formula(*ops("_batch_norm_with_update", "_batch_norm_with_update_functional"))
def batch_norm_with_update(call: OpCall) -> Cost:
    """Training batch norm that updates running stats: 6N + 4C (+N weight, +N bias)."""
    a = bind(call)
    return _batch_norm(a["input"], a["weight"], a["bias"], True)


@register_formula(*ops("_batch_norm_no_update"))
def batch_norm_no_update(call: OpCall) -> Cost:
    """Batch norm without update: from running stats when given (2N + 2C), else batch stats (6N + 4C)."""
    a = bind(call)
    return _batch_norm(a["input"], a["weight"], a["bias"], a["running_mean"] is None)


@register_formula(aten.instance_norm)
def instance_norm(call: OpCall) -> Cost:
    """Instance norm (batch stats over each sample's channel): 6N + 4*B*C (+N, +N)."""
    a = bind(call)
    x = a["input"]
    if not is_float(x):
        return Cost()
    b, c = shape(x)[:2]
    if not a["use_input_stats"]:
        return _running_stats_cost(numel(x), b * c, a["weight"] is not None, a["bias"] is not None)
    return normalisation_cost(numel(x), b * c, a["weight"] is not None, a["bias"] is not None)


@register_formula(aten.native_layer_norm, aten.layer_norm)
def layer_norm(call: OpCall) -> Cost:
    """Layer norm: 6N + 4R (+N weight, +N bias), R = rows = N / prod(normalized_shape)."""
    a = bind(call)
    x = a["input"]
    if not is_float(x):
        return Cost()
    rows = numel(x) // max(prod(a["normalized_shape"]), 1)
    return normalisation_cost(numel(x), rows, a["weight"] is not None, a["bias"] is not None)


@register_formula(aten.native_group_norm)
def native_group_norm(call: OpCall) -> Cost:
    """Group norm: 6N + 4*B*G (+N weight, +N bias)."""
    a = bind(call)
    x = a["input"]
    if not is_float(x):
        return Cost()
    return normalisation_cost(numel(x), int(a["N"]) * int(a["group"]), a["weight"] is not None, a["bias"] is not None)


@register_formula(aten.group_norm)
def group_norm(call: OpCall) -> Cost:
    """Group norm (composite form): 6N + 4*B*G (+N weight, +N bias)."""
    a = bind(call)
    x = a["input"]
    if not is_float(x):
        return Cost()
    return normalisation_cost(numel(x), shape(x)[0] * int(a["num_groups"]), a["weight"] is not None,
                              a["bias"] is not None)


@register_formula(aten.rms_norm, aten._fused_rms_norm)
def rms_norm(call: OpCall) -> Cost:
    """RMS norm: 3N + 3R (+N weight), R = rows; equal to its CPU decomposition (pow, mean, add, rsqrt, mul)."""
    a = bind(call)
    x = a["input"]
    if not is_float(x):
        return Cost()
    n = numel(x)
    rows = n // max(prod(a["normalized_shape"]), 1)
    return Cost.elementwise(3 * n + 3 * rows + (n if a["weight"] is not None else 0))


def _norm_backward(n: int, groups: int, weight: bool, mask) -> Cost:
    flops = 0
    if mask[0]:
        flops += 9 * n + 2 * groups + (n if weight else 0)
    if len(mask) > 1 and mask[1]:
        flops += 2 * n
    if len(mask) > 2 and mask[2]:
        flops += n
    return Cost.elementwise(flops)


@register_formula(aten.native_layer_norm_backward)
def layer_norm_backward(call: OpCall) -> Cost:
    """Layer norm backward: grad_input 9N + 2R (+N weight), grad_weight 2N, grad_bias N (per output_mask)."""
    a = bind(call)
    n = numel(a["input"])
    rows = n // max(prod(a["normalized_shape"]), 1)
    return _norm_backward(n, rows, a["weight"] is not None, a["output_mask"])


@register_formula(aten.native_group_norm_backward)
def group_norm_backward(call: OpCall) -> Cost:
    """Group norm backward: grad_input 9N + 2*B*G (+N weight), grad_weight 2N, grad_bias N."""
    a = bind(call)
    return _norm_backward(numel(a["input"]), int(a["N"]) * int(a["group"]), a["weight"] is not None, a["output_mask"])


@register_formula(aten._fused_rms_norm_backward)
def rms_norm_backward(call: OpCall) -> Cost:
    """RMS norm backward: grad_input 6N + R (+N weight), grad_weight 2N (per output_mask).

    grad_input = rstd * (g - xhat * mean(g * xhat)), g = dy * w: xhat N, g N (weight),
    g*xhat N, sum N, divide R, xhat*mean N, sub N, *rstd N.
    """
    a = bind(call)
    n = numel(a["input"])
    rows = n // max(prod(a["normalized_shape"]), 1)
    mask = a["output_mask"]
    flops = (6 * n + rows + (n if a["weight"] is not None else 0)) if mask[0] else 0
    return Cost.elementwise(flops + (2 * n if mask[1] else 0))


def _batch_norm_backward(x, weight, training: bool, mask) -> Cost:
    n = numel(x)
    channels = shape(x)[1] if x.dim() > 1 else 1
    if training:
        return _norm_backward(n, channels, weight is not None, mask)
    flops = (n + (n if weight is not None else 0)) if mask[0] else 0
    flops += (4 * n if mask[1] else 0) + (n if mask[2] else 0)
    return Cost.elementwise(flops)


@register_formula(aten.native_batch_norm_backward)
def batch_norm_backward(call: OpCall) -> Cost:
    """Batch norm backward: training as layer norm's (R = C); eval grad_input N (+N weight), grad_weight 4N, bias N."""
    a = bind(call)
    return _batch_norm_backward(a["input"], a["weight"], bool(a["train"]), a["output_mask"])


@register_formula(aten.batch_norm_backward)
def batch_norm_backward_update(call: OpCall) -> Cost:
    """``batch_norm_backward`` (pairs with ``_batch_norm_with_update``): as ``native_batch_norm_backward``."""
    a = bind(call)
    return _batch_norm_backward(a["input"], a["weight"], bool(a["update"]) or a["running_mean"] is None,
                                a["output_mask"])


@register_formula(aten.cudnn_batch_norm_backward, aten.miopen_batch_norm_backward)
def cudnn_batch_norm_backward(call: OpCall) -> Cost:
    """cuDNN/MIOpen batch norm backward (training; all three grads): 9N + 2C + N + 2N + N."""
    a = bind(call)
    return _batch_norm_backward(a["input"], a["weight"], True, (True, True, True))
