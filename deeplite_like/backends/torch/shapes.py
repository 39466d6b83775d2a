"""What the per-layer table shows of a module call: input and output shapes, output bytes.

``layer_facts`` is read by the observation pass (``counting/recorder.py``) at each module's
first call, right after its forward returned: only metadata is kept, never the tensors (which
would stay alive and change the peak memory measured in the same pass). The shapes are kept as
``torch.Size``s and written out (``"1x3x224x224"``) only when the table asks.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves

from deeplite_like.data import format_shape

__all__ = ["LayerFacts", "layer_facts", "shape_text"]


class LayerFacts:
    """A module call as the per-layer table shows it: ``input_shapes``, ``output_shapes`` (text;
    several tensors comma-separated) and ``activation_bytes`` (the outputs' numel x element size)."""

    __slots__ = ("_inputs", "_outputs", "activation_bytes")

    def __init__(self, inputs: tuple, outputs: tuple, activation_bytes: int) -> None:
        self._inputs, self._outputs, self.activation_bytes = inputs, outputs, activation_bytes

    @property
    def input_shapes(self) -> str:
        return _text(self._inputs)

    @property
    def output_shapes(self) -> str:
        return _text(self._outputs)

    def __repr__(self) -> str:
        return f"LayerFacts({self.input_shapes!r}, {self.output_shapes!r}, {self.activation_bytes})"


def shape_text(t: torch.Tensor) -> str:
    """``"8x64"``; ``"scalar"``; a nested tensor has no single shape: its components', ``"nested(12x64, 8x64)"``."""
    if t.is_nested:
        return f"nested({', '.join(shape_text(part) for part in t.unbind())})"
    return format_shape(t.shape)


def _text(shapes: tuple) -> str:
    return ", ".join(s if isinstance(s, str) else format_shape(s) for s in shapes)


def _tensors(value: Any) -> list[torch.Tensor]:
    if type(value) is torch.Tensor:
        return [value]
    if type(value) is tuple and all(type(v) is torch.Tensor for v in value):
        return list(value)
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def layer_facts(args: tuple, kwargs: dict, output: Any) -> LayerFacts:
    """The facts of one call ``module(*args, **kwargs) -> output``."""
    inputs = _tensors(args) + (_tensors(kwargs) if kwargs else [])
    outputs = _tensors(output)
    if any(t.is_nested for t in inputs + outputs):  # unbind runs operators: not the model's, not observed
        with _disable_current_modes():
            return LayerFacts(tuple(map(shape_text, inputs)), tuple(map(shape_text, outputs)), _bytes(outputs))
    return LayerFacts(tuple(t.shape for t in inputs), tuple(t.shape for t in outputs), _bytes(outputs))


def _bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)
