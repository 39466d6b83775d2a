"""Elementwise arithmetic and activations: a cost per OUTPUT element (so broadcasting is priced as it runs).

Conventions, fvcore-style (one factory, a table of one-liners):

* every elementary operation counts 1 FLOP per output element: ``+ - * /``, ``abs``,
  ``sqrt``, ``rsqrt``, ``exp``, ``log``, ``sin``, ``erf``, ``pow``, ``maximum``, rounding...
  (a transcendental function is one FLOP, as a hardware instruction or library call);
* compound ops cost the sum of their parts (``addcmul`` = mul + add = 2, ``lerp`` = 3);
* a Scalar factor other than 1 (``alpha``, ``value``) adds 1 FLOP per element;
* in-place (``add_``) and ``out=`` variants cost the same as the functional op;
* only floating-point (and complex) outputs count: integer and boolean arithmetic is index
  book-keeping (positions, offsets, masks) and costs 0;
* comparisons, ``where``, ``masked_fill`` and casts are free (see ``indexing.py``).

Activations and their backward ops: FLOPs per output element, from the textbook formula.
Selecting a branch (``x > 0 ? a : b``) is free, as comparisons are everywhere. Each constant
below carries its formula; ``selu`` runs as ``elu`` with a scale; ``softsign`` and
``tanhshrink`` decompose into ops priced elsewhere (abs, add, div; tanh, sub).

Softmax family: a cost per element of the input (the row length does not change it).
softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x): max 1 + sub 1 + exp 1 + sum 1 +
div 1 = 5 FLOPs per element. ``log_softmax`` has the same five steps (the final div becomes a
sub of log-sum). ``_safe_softmax`` (SDPA's math path) is a softmax whose fully-masked rows are
set to 0 (a free select).
"""
from __future__ import annotations

from ..registry import Cost, Formula, OpCall, register_formula
from ._common import bind, ops, per_element, per_input_element, scalar_is


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
        # activations that are a single max/select-and-scale (the rest: below)
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


# -- Activations ---------------------------------------------------------------------------------
RELU = 1  # max(x, 0); threshold, hardshrink: a select, 1
HARDTANH = 2  # min(max(x, lo), hi)  (relu6)
LEAKY_RELU = 2  # max(x, a*x)  (prelu, rrelu)
SOFTSHRINK = 2  # x -/+ lambda, select
CELU = 4  # x>0 ? x : alpha*(exp(x/alpha)-1)
SIGMOID = 4  # 1 / (1 + exp(-x))
TANH = 1  # tanh(x)
SILU = 5  # x * sigmoid(x)
GELU = 5  # x/2 * (1 + erf(x/sqrt2))
GELU_TANH = 9  # x/2 * (1 + tanh(c*(x + 0.044715 x^3)))
HARDSIGMOID = 4  # min(max(x+3, 0), 6) / 6
HARDSWISH = 5  # x * hardsigmoid(x)
SOFTPLUS = 3  # log(1 + exp(x)); +2 when beta != 1 (x*beta, /beta)
MISH = 5  # x * tanh(softplus(x))
LOG_SIGMOID = 5  # -log(1 + exp(-x))
GLU = 5  # a * sigmoid(b), per output element

_FORWARD: tuple[tuple[int, tuple[str, ...]], ...] = (
    (RELU, ("relu", "threshold", "hardshrink")),
    (HARDTANH, ("hardtanh", "relu6")),
    (LEAKY_RELU, ("leaky_relu", "_prelu_kernel", "prelu", "rrelu_with_noise")),
    (SOFTSHRINK, ("softshrink",)),
    (TANH, ("tanh",)),
    (SIGMOID, ("sigmoid",)),
    (HARDSIGMOID, ("hardsigmoid",)),
    (CELU, ("celu",)),
    (SILU, ("silu",)),
    (HARDSWISH, ("hardswish",)),
    (MISH, ("mish",)),
    (LOG_SIGMOID, ("log_sigmoid_forward",)),
    (GLU, ("glu",)),
)

for _cost, _names in _FORWARD:
    register_formula(*ops(*_names, inplace=True))(elementwise(_cost))


@register_formula(*ops("gelu", inplace=True))
def gelu(call: OpCall) -> Cost:
    """GELU: 5 FLOPs/element (erf form), 9 with approximate='tanh'."""
    return per_element(call, GELU_TANH if bind(call).get("approximate") == "tanh" else GELU)


@register_formula(*ops("elu", inplace=True))
def elu(call: OpCall) -> Cost:
    """ELU, x>0 ? x : alpha*(exp(x)-1): 3 FLOPs/element (exp, sub, mul), +1 if scale != 1 (SELU), +1 if
    input_scale != 1."""
    a = bind(call)
    return per_element(call, 3 + (not scalar_is(a.get("scale", 1), 1)) + (not scalar_is(a.get("input_scale", 1), 1)))


@register_formula(*ops("softplus"))
def softplus(call: OpCall) -> Cost:
    """Softplus: 3 FLOPs/element (exp, add, log), +2 when beta != 1 (x*beta, /beta)."""
    return per_element(call, SOFTPLUS + (0 if scalar_is(bind(call).get("beta", 1), 1) else 2))


@register_formula(*ops("logit", inplace=True))
def logit(call: OpCall) -> Cost:
    """logit: log(x / (1 - x)) = 3 FLOPs/element, +2 when eps clamps the input."""
    return per_element(call, 3 if bind(call).get("eps") is None else 5)


# Backward ops, per element of the gradient they produce (reference formulas):
_BACKWARD: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, ("threshold_backward", "hardtanh_backward", "hardsigmoid_backward", "hardshrink_backward",
         "softshrink_backward", "rrelu_with_noise_backward")),  # grad * (mask or constant)
    (2, ("leaky_relu_backward", "_prelu_kernel_backward")),  # grad * slope, selected; prelu: + grad*x for the weight
    (3, ("sigmoid_backward", "tanh_backward", "elu_backward")),  # grad*y*(1-y); grad*(1-y^2); grad*(y+alpha)
    (4, ("hardswish_backward",)),  # grad * (2x + 3) / 6
    (5, ("softplus_backward",)),  # z = exp(beta*x); grad * z / (z + 1)
    (6, ("log_sigmoid_backward",)),  # grad * (1 - sigmoid(x)) with the buffer: sigmoid 4, sub, mul
    (9, ("silu_backward",)),  # grad * s * (1 + x*(1 - s)) with s = sigmoid(x) (4)
    (14, ("mish_backward",)),  # softplus 3, tanh 1, sigmoid 4, grad*(t + x*s*(1 - t^2)) 6
)

for _cost, _names in _BACKWARD:
    register_formula(*ops(*_names))(elementwise(_cost))


register_formula(*ops("glu_backward"))(per_input_element(
    9, "GLU backward: 9 FLOPs per element of grad_output (sigmoid 4, a's grad 1, b's grad 4)."))


@register_formula(*ops("gelu_backward"))
def gelu_backward(call: OpCall) -> Cost:
    """GELU backward: 11 FLOPs/element (Phi 4, phi 4, x*phi, add, *grad); 18 with approximate='tanh'."""
    return per_element(call, 18 if bind(call).get("approximate") == "tanh" else 11)


# -- Softmax family ---------------------------------------------------------------------------------
SOFTMAX = 5
SOFTMAX_BACKWARD = 4

register_formula(*ops("_softmax", "_safe_softmax", "softmax", "_log_softmax", "log_softmax",
                      "special_softmax", "special_log_softmax", "_masked_softmax"))(elementwise(SOFTMAX))


register_formula(*ops("_softmax_backward_data", "_log_softmax_backward_data", "_masked_softmax_backward"))(
    per_input_element(SOFTMAX_BACKWARD, "Softmax backward y*(g - sum(g*y)) and log-softmax backward "
                                        "g - exp(y)*sum(g): 4 FLOPs per element."))
