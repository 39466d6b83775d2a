"""Elementwise arithmetic: a cost per OUTPUT element (so broadcasting is priced as it runs).

Conventions, fvcore-style (one factory, a table of one-liners):

* every elementary operation counts 1 FLOP per output element: ``+ - * /``, ``abs``,
  ``sqrt``, ``rsqrt``, ``exp``, ``log``, ``sin``, ``erf``, ``pow``, ``maximum``, rounding...
  (a transcendental function is one FLOP, as a hardware instruction or library call);
* compound ops cost the sum of their parts (``addcmul`` = mul + add = 2, ``lerp`` = 3);
* a Scalar factor other than 1 (``alpha``, ``value``) adds 1 FLOP per element;
* in-place (``add_``) and ``out=`` variants cost the same as the functional op;
* only floating-point (and complex) outputs count: integer and boolean arithmetic is index
  book-keeping (positions, offsets, masks) and costs 0;
* comparisons, ``where``, ``masked_fill`` and casts are free (see ``free.py``).
"""
from __future__ import annotations

from ..registry import Cost, Formula, OpCall, register_formula
from ._common import bind, ops, per_element, scalar_is


def elementwise(cost_per_element: int) -> Formula:
    """A formula charging ``cost_per_element`` FLOPs per floating output element."""

    def formula(call: OpCall) -> Cost:
        return per_element(call, cost_per_element)

    formula.__name__ = formula.__qualname__ = f"elementwise_{cost_per_element}"
    formula.__doc__ = f"{cost_per_element} FLOP(s) per floating-point output element."
    return formula


#: Ops whose cost is a constant per output element. In-place variants are registered too.
UNARY_AND_BINARY: dict[int, tuple[str, ...]] = {
    1: (
        # arithmetic
        "mul", "multiply", "div", "divide", "true_divide", "floor_divide", "neg", "negative",
        "abs", "absolute", "reciprocal", "square", "sqrt", "rsqrt", "pow", "float_power",
        "fmod", "remainder", "maximum", "minimum", "fmax", "fmin", "copysign", "hypot",
        # transcendental
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
        "acos", "atan", "atan2", "arctan2", "sinh", "cosh", "asinh", "acosh", "atanh", "erf",
        "erfc", "erfinv", "lgamma", "digamma", "polygamma", "i0", "sinc", "xlogy", "special_xlog1py",
        "deg2rad", "rad2deg",
        # rounding and sign
        "sign", "sgn", "floor", "ceil", "round", "trunc", "fix", "frac",
        # activations that are a single max/select-and-scale (see activation.py for the rest)
        "clamp_min", "clamp_max",
    ),
    3: ("lerp",),  # a + w * (b - a): sub, mul, add
    4: ("logaddexp", "logaddexp2"),  # max + log1p(exp(-|a - b|)): sub, exp, log1p, add
}

for _cost, _names in UNARY_AND_BINARY.items():
    register_formula(*ops(*_names, inplace=True))(elementwise(_cost))


@register_formula(*ops("add", "sub", "subtract", "rsub", inplace=True))
def add(call: OpCall) -> Cost:
    """a + alpha*b: 1 FLOP per output element, +1 when alpha != 1."""
    alpha = bind(call).get("alpha", 1)
    return per_element(call, 1 if scalar_is(alpha, 1) or alpha is None else 2)


@register_formula(*ops("addcmul", "addcdiv", inplace=True))
def addcmul(call: OpCall) -> Cost:
    """self + value * t1 (*|/) t2: 2 FLOPs per output element, +1 when value != 1."""
    value = bind(call).get("value", 1)
    return per_element(call, 2 if scalar_is(value, 1) else 3)


@register_formula(*ops("clamp", "clip", inplace=True))
def clamp(call: OpCall) -> Cost:
    """clamp(x, min, max): 1 FLOP per output element per bound given (hardtanh-like: 2)."""
    a = bind(call)
    return per_element(call, int(a.get("min") is not None) + int(a.get("max") is not None))


@register_formula(*ops("native_dropout", "dropout", "feature_dropout", "_fused_dropout", inplace=True))
def dropout(call: OpCall) -> Cost:
    """Dropout in training: 2 FLOPs per element (scale the kept mask, multiply); 0 in eval or p = 0.

    The random mask itself (``bernoulli_``) is free, as any random fill. CPU dropout under
    ``F.dropout`` decomposes into ``bernoulli_``, ``div_`` and ``mul``: the same 2 FLOPs.
    """
    a = bind(call)
    train = a.get("train", True)
    p = float(a.get("p") or 0.0)
    return per_element(call, 2 if (train is None or train) and p > 0.0 else 0)


@register_formula(*ops("native_dropout_backward", "_masked_scale"))
def dropout_backward(call: OpCall) -> Cost:
    """Dropout backward (and CUDA `_masked_scale`): x * mask * scale, 2 FLOPs per element."""
    return per_element(call, 2)
