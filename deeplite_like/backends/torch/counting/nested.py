"""Nested tensors (``torch.nested``, both layouts) as the counting engine and its formulas see them.

A nested tensor holds ``B`` components of different shapes: it has no single ``shape`` (the
strided layout raises ``NestedTensorImpl doesn't support sizes``; the jagged layout has a
symbolic ragged size that is no ``int``). Formulas read shapes, so an op on nested tensors is
priced as the sum of the same op over its components: component ``i`` of every nested
argument and output, given as a meta tensor of shape ``(1, *component_shape)`` (same rank as
the nested tensor, so a formula indexing dimensions from either end reads the same sizes).
Dense arguments (weights, biases) are passed to every component unchanged. This is exact for
the ops a nested tensor runs through (linear, elementwise, norms over the last dimension,
softmax, attention per sequence), which is what ``nn.TransformerEncoder`` and
``torch.nested`` users run.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from deeplite_like.opcount import Cost

__all__ = ["any_nested", "component_shapes", "describe_nested", "price_per_component"]


def _is_nested(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_nested


def any_nested(args: tuple, kwargs: dict) -> bool:
    """Whether a nested tensor is among the arguments (top level or inside a list/tuple)."""
    for value in (*args, *kwargs.values()):
        if _is_nested(value) or (isinstance(value, (list, tuple)) and any(_is_nested(v) for v in value)):
            return True
    return False


def component_shapes(tensor: torch.Tensor) -> list[tuple[int, ...]]:
    """The shapes of a nested tensor's components, in order (views: no data is copied)."""
    return [tuple(map(int, part.shape)) for part in tensor.unbind()]


def describe_nested(tensor: torch.Tensor) -> str:
    """``NestedTensor[(12, 64), (8, 64)] float32``: its components' shapes, for error messages."""
    shapes = ", ".join(f"({', '.join(map(str, s))})" for s in component_shapes(tensor))
    dtype = str(tensor.dtype).replace("torch.", "")
    device = "" if tensor.device.type == "cpu" else f" {tensor.device}"
    return f"NestedTensor[{shapes}] {dtype}{device}"


def _component(value: Any, index: int, cache: dict[int, list[tuple[int, ...]]]) -> Any:
    """``value`` with every nested tensor replaced by a meta stand-in for its ``index``-th component."""
    if _is_nested(value):
        shapes = cache.get(id(value))
        if shapes is None:
            shapes = cache[id(value)] = component_shapes(value)
        return torch.empty((1, *shapes[index]), dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)) and any(_is_nested(v) for v in value):
        return type(value)(_component(v, index, cache) for v in value)
    return value


def _count(values: Any) -> int:
    """Components of the first nested tensor found (its ``size(0)``)."""
    for value in values:
        if _is_nested(value):
            return int(value.size(0))
        if isinstance(value, (list, tuple)):
            found = _count(value)
            if found:
                return found
    return 0


def price_per_component(formula: Callable[[Any], Cost], make_call: Callable[[tuple, dict, Any], Any],
                        args: tuple, kwargs: dict, out: Any) -> tuple[int, int]:
    """``(macs, flops)`` of an op on nested tensors: the formula summed over the components.

    ``make_call(args, kwargs, out)`` builds the ``OpCall`` the formula receives for one component.
    """
    count = _count((*args, *kwargs.values()))
    cache: dict[int, list[tuple[int, ...]]] = {}
    macs = flops = 0
    for index in range(count):
        part_args = tuple(_component(a, index, cache) for a in args)
        part_kwargs = {k: _component(v, index, cache) for k, v in kwargs.items()}
        part_out = _component(out, index, cache) if _count((out,)) == count else out
        part_macs, part_flops = formula(make_call(part_args, part_kwargs, part_out))
        macs += int(part_macs)
        flops += int(part_flops)
    return macs, flops
