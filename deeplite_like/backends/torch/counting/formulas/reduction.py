"""Reductions, and the normalisation layers that are reductions plus a scale and shift.

Reductions: priced per INPUT element N, plus a per-output term R where a step runs once per
output (a divide for ``mean``, a ``sqrt`` for ``std``).

Only floating-point inputs are priced: counting booleans or ids (``sum`` of a mask) is free.
Sorting, ``topk``, ``median``, ``all``/``any`` and counting are selection (free: indexing.py).

The table of counts is in ``reduction``.

Normalisation layers. N = input elements, R = statistics groups (rows for layer norm,
channels for batch norm, batch*groups for group norm, batch*channels for instance norm). Instance norm runs as
batch norm over (1, batch*channels, ...), so it is priced by the same formula.

The forward's counts are in ``normalisation_cost``, the backward's in ``_norm_backward``.
"""
from __future__ import annotations

from typing import Callable

from ..registry import Cost, Formula, OpCall, register_formula
from ._common import aten, bind, first_tensor, is_float, numel, ops, prod, shape


def _sizes(call: OpCall) -> tuple[int, int]:
    """(N, R): floating input elements and output elements (0, 0 for non-float input)."""
    x = call.args[0]
    if not is_float(x):
        return 0, 0
    return numel(x), max(numel(first_tensor(call.out)), 1)


def reduction(per_input: int, per_output: int = 0):
    """A formula charging ``per_input`` FLOPs per input element and ``per_output`` per output::

        sum, nansum, prod, cumsum, cumprod      N        (one add / mul per element reduced)
        mean, nanmean                           N + R    (sum, then one divide per output)
        amax, amin, max, min, argmax, argmin    N        (one max/min per element, as relu is 1)
        aminmax                                 2N
        var, var_mean                           4N + 2R  (mean N+R; sub, square, sum 3N; divide R)
        std, std_mean                           4N + 3R  (var, then sqrt R)
        logsumexp                               4N + 2R  (max, sub, exp, sum N each; log, add R)
        logcumsumexp                            3N       (exp, add, log per element)
        norm p=2 (vector_norm)                  2N + R   (square, sum; sqrt)
        norm p=1 / p=inf                        2N       (abs; sum or max)
        norm p other                            3N + R   (abs, pow, sum; root)
        cdist (pairs x D)                       3*pairs*D + pairs
    """

    def formula(call: OpCall) -> Cost:
        n, r = _sizes(call)
        return Cost.elementwise(per_input * n + per_output * (r if n else 0))

    formula.__name__ = formula.__qualname__ = f"reduction_{per_input}N_{per_output}R"
    formula.__doc__ = f"{per_input} FLOP(s) per input element + {per_output} per output element."
    return formula


register_formula(*ops("sum", "nansum", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin",
                      "cummax", "cummin", inplace=True))(reduction(1))
register_formula(*ops("mean", "nanmean"))(reduction(1, 1))
register_formula(*ops("aminmax"))(reduction(2))
register_formula(*ops("var", "var_mean"))(reduction(4, 2))
register_formula(*ops("std", "std_mean"))(reduction(4, 3))
register_formula(*ops("logsumexp"))(reduction(4, 2))
register_formula(*ops("logcumsumexp"))(reduction(3))


@register_formula(*ops("max", "min"))
def max_min(call: OpCall) -> Cost:
    """max/min: as a reduction N FLOPs; the binary overload (``max(a, b)``) 1 per output element."""
    if "other" in bind(call):
        out = first_tensor(call.out)
        return Cost.elementwise(numel(out) if is_float(out) else 0)
    n, _ = _sizes(call)
    return Cost.elementwise(n)


def _norm_cost(n: int, r: int, p) -> int:
    if p is None or p == 2:
        return 2 * n + r
    if p in (1, float("inf"), float("-inf")):
        return 2 * n
    if p == 0:
        return n  # count of non-zeros: one test-and-add per element
    return 3 * n + r


@register_formula(*ops("linalg_vector_norm", "norm"))
def vector_norm(call: OpCall) -> Cost:
    """p-norm over dims: p=2 2N+R, p=1/inf 2N, p=0 N, other p 3N+R (N inputs, R outputs)."""
    a = bind(call)
    p = a.get("ord", a.get("p", 2))
    n, r = _sizes(call)
    return Cost.elementwise(_norm_cost(n, r, float(p) if isinstance(p, (int, float)) else p) if n else 0)


@register_formula(*ops("dist"))
def dist(call: OpCall) -> Cost:
    """p-norm of a - b: N for the subtraction + the norm's cost."""
    a = bind(call)
    out = first_tensor(call.out)
    if not is_float(out):
        return Cost()
    n = max(numel(a["self"]), numel(a["other"]))
    return Cost.elementwise(n + _norm_cost(n, 1, float(a["p"])))


@register_formula(*ops("_cdist_forward"))
def cdist(call: OpCall) -> Cost:
    """Pairwise p-distances (B, P, D) x (B, R, D): per pair and dim sub, |.|^p, add (3); a root per pair."""
    x1 = bind(call)["x1"]
    if not is_float(x1):
        return Cost()
    pairs = numel(first_tensor(call.out))
    return Cost.elementwise(3 * pairs * int(x1.shape[-1]) + pairs)


# -- Normalisation layers (batch, layer, group, instance, RMS) and their backward ----------------------------
def normalisation_cost(n: int, groups: int, weight: bool, bias: bool) -> Cost:
    """Normalise with batch statistics over ``groups`` groups of ``n`` elements in total (N = n, R = groups)::

        batch statistics   mean N+R; variance (sub, square, sum) 3N + divide R; rstd (add eps,
                           rsqrt) 2R                                            -> 4N + 4R
        normalise          (x - mean) * rstd                                   -> 2N
        affine             * weight N, + bias N (each only when present)
        layer / group / instance / batch norm (training):  6N + 4R (+N weight, +N bias)
        batch norm with running statistics (eval): rstd 2C + normalise 2N      -> 2N + 2C (+N, +N)
        RMS norm:  square N, mean N+R, add eps R, rsqrt R, scale N             -> 3N + 3R (+N weight)
                   (exactly what ``nn.RMSNorm`` costs where it decomposes, as on CPU)

    Running-statistics updates (momentum, per channel) are book-keeping and not counted.
    """
    return Cost.elementwise(6 * n + 4 * groups + n * int(weight) + n * int(bias))


def _running_stats_cost(n: int, channels: int, weight: bool, bias: bool) -> Cost:
    return Cost.elementwise(2 * n + 2 * channels + n * int(weight) + n * int(bias))


def _affine(a: dict, groups: int, batch_stats: bool = True) -> Cost:
    """Normalise ``a["input"]`` over ``groups`` groups with batch (or running) statistics; 0 unless floating."""
    x = a["input"]
    if not is_float(x):
        return Cost()
    cost = normalisation_cost if batch_stats else _running_stats_cost
    return cost(numel(x), groups, a["weight"] is not None, a["bias"] is not None)


def _channels(x) -> int:
    return shape(x)[1] if x.dim() > 1 else 1


def _batch_norm(name: str, training: Callable[[dict], bool]) -> Formula:
    """A batch-norm formula; ``training(bound arguments)`` picks batch (True) or running statistics."""

    def formula(call: OpCall) -> Cost:
        a = bind(call)
        return _affine(a, _channels(a["input"]), training(a))

    formula.__name__ = formula.__qualname__ = name
    formula.__doc__ = "Batch norm: batch statistics 6N + 4C, running statistics 2N + 2C (+N weight, +N bias)."
    return formula


# ``_native_batch_norm_legit`` (with or without running stats) is ``native_batch_norm``.
register_formula(aten.native_batch_norm, aten.batch_norm, aten._batch_norm_impl_index, aten.cudnn_batch_norm,
                 aten.miopen_batch_norm, aten._native_batch_norm_legit_functional,
                 aten._native_batch_norm_legit)(_batch_norm("batch_norm", lambda a: bool(a["training"])))
# From running statistics: 2N + 2C (+N weight, +N bias).
register_formula(aten._native_batch_norm_legit_no_training)(_batch_norm("batch_norm_no_training", lambda a: False))
# Training batch norm that updates running stats: 6N + 4C (+N weight, +N bias).
register_formula(*ops("_batch_norm_with_update", "_batch_norm_with_update_functional"))(
    _batch_norm("batch_norm_with_update", lambda a: True))
# Without update: from running stats when given (2N + 2C), else batch stats (6N + 4C).
register_formula(*ops("_batch_norm_no_update"))(
    _batch_norm("batch_norm_no_update", lambda a: a["running_mean"] is None))


@register_formula(aten.instance_norm)
def instance_norm(call: OpCall) -> Cost:
    """Instance norm (batch stats over each sample's channel): 6N + 4*B*C (+N, +N)."""
    a = bind(call)
    return _affine(a, prod(shape(a["input"])[:2]), bool(a["use_input_stats"]))


@register_formula(aten.native_layer_norm, aten.layer_norm)
def layer_norm(call: OpCall) -> Cost:
    """Layer norm: 6N + 4R (+N weight, +N bias), R = rows = N / prod(normalized_shape)."""
    a = bind(call)
    return _affine(a, numel(a["input"]) // max(prod(a["normalized_shape"]), 1))


@register_formula(aten.native_group_norm)
def native_group_norm(call: OpCall) -> Cost:
    """Group norm: 6N + 4*B*G (+N weight, +N bias)."""
    a = bind(call)
    return _affine(a, int(a["N"]) * int(a["group"]))


@register_formula(aten.group_norm)
def group_norm(call: OpCall) -> Cost:
    """Group norm (composite form): 6N + 4*B*G (+N weight, +N bias)."""
    a = bind(call)
    return _affine(a, shape(a["input"])[0] * int(a["num_groups"]))


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
    """Backward of ``normalisation_cost``'s norm: the gradients that ``mask`` asks for.

    Per element of the input; R as above)::

        grad_input   xhat 2N, g = dy*w N (with weight), g*xhat N, two sums 2N, two means 2R,
                     combine (sub, mul, sub, mul) 4N                            -> 9N + 2R (+N)
        grad_weight  sum(dy * xhat) 2N;   grad_bias  sum(dy) N
        batch norm eval: grad_input dy*rstd (*w) N (+N); grad_weight xhat 2N + 2N; grad_bias N
    """
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


def _batch_norm_backward(name: str, training: Callable[[dict], bool]) -> Formula:
    """A batch-norm backward formula; ``training(bound arguments)``: batch statistics (True) or running ones."""

    def formula(call: OpCall) -> Cost:
        a = bind(call)
        x, weight = a["input"], a["weight"]
        mask = a.get("output_mask", (True, True, True))  # cuDNN/MIOpen: no output_mask, all three grads
        n = numel(x)
        if training(a):
            return _norm_backward(n, _channels(x), weight is not None, mask)
        flops = (n + (n if weight is not None else 0)) if mask[0] else 0
        flops += (4 * n if mask[1] else 0) + (n if mask[2] else 0)
        return Cost.elementwise(flops)

    formula.__name__ = formula.__qualname__ = name
    formula.__doc__ = ("Batch norm backward: batch statistics as layer norm's (R = C); running statistics "
                       "grad_input N (+N weight), grad_weight 4N, grad_bias N (per output_mask).")
    return formula


register_formula(aten.native_batch_norm_backward)(
    _batch_norm_backward("batch_norm_backward", lambda a: bool(a["train"])))
# ``batch_norm_backward`` pairs with ``_batch_norm_with_update``: batch statistics when it updated or had none running.
register_formula(aten.batch_norm_backward)(_batch_norm_backward(
    "batch_norm_backward_update", lambda a: bool(a["update"]) or a["running_mean"] is None))
# cuDNN/MIOpen batch norm backward (training; all three grads): 9N + 2C + N + 2N + N.
register_formula(aten.cudnn_batch_norm_backward, aten.miopen_batch_norm_backward)(
    _batch_norm_backward("cudnn_batch_norm_backward", lambda a: True))
