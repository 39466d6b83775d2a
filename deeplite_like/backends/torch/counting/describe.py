"""How a call's arguments read in error messages: ``(Tensor[2, 3] float32, mask=Tensor[2] bool)``."""
from __future__ import annotations

from typing import Any

import torch

from .nested import describe_nested

__all__ = ["describe_args", "describe_tensor"]


def describe_tensor(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        if value.is_nested:  # no single shape: its components'
            return describe_nested(value)
        dtype = str(value.dtype).replace("torch.", "")
        device = "" if value.device.type == "cpu" else f" {value.device}"
        return f"Tensor[{', '.join(str(int(s)) for s in value.shape)}] {dtype}{device}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe_tensor(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe_tensor(v)}" for k, v in value.items()) + "}"
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__}(...)"


def describe_args(args: tuple, kwargs: dict) -> str:
    """``(Tensor[2, 3] float32, mask=Tensor[2] bool)``: what a call received, for error messages."""
    parts = [describe_tensor(a) for a in args] + [f"{k}={describe_tensor(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"
