"""Helpers the formula families share: argument binding, shapes, op look-up by name.

Formulas read only shapes, dtypes and scalars, so they work on real, meta and fake tensors.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import torch

from ..registry import Cost, Formula, OpCall

aten = torch.ops.aten

#: Names given to ``ops()`` that this torch build does not have (a test keeps it empty on
#: the supported version, so a typo cannot silently leave an op uncounted).
MISSING: list[str] = []

class _Signature:
    """An op's schema arguments, read once (pybind calls are slow): what ``bind`` needs."""

    __slots__ = ("op", "positional", "defaults", "lists")

    def __init__(self, op: Any):
        arguments = op._schema.arguments
        self.op = op
        self.positional = tuple(a.name for a in arguments if not a.kwarg_only)  # in order
        self.defaults = {a.name: a.default_value if a.has_default_value() else None for a in arguments}
        self.lists = tuple(name for name, value in self.defaults.items() if type(value) is list)


# id(op) -> its _Signature: ``OpOverload.__hash__`` is a slow Python method; the entry holds the
# op, which keeps its id from being reused.
_SIGNATURES: dict[int, _Signature] = {}


def bind(call: OpCall) -> dict[str, Any]:
    """The call's arguments by schema name, defaults filled in (``{"self": t, "alpha": 1}``)."""
    signature = _SIGNATURES.get(id(call.op))
    if signature is None or signature.op is not call.op:
        signature = _SIGNATURES[id(call.op)] = _Signature(call.op)
    bound = dict(signature.defaults)  # schema order; then what was passed, by position and by name
    bound.update(zip(signature.positional, call.args))
    if call.kwargs:
        bound.update(call.kwargs)
    for name in signature.lists:  # a fresh copy of a list default: the cached one must not change
        if bound[name] is signature.defaults[name]:
            bound[name] = list(bound[name])
    return bound


def ops(*names: str, inplace: bool = False) -> list[Any]:
    """The aten packets named (``"add"`` -> ``aten.add``), plus ``add_`` when ``inplace``.

    Names this torch build lacks are skipped and recorded in ``MISSING``.
    """
    found = []
    for name in names:
        variants = [name, name + "_"] if inplace and not name.endswith("_") else [name]
        for variant in variants:
            packet = getattr(aten, variant, None)
            if packet is None:
                if variant == name:
                    MISSING.append(name)
                continue
            found.append(packet)
    return found


def shape(x: Any) -> tuple[int, ...]:
    """A tensor's shape as plain ints (``int`` also turns symbolic sizes of fake tensors into ints)."""
    return tuple(map(int, x.shape))


def numel(x: Any) -> int:
    """Elements of a tensor (0 for ``None``)."""
    if x is None:
        return 0
    n = math.prod(x.shape)
    return n if type(n) is int else int(n)  # (symbolic sizes of fake tensors: their int value)


def prod(values: Iterable[Any]) -> int:
    return math.prod(map(int, values))


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor in an op's output (a tensor, or a tuple/list of them)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for item in value:
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def is_float(t: torch.Tensor | None) -> bool:
    """True for floating, complex and quantized tensors: only their arithmetic is counted as FLOPs
    (a quantized tensor holds real numbers in int8: its ops do the float twin's arithmetic)."""
    return t is not None and (t.dtype.is_floating_point or t.dtype.is_complex or t.is_quantized)


def out_elements(call: OpCall) -> int:
    """Elements of the (first) output when it is floating point, else 0."""
    out = first_tensor(call.out)
    return numel(out) if is_float(out) else 0


def per_element(call: OpCall, flops_per_element: int) -> Cost:
    """``flops_per_element`` FLOPs per floating output element."""
    return Cost.elementwise(flops_per_element * out_elements(call))


def per_input_element(flops_per_element: int, doc: str) -> Formula:
    """A formula charging ``flops_per_element`` FLOPs per element of ``args[0]`` (0 unless floating): backward
    ops per grad_output element, ``col2im`` per input element. ``doc``: the formula's docstring (its derivation)."""

    def formula(call: OpCall) -> Cost:
        x = call.args[0]
        return Cost.elementwise(flops_per_element * numel(x)) if is_float(x) else Cost()

    formula.__name__ = formula.__qualname__ = f"per_input_element_{flops_per_element}"
    formula.__doc__ = doc
    return formula


def scalar_is(value: Any, target: float) -> bool:
    """True when a Scalar argument equals ``target`` (tensors and symbols count as different)."""
    if isinstance(value, (int, float, bool)):
        return float(value) == target
    return False
