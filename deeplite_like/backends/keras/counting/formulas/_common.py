"""What the formula families share: the torch backend's per-element costs, and helpers for shapes,
channel axes, activation functions and einsum sizes.

**Costs shared with the torch backend** (framework-free): the same numbers as
``deeplite_like/backends/torch/counting/formulas/*``. That package imports torch, which this
backend must not, so the values are restated here and ``tests/keras/test_count_conventions.py``
checks them against the torch modules wherever torch is installed (a drift fails the test). Each
elementary step is 1 FLOP (a transcendental such as ``exp`` or ``tanh`` is one); selecting a
branch is free. The family modules read them as ``c.NAME`` (this module imported as ``c``).

**Helpers.** Formulas read only ``TensorSpec`` shapes/dtypes and the layer's configuration
attributes, so this package imports no framework.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Iterable

from ..registry import Cost, LayerCall, LayerFormula, TensorSpec, is_keras_layer

# -- activations, FLOPs per output element (torch formulas/elementwise.py) -------------------
RELU = 1            # max(x, 0)
HARDTANH = 2        # min(max(x, lo), hi)      (relu6)
LEAKY_RELU = 2      # max(x, a*x)              (prelu)
ELU = 3             # x>0 ? x : alpha*(exp(x)-1)
SELU = 4            # elu + scale
CELU = 4            # x>0 ? x : alpha*(exp(x/alpha)-1)
SIGMOID = 4         # 1 / (1 + exp(-x))
TANH = 1
SILU = 5            # x * sigmoid(x)
GELU = 5            # x/2 * (1 + erf(x/sqrt2))
GELU_TANH = 9       # x/2 * (1 + tanh(c*(x + 0.044715 x^3)))
HARDSIGMOID = 4     # min(max(x+3, 0), 6) / 6
HARDSWISH = 5       # x * hardsigmoid(x)
SOFTPLUS = 3        # log(1 + exp(x))
MISH = 5            # x * tanh(softplus(x))
LOG_SIGMOID = 5     # -log(1 + exp(-x))
GLU = 5             # a * sigmoid(b), per output element
SOFTSHRINK = 2      # x -/+ lambda, select
THRESHOLD = 1       # select (hardshrink, threshold)
SOFTSIGN = 3        # x / (1 + |x|): abs, add, div (torch: decomposed into those ops)
TANHSHRINK = 2      # x - tanh(x) (torch: decomposed into tanh, sub)
EXP = 1             # exponential

# -- softmax (torch formulas/elementwise.py): max, sub, exp, sum, div --------------------------
SOFTMAX = 5

# -- interpolation, FLOPs per output element (torch formulas/vision.py) ---------------
NEAREST, LINEAR, BILINEAR, TRILINEAR, BICUBIC = 0, 3, 7, 15, 31

# -- dropout in training (torch formulas/elementwise.py): scale the kept mask, multiply ----
DROPOUT = 2

# -- recurrent layers (torch formulas/rnn.py) ----------------------------------------------
GATES = {"rnn": 1, "lstm": 4, "gru": 3}


def lstm_gate_math(activation: int = TANH, recurrent_activation: int = SIGMOID) -> int:
    """FLOPs per hidden unit and step: gate adds 4, 3 recurrent activations, activation of g and
    of c, f*c, i*g, c add, o*act(c) (22 with sigmoid/tanh, as torch)."""
    return 4 + 3 * recurrent_activation + 2 * activation + 4


def gru_gate_math(activation: int = TANH, recurrent_activation: int = SIGMOID) -> int:
    """FLOPs per hidden unit and step: r and z adds 2, 2 recurrent activations, r*hn 1, add 1,
    activation, h - n, z*(h - n), add (16 with sigmoid/tanh, as torch)."""
    return 2 + 2 * recurrent_activation + 2 + activation + 3


def rnn_gate_math(activation: int = TANH) -> int:
    """FLOPs per hidden unit and step of a vanilla RNN: add 1 + activation (2 with tanh, as torch)."""
    return 1 + activation


# -- normalisation (torch formulas/reduction.py) ------------------------------------------------
def normalisation_cost(n: int, groups: int, weight: bool, bias: bool) -> Cost:
    """Normalise ``n`` elements with batch statistics over ``groups`` groups: 6N + 4R (+N, +N)."""
    return Cost.elementwise(6 * n + 4 * groups + n * int(weight) + n * int(bias))


def running_stats_cost(n: int, channels: int, weight: bool, bias: bool) -> Cost:
    """Batch norm from running statistics (inference): 2N + 2C (+N weight, +N bias)."""
    return Cost.elementwise(2 * n + 2 * channels + n * int(weight) + n * int(bias))


def rms_norm_cost(n: int, rows: int, weight: bool) -> Cost:
    """RMS norm: square N, mean N + R, add eps R, rsqrt R, scale N -> 3N + 3R (+N weight)."""
    return Cost.elementwise(3 * n + 3 * rows + n * int(weight))


# -- pooling (torch formulas/conv.py) ---------------------------------------------------
def adaptive_window_elements(in_sizes, out_sizes) -> int:
    """Input elements summed over all output windows of an adaptive pool (per batch-channel):
    window i spans [floor(i*In/Out), ceil((i+1)*In/Out)) in each dimension."""
    total = 1
    for size_in, size_out in zip(in_sizes, out_sizes):
        total *= sum(-(-(i + 1) * size_in // size_out) - (i * size_in // size_out) for i in range(size_out))
    return total


# -- helpers --------------------------------------------------------------------------------------
#: Keras activation functions by ``__name__`` -> FLOPs per output element (default arguments).
ACTIVATIONS: dict[str, int] = {
    "linear": 0,
    "relu": RELU,
    "relu6": HARDTANH,
    "leaky_relu": LEAKY_RELU,
    "elu": ELU,
    "selu": SELU,
    "celu": CELU,
    "sigmoid": SIGMOID,
    "tanh": TANH,
    "silu": SILU,  # also "swish"
    "gelu": GELU,  # keras.activations.gelu defaults to approximate=False (the erf form)
    "gelu_tanh": GELU_TANH,  # gelu(approximate=True), bound by a partial or an alias (activation_name)
    "hard_sigmoid": HARDSIGMOID,
    "hard_silu": HARDSWISH,  # also "hard_swish"
    "hard_tanh": HARDTANH,
    "softplus": SOFTPLUS,
    "softsign": SOFTSIGN,
    "mish": MISH,
    "log_sigmoid": LOG_SIGMOID,
    "glu": GLU,
    "exponential": EXP,
    "softmax": SOFTMAX,
    "log_softmax": SOFTMAX,
    "soft_shrink": SOFTSHRINK,
    "hard_shrink": THRESHOLD,
    "tanh_shrink": TANHSHRINK,
    # No torch counterpart; priced by the same one-FLOP-per-step rule:
    "sparse_plus": 3,  # piecewise: (x + 1)^2 / 4 in the middle -> add, square, divide
    "squareplus": 5,  # (x + sqrt(x^2 + b)) / 2 -> square, add, sqrt, add, divide
}


def prod(values: Iterable[Any]) -> int:
    return math.prod(int(v) for v in values)


#: Functions of Keras' ecosystem that bind an activation's options, by name (keras_hub's BERT,
#: GPT-2... use ``activation=gelu_approximate``: ``gelu(x, approximate=True)``).
ACTIVATION_ALIASES: dict[str, str] = {"gelu_approximate": "gelu_tanh"}


def activation_name(fn: Any) -> str | None:
    """The ``ACTIVATIONS`` key of a built-in Keras activation function, else ``None`` (a user function).

    ``functools.partial(keras.activations.gelu, approximate=True)`` is ``"gelu_tanh"``; a partial
    of another built-in costs as the built-in (its options - an axis, a slope - do not change the
    per-element cost); a Keras-ecosystem alias (``ACTIVATION_ALIASES``) its target.
    """
    if fn is None:
        return "linear"
    if isinstance(fn, functools.partial) and not fn.args:
        base = activation_name(fn.func)
        if base == "gelu" and fn.keywords.get("approximate", False):
            return "gelu_tanh"
        return base
    name = getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", "") or ""
    if not module.startswith("keras"):
        return None
    if name in ACTIVATION_ALIASES:
        return ACTIVATION_ALIASES[name]
    return name if name in ACTIVATIONS else None


def activation_cost(call: LayerCall, fn: Any, elements: int) -> Cost:
    """A fused ``activation=`` over ``elements`` outputs.

    A layer passed as the activation is recorded as a call of its own (the formulas that use
    this are transparent), so it costs 0 here. A function that is not a Keras built-in is
    reported as untracked.
    """
    if fn is None or is_keras_layer(fn):
        return Cost()
    name = activation_name(fn)
    if name is None:
        call.report_untracked(f"activation:{getattr(fn, '__name__', type(fn).__name__)}")
        return Cost()
    return Cost.elementwise(ACTIVATIONS[name] * elements)


def activation_flops(call: LayerCall, fn: Any) -> int:
    """FLOPs per element of a layer's ``activation``/``recurrent_activation`` function; 0 and reported
    untracked when it is not a Keras built-in."""
    name = activation_name(fn)
    if name is None:
        call.report_untracked(f"{type(call.layer).__name__}.activation:{getattr(fn, '__name__', fn)}")
        return 0
    return ACTIVATIONS[name]


def float_elements(spec: TensorSpec | None) -> int:
    """Elements of a floating-point tensor, else 0 (integer arithmetic is book-keeping)."""
    return spec.numel if spec is not None and spec.is_float else 0


def named(formula: LayerFormula, name: str, doc: str) -> LayerFormula:
    """``formula`` made by a factory, given the name and one-line docstring a written-out one would have."""
    formula.__name__ = formula.__qualname__ = name
    formula.__doc__ = doc
    return formula


def per_output_element(per: int, name: str, doc: str) -> LayerFormula:
    """A formula of ``per`` FLOPs per floating-point output element."""
    return named(lambda call: Cost.elementwise(per * float_elements(call.output)), name, doc)


def channel_axis(layer: Any, rank: int) -> int:
    """The channel axis of a ``data_format`` layer for an input of ``rank`` dims."""
    return 1 if getattr(layer, "data_format", "channels_last") == "channels_first" else rank - 1


def spatial_dims(layer: Any, shape: tuple) -> tuple:
    """The spatial sizes of a batched ``(N, *spatial, C)`` / ``(N, C, *spatial)`` shape."""
    if getattr(layer, "data_format", "channels_last") == "channels_first":
        return tuple(shape[2:])
    return tuple(shape[1:-1])


def axes_of(axis: Any, rank: int) -> list[int]:
    """A layer's ``axis`` (int or list) as non-negative axes."""
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    return [a % rank for a in axes]


def term_sizes(term: str, dims: tuple) -> dict[str, int]:
    """Letter -> size for one einsum operand; ellipsis dims are named ``*0``, ``*1``... from the right."""
    if "..." not in term:
        if len(term) != len(dims):
            raise ValueError(f"einsum term {term!r} does not match a tensor of rank {len(dims)}")
        return dict(zip(term, dims))
    before, after = term.split("...")
    middle = dims[len(before): len(dims) - len(after)]
    sizes = dict(zip(before, dims[: len(before)]))
    sizes.update(zip(after, dims[len(dims) - len(after):]))
    sizes.update({f"*{i}": d for i, d in enumerate(reversed(middle))})
    return sizes


def einsum_cost(equation: str, *shapes: tuple) -> Cost:
    """One MAC per point of the joint index space when something is summed (as torch's einsum);
    a product with nothing summed is one multiply per point (FLOPs only)."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    sizes: dict[str, int] = {}
    for term, shape in zip(inputs.split(","), shapes):
        for letter, size in term_sizes(term, tuple(shape)).items():
            sizes[letter] = max(sizes.get(letter, 1), int(size))
    if not arrow:
        output = "".join(ch for ch in sizes if ch.isalpha() and inputs.count(ch) == 1)
    summed = any(ch.isalpha() and ch not in output for ch in sizes)
    points = prod(sizes.values())
    if len(shapes) == 1:
        return Cost.elementwise(points if summed else 0)
    return Cost.contraction(points) if summed else Cost.elementwise(points)


def einsum_output_shape(equation: str, *shapes: tuple) -> tuple:
    """The output shape of an explicit einsum (``abc,cde->abde``) of operands with these shapes."""
    inputs, _, output = equation.replace(" ", "").partition("->")
    sizes: dict[str, int] = {}
    for term, shape in zip(inputs.split(","), shapes):
        sizes.update(term_sizes(term, tuple(shape)))
    if "..." in output:
        before, after = output.split("...")
        middle = sorted((k for k in sizes if k.startswith("*")), key=lambda k: -int(k[1:]))
        return tuple(sizes[ch] for ch in before) + tuple(sizes[k] for k in middle) + tuple(sizes[ch] for ch in after)
    return tuple(sizes[ch] for ch in output)
