"""Checking ``get_model_profile``'s arguments before anything runs (no framework imports).

Each check names the argument, the value given and what is accepted, so that a wrong
``module_depth="2"`` fails at once instead of after a profile, or not at all.
"""
from __future__ import annotations

import numbers
from typing import Any

__all__ = ["check_input_shape", "check_view_options"]

_EXAMPLE_SHAPE = "input_shape=(8, 3, 224, 224)"


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _as_written(value: Any, fallback: int) -> int:
    """The int a str such as ``"2"`` spells, for the 'e.g.' of a message; else ``fallback``."""
    text = value.strip() if isinstance(value, str) else ""
    return int(text) if text.lstrip("-").isdigit() else fallback


def check_view_options(module_depth: Any, top_modules: Any) -> None:
    """``module_depth``: an int >= -1 (-1 or ``None``: every depth); ``top_modules``: an int >= 1."""
    depth_rule = "module_depth must be an int >= -1 (the deepest module depth shown; -1 shows all)"
    if module_depth is not None and not _is_int(module_depth):
        raise TypeError(f"{depth_rule}, got {type(module_depth).__name__} {module_depth!r}; e.g. "
                        f"module_depth={_as_written(module_depth, 2)}")
    if module_depth is not None and module_depth < -1:
        raise ValueError(f"{depth_rule}, got {module_depth}")
    top_rule = "top_modules must be an int >= 1 (how many module types per depth are ranked)"
    if not _is_int(top_modules):
        raise TypeError(f"{top_rule}, got {type(top_modules).__name__} {top_modules!r}; e.g. "
                        f"top_modules={_as_written(top_modules, 3)}")
    if top_modules < 1:
        raise ValueError(f"{top_rule}, got {top_modules}")


def check_input_shape(input_shape: Any) -> tuple[int, ...] | None:
    """``input_shape`` as a tuple of ints >= 1 (batch dimension included), or ``None`` when not given."""
    if input_shape is None:
        return None
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise TypeError(f"input_shape must be a sequence of ints, batch dimension included ({_EXAMPLE_SHAPE}), got "
                        f"{type(input_shape).__name__} {input_shape!r}")
    shape = tuple(input_shape)
    if not shape:
        raise ValueError(f"input_shape=() has no dimension; give the batch dimension first ({_EXAMPLE_SHAPE})")
    for position, dim in enumerate(shape):
        if dim is None or (_is_int(dim) and dim == -1):
            fixed = tuple(1 if d is None or (_is_int(d) and d == -1) else d for d in shape)
            raise ValueError(f"input_shape={shape!r}: dimension {position} is {dim!r}, but a profile runs one real call "
                             f"on a tensor of exactly that shape: give every size, the batch too, e.g. "
                             f"input_shape={fixed!r}")
        if not _is_int(dim) or dim < 1:
            raise ValueError(f"input_shape={shape!r}: dimension {position} is {dim!r}; every dimension must be an "
                             f"int >= 1, batch dimension included ({_EXAMPLE_SHAPE})")
    return tuple(int(d) for d in shape)
