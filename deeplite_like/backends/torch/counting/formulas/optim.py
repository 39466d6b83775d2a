"""Optimizer kernels: the ``_foreach_*`` list ops and the fused ``_fused_adam_`` / ``_fused_sgd_`` family.

``torch.optim``'s three implementations cost the same: the list ops' rows are in ``foreach``,
the fused optimizers' in ``_fused``.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from ..registry import Cost, Formula, OpCall, register_formula, register_free
from ._common import bind, is_float, numel, ops, scalar_is
from .reduction import vector_norm

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
