"""What a training step runs beyond the model's layers: loss functions (and their backward), and
optimizer updates.

**Loss functions** (reached when ``count_ops`` is given a ``loss_fn``). N = input elements.

Also ``multi_margin_loss`` (3 per element) and CTC (9 per recursion state; backward 11 per
state + 3 per log-prob), with their backward.

The forward table (and the reductions) is in ``_pointwise_loss``, the backward's in
``_pointwise_loss_backward``.

**Optimizer kernels**: the ``_foreach_*`` list ops and the fused ``_fused_adam_`` / ``_fused_sgd_`` family.

``torch.optim``'s three implementations cost the same: the list ops' rows are in ``foreach``,
the fused optimizers' in ``_fused``.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from ..registry import Cost, Formula, OpCall, register_formula, register_free
from ._common import bind, is_float, numel, ops, scalar_is
from .reduction import vector_norm


_NONE, _MEAN, _SUM = 0, 1, 2


def _reduce(n: int, reduction: int) -> int:
    return {_NONE: 0, _MEAN: n + 1, _SUM: n}.get(int(reduction), n + 1)


def _pointwise_loss(per_element: int):
    """A pointwise loss charging ``per_element`` FLOPs per input element (+N weight), + the reduction.

    Reduction adds ``sum`` N or ``mean`` N + 1 (a sum and one divide); ``none`` adds 0::

        mse_loss                 sub, square                                  2N
        l1_loss                  sub, abs                                     2N
        smooth_l1 / huber        sub, abs, quadratic branch d*d*0.5/beta      5N
        soft_margin_loss         log(1 + exp(-y*x)): mul, neg, exp, add, log  5N
        binary_cross_entropy     -(y log x + (1-y) log(1-x)): 2 log, 2 sub,
                                 2 mul, add, neg                              8N (+N weight)
        bce_with_logits          (1-y) x + log(1 + exp(-x)): sub, mul, neg,
                                 exp, add, log, add                           7N (+N weight, +3N pos_weight)
        nll_loss                 pick one log-prob per target (free), negate
                                 and sum B = numel(target)                    B (+B weight) (+1 mean)
    """
    def formula(call: OpCall) -> Cost:
        a = bind(call)
        x = a["self"]
        if not is_float(x):
            return Cost()
        n = numel(x)
        extra = n if a.get("weight") is not None else 0
        extra += 3 * n if a.get("pos_weight") is not None else 0
        return Cost.elementwise(per_element * n + extra + _reduce(n, a.get("reduction", _MEAN)))

    formula.__name__ = formula.__qualname__ = f"pointwise_loss_{per_element}"
    formula.__doc__ = f"Pointwise loss: {per_element} FLOPs per element + the reduction (sum N, mean N + 1)."
    return formula


register_formula(*ops("mse_loss", "l1_loss"))(_pointwise_loss(2))
register_formula(*ops("smooth_l1_loss", "huber_loss", "soft_margin_loss"))(_pointwise_loss(5))
register_formula(*ops("binary_cross_entropy"))(_pointwise_loss(8))
register_formula(*ops("binary_cross_entropy_with_logits"))(_pointwise_loss(7))


def _nll_loss(backward: bool, doc: str) -> Formula:
    """NLL loss and its backward: B = numel(target) values (B), +B with class weights, + the mean's divide
    (1 forward, B backward); ``doc`` is the formula's docstring."""

    def formula(call: OpCall) -> Cost:
        a = bind(call)
        if not is_float(a["self"]):
            return Cost()
        b = numel(a["target"])
        mean = (b if backward else 1) if int(a.get("reduction", _MEAN)) == _MEAN else 0
        return Cost.elementwise(b + (b if a.get("weight") is not None else 0) + mean)

    formula.__name__ = formula.__qualname__ = "nll_loss_backward" if backward else "nll_loss"
    formula.__doc__ = doc
    return formula


register_formula(*ops("nll_loss_forward", "nll_loss2d_forward", "nll_loss", "nll_loss2d", "nll_loss_nd"))(_nll_loss(
    False, "NLL loss: B = numel(target) picked values summed (B), +B with class weights, +1 for the mean."))


def _pointwise_loss_backward(per_element: int):
    """A pointwise loss's backward charging ``per_element`` FLOPs per input element.

    ``cross_entropy`` runs as ``_log_softmax`` + ``nll_loss_forward``; ``kl_div`` and label
    smoothing decompose. Backward::

        mse_loss_backward        2 * (x - y) * g (/ N): sub, mul, mul          3N (+N mean)
        smooth_l1 / huber       sign or clamp of the difference, times g      4N (+N mean)
        binary_cross_entropy     g * (x - y) / (x * (1 - x)): sub, sub, mul,
                                 div, mul                                      5N (+N weight) (+N mean)
        nll_loss_backward        -w * g scattered to B positions               B (+B weight) (+B mean)
    """
    def formula(call: OpCall) -> Cost:
        a = bind(call)
        x = a["self"]
        if not is_float(x):
            return Cost()
        n = numel(x)
        extra = (n if a.get("weight") is not None else 0) + (n if int(a.get("reduction", _MEAN)) == _MEAN else 0)
        return Cost.elementwise(per_element * n + extra)

    formula.__name__ = formula.__qualname__ = f"pointwise_loss_backward_{per_element}"
    formula.__doc__ = f"Pointwise loss backward: {per_element} FLOPs per element (+N weight, +N for the mean)."
    return formula


# multi_margin_loss_backward: 3 FLOPs per (sample, class) (+1 weight, +1 for the mean's divide).
register_formula(*ops("mse_loss_backward", "multi_margin_loss_backward"))(_pointwise_loss_backward(3))
register_formula(*ops("smooth_l1_loss_backward", "huber_loss_backward",
                      "soft_margin_loss_backward"))(_pointwise_loss_backward(4))
register_formula(*ops("binary_cross_entropy_backward"))(_pointwise_loss_backward(5))


register_formula(*ops("nll_loss_backward", "nll_loss2d_backward"))(_nll_loss(
    True, "NLL backward: -w*g written to B = numel(target) positions: B (+B weight) (+B for the mean's divide)."))


@register_formula(*ops("multi_margin_loss"))
def multi_margin_loss(call: OpCall) -> Cost:
    """Multi-class hinge: per (sample, class) margin - x_y + x_i (2), clamp (1), power p != 1 (+1),
    class weight (+1); then the reduction."""
    a = bind(call)
    x = a["self"]
    if not is_float(x):
        return Cost()
    n = numel(x)
    per = 3 + (0 if a.get("p", 1) == 1 else 1) + (1 if a.get("weight") is not None else 0)
    return Cost.elementwise(per * n + _reduce(n, a.get("reduction", _MEAN)))


def _ctc_states(a: dict) -> int:
    """(time x batch x (2 * longest target + 1)) states of the CTC recursions."""
    log_probs, targets, lengths = a["log_probs"], a["targets"], a["target_lengths"]
    time = int(log_probs.shape[0])
    batch = int(log_probs.shape[1]) if log_probs.dim() == 3 else 1
    if targets.dim() == 2:  # padded (batch, S)
        labels = int(targets.shape[1])
    elif isinstance(lengths, (list, tuple)):
        labels = max((int(n) for n in lengths), default=0)
    else:  # concatenated targets with a lengths tensor
        labels = int(lengths.max()) if lengths.numel() and not lengths.is_meta else int(targets.shape[0])
    return time * batch * (2 * labels + 1)


@register_formula(*ops("_ctc_loss"))
def ctc_loss(call: OpCall) -> Cost:
    """CTC forward (alpha recursion): 9 FLOPs per (time, batch, extended label) state (two log-add-exps 8,
    the emission add 1)."""
    a = bind(call)
    return Cost.elementwise(9 * _ctc_states(a)) if is_float(a["log_probs"]) else Cost()


@register_formula(*ops("_ctc_loss_backward"))
def ctc_loss_backward(call: OpCall) -> Cost:
    """CTC backward: beta recursion 9 + alpha*beta 2 per state, + exp, sub, mul per log-prob element (3)."""
    a = bind(call)
    if not is_float(a["log_probs"]):
        return Cost()
    return Cost.elementwise(11 * _ctc_states(a) + 3 * numel(a["log_probs"]))


# -- Optimizer kernels: the _foreach_* list ops and the fused optimizers -------------------------------------
aten = torch.ops.aten


def _float_elements(tensors: Any) -> list[int]:
    """Elements of each floating tensor of a list (0 for integer tensors and ``None``)."""
    return [numel(t) if is_float(t) else 0 for t in (tensors or ())]


def _scalars(value: Any, count: int) -> list[Any]:
    """A Scalar, a list of Scalars, or a Tensor of values, as one entry per list element."""
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value] * count


def foreach(per_element: int) -> Formula:
    """A list op charging ``per_element`` FLOPs per floating element of its first list argument.

    ``torch.optim`` updates parameters with one of three implementations (``foreach=False``,
    ``foreach=True`` - the default on CUDA - and ``fused=True``). The same update must cost the
    same whichever ran, so these formulas follow the elementwise conventions of
    ``elementwise.py`` (1 FLOP per elementary operation per element, a Scalar factor other than 1
    adds 1) and price a list op as the sum of the single-tensor op over the list:

        _foreach_<unary>, mul, div, pow, maximum, ...   1 per element (sigmoid 4, as ``sigmoid``)
        _foreach_add / _foreach_sub                     1 per element, +1 when alpha != 1
        _foreach_addcmul / _foreach_addcdiv             2 per element, +1 when value != 1
                                                        (a ``Tensor`` of values is priced as != 1)
        _foreach_lerp                                   3 per element (sub, mul, add)
        _foreach_norm                                   as ``linalg_vector_norm`` per tensor
        _foreach_max                                    N per tensor (one max per element)
        _foreach_mm                                     m*n*k MACs per pair
        _foreach_zero_, _foreach_copy_, _foreach_clone  free (moves)
    """

    def formula(call: OpCall) -> Cost:
        return Cost.elementwise(per_element * sum(_float_elements(call.args[0])))

    formula.__name__ = formula.__qualname__ = f"foreach_{per_element}"
    formula.__doc__ = f"{per_element} FLOP(s) per floating-point element of the list."
    return formula


#: List ops whose cost is a constant per element (the single-tensor op's cost). In-place too.
FOREACH: dict[int, tuple[str, ...]] = {
    1: tuple(f"_foreach_{name}" for name in (
        "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max", "neg", "abs", "reciprocal",
        "sqrt", "rsqrt", "exp", "expm1", "log", "log10", "log1p", "log2", "sin", "cos", "tan", "asin",
        "acos", "atan", "sinh", "cosh", "tanh", "erf", "erfc", "lgamma", "sign", "floor", "ceil", "round",
        "trunc", "frac")),
    3: ("_foreach_lerp",),
    4: ("_foreach_sigmoid",),  # 1 / (1 + exp(-x)): neg, exp, add, div - as ``sigmoid``
}

for _cost, _names in FOREACH.items():
    register_formula(*ops(*_names, inplace=True))(foreach(_cost))


def _pow_formula(call: OpCall) -> Cost:
    """_foreach_pow: 1 FLOP per element (``ScalarAndTensor``: of the exponent list)."""
    tensors = call.args[1] if isinstance(call.args[0], (int, float, complex)) else call.args[0]
    return Cost.elementwise(sum(_float_elements(tensors)))


register_formula(*ops("_foreach_pow", inplace=True))(_pow_formula)


@register_formula(*ops("_foreach_add", "_foreach_sub", inplace=True))
def foreach_add(call: OpCall) -> Cost:
    """self[i] + alpha*other: 1 FLOP per element, +1 when alpha != 1."""
    alpha = bind(call).get("alpha", 1)
    per = 1 if alpha is None or scalar_is(alpha, 1) else 2
    return Cost.elementwise(per * sum(_float_elements(call.args[0])))


@register_formula(*ops("_foreach_addcmul", "_foreach_addcdiv", inplace=True))
def foreach_addcmul(call: OpCall) -> Cost:
    """self[i] + value[i] * t1[i] (*|/) t2[i]: 2 FLOPs per element, +1 when value[i] != 1."""
    a = bind(call)
    sizes = _float_elements(a["self"])
    value = a["scalars"] if "scalars" in a else a.get("value", 1)
    values = _scalars(value, len(sizes))
    return Cost.elementwise(sum(n * (2 if scalar_is(v, 1) else 3) for n, v in zip(sizes, values)))


@register_formula(*ops("_foreach_norm"))
def foreach_norm(call: OpCall) -> Cost:
    """The p-norm of each tensor, priced as ``linalg_vector_norm`` (p=2: 2N + 1 per tensor)."""
    a = bind(call)
    outs = call.out if isinstance(call.out, (list, tuple)) else call.kwargs.get("out") or ()
    total = Cost()
    for tensor, out in zip(a["self"], outs):
        single = OpCall(aten.linalg_vector_norm.default, (tensor, a.get("ord", 2)), {}, out, call.options)
        total = total + vector_norm(single)
    return total


@register_formula(*ops("_foreach_max"))
def foreach_max(call: OpCall) -> Cost:
    """The maximum of each tensor: N FLOPs per tensor of N elements (one max per element)."""
    return Cost.elementwise(sum(_float_elements(call.args[0])))


@register_formula(*ops("_foreach_powsum"))
def foreach_powsum(call: OpCall) -> Cost:
    """sum(|x|^p) of each tensor: p=2 or 1 2N (square or abs, add), other p 3N (abs, pow, add)."""
    a = bind(call)
    p = a.get("ord", 2)
    per = 2 if isinstance(p, (int, float)) and float(p) in (1.0, 2.0) else 3
    return Cost.elementwise(per * sum(_float_elements(a["self"])))


@register_formula(*ops("_foreach_mm"))
def foreach_mm(call: OpCall) -> Cost:
    """A list of (m, k) @ (k, n) products: m*n*k MACs each."""
    a = bind(call)
    macs = 0
    for left, right in zip(a["self"], a.get("mat2") or a.get("other") or ()):
        (m, k), n = left.shape[-2:], right.shape[-1]
        macs += int(m) * int(k) * int(n)
    return Cost.contraction(macs)


register_free(*ops("_foreach_zero", "_foreach_copy", "_foreach_clone", inplace=True))
register_free(torch.ops.profiler._record_function_enter_new, torch.ops.profiler._record_function_exit)
if hasattr(torch.ops.profiler, "_record_function_enter"):
    register_free(torch.ops.profiler._record_function_enter)


# -- fused optimizers -----------------------------------------------------------------------
def _fused(per_element: Callable[[dict], int]) -> Formula:
    """Fused optimizers, per parameter element, derived from the single-tensor algorithm in
    ``torch/optim`` (the step counters are incremented outside the kernel, by ``_foreach_add_``):

        Adam/AdamW   13 = lerp 3 (m) + mul 1 and addcmul 3 (v) + sqrt, div, add eps 3 (denominator)
                          + addcdiv 3 (update); + weight decay (Adam: grad + wd*p, 2 - 1 when wd=1;
                          AdamW: p *= 1 - lr*wd, 1); + amsgrad (maximum, 1); + maximize (neg, 1)
        SGD          2 (p + (-lr)*d) + weight decay 2 (1 when wd=1) + momentum after the first
                          step: mul 1 + add 1 (2 when dampening != 0) + nesterov 2 (1 when
                          momentum=1) + maximize 1
        Adagrad      7 = addcmul 2 (sum of squares) + sqrt, add eps 2 + addcdiv 3; + weight decay 2
                          (1 when wd=1) + maximize 1

    A ``grad_scale`` (AMP) unscales each gradient inside the fused kernel: +1 per element.
    ``torch.optim`` also wraps every step in ``record_function``: those profiler markers are free.
    """
    def formula(call: OpCall) -> Cost:
        a = bind(call)
        scale = 1 if a.get("grad_scale") is not None else 0
        return Cost.elementwise((per_element(a) + scale) * sum(_float_elements(a["self"])))

    return formula


def _wd_add(weight_decay: float) -> int:
    """grad + wd * param: 2 FLOPs per element, 1 when wd == 1, 0 when there is no decay."""
    return 0 if not weight_decay else (1 if weight_decay == 1 else 2)


def _adam(a: dict) -> int:
    return 13 + _wd_add(a["weight_decay"]) + int(bool(a["amsgrad"])) + int(bool(a["maximize"]))


def _adamw(a: dict) -> int:
    return 13 + int(bool(a["weight_decay"])) + int(bool(a["amsgrad"])) + int(bool(a["maximize"]))


def _sgd(a: dict) -> int:
    cost = 2 + _wd_add(a["weight_decay"]) + int(bool(a["maximize"]))
    momentum = a["momentum"]
    if momentum:
        if not a["is_first_step"]:
            cost += 1 + (1 if not a["dampening"] else 2)
        if a["nesterov"]:
            cost += 1 if momentum == 1 else 2
    return cost


def _adagrad(a: dict) -> int:
    return 7 + _wd_add(a["weight_decay"]) + int(bool(a["maximize"]))


_FUSED = {"_fused_adam": _adam, "_fused_adamw": _adamw, "_fused_sgd": _sgd, "_fused_adagrad": _adagrad}

for _name, _per in _FUSED.items():
    _formula = _fused(_per)
    _formula.__name__ = _formula.__qualname__ = _name.lstrip("_")
    _formula.__doc__ = f"{_name}: per parameter element, see this module's table (+1 with grad_scale)."
    register_formula(*ops(_name, inplace=True))(_formula)
