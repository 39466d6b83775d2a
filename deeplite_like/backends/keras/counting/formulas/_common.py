"""Helpers the formula families share: shapes, channel axes, activation functions, einsum sizes.

Formulas read only ``TensorSpec`` shapes/dtypes and the layer's configuration attributes, so
this package imports no framework.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Iterable

import deeplite_like.backends.keras.counting.formulas.conventions as c
from ..registry import Cost, LayerCall, LayerFormula, TensorSpec, is_keras_layer

#: Keras activation functions by ``__name__`` -> FLOPs per output element (default arguments).
ACTIVATIONS: dict[str, int] = {
    "linear": 0,
    "relu": c.RELU,
    "relu6": c.HARDTANH,
    "leaky_relu": c.LEAKY_RELU,
    "elu": c.ELU,
    "selu": c.SELU,
    "celu": c.CELU,
    "sigmoid": c.SIGMOID,
    "tanh": c.TANH,
    "silu": c.SILU,  # also "swish"
    "gelu": c.GELU,  # keras.activations.gelu defaults to approximate=False (the erf form)
    "gelu_tanh": c.GELU_TANH,  # gelu(approximate=True), bound by a partial or an alias (activation_name)
    "hard_sigmoid": c.HARDSIGMOID,
    "hard_silu": c.HARDSWISH,  # also "hard_swish"
    "hard_tanh": c.HARDTANH,
    "softplus": c.SOFTPLUS,
    "softsign": c.SOFTSIGN,
    "mish": c.MISH,
    "log_sigmoid": c.LOG_SIGMOID,
    "glu": c.GLU,
    "exponential": c.EXP,
    "softmax": c.SOFTMAX,
    "log_softmax": c.SOFTMAX,
    "soft_shrink": c.SOFTSHRINK,
    "hard_shrink": c.THRESHOLD,
    "tanh_shrink": c.TANHSHRINK,
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
