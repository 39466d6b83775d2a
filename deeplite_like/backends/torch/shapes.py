"""What the per-layer table shows of a module call: input and output shapes, output bytes.

``layer_facts`` is read by the observation pass (``counting/recorder.py``) at each module's
first call, right after its forward returned: only metadata is kept, never the tensors (which
would stay alive and change the peak memory measured in the same pass).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves

__all__ = ["LayerFacts", "layer_facts", "shape_text"]


class LayerFacts(NamedTuple):
    """A module call as the per-layer table shows it (``"1x3x224x224"``; several tensors comma-separated)."""

    input_shapes: str
    output_shapes: str
    activation_bytes: int  # bytes of the output tensors (numel x element size)


def shape_text(t: torch.Tensor) -> str:
    """``"8x64"``; ``"scalar"``; a nested tensor has no single shape: its components', ``"nested(12x64, 8x64)"``."""
    if t.is_nested:
        return f"nested({', '.join(shape_text(part) for part in t.unbind())})"
    return "x".join(map(str, t.shape)) or "scalar"


def _shapes(tensors: list[torch.Tensor]) -> str:
    return ", ".join(shape_text(t) for t in tensors)


def layer_facts(args: tuple, kwargs: dict, output: Any) -> LayerFacts:
    """The facts of one call ``module(*args, **kwargs) -> output``."""
    inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    outputs = [t for t in tree_leaves(output) if isinstance(t, torch.Tensor)]
    if any(t.is_nested for t in inputs + outputs):  # unbind runs operators: not the model's, not observed
        with _disable_current_modes():
            return LayerFacts(_shapes(inputs), _shapes(outputs),
                              sum(t.numel() * t.element_size() for t in outputs))
    return LayerFacts(_shapes(inputs), _shapes(outputs), sum(t.numel() * t.element_size() for t in outputs))
