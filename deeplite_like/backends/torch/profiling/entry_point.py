"""Calling the profiled entry point (``forward`` or any method named by ``func_name``), counted as the model's call."""
from __future__ import annotations

from typing import Any

from torch import nn

from .phases import PhaseCountingMode

__all__ = ["call_entry", "check_entry"]


def call_entry(model: nn.Module, func_name: str, args: tuple, kwargs: dict,
               mode: PhaseCountingMode | None = None) -> Any:
    """``model(...)`` for ``forward``; else ``model.<func_name>(...)``, counted as a call of the root module.

    Counted as the root's call (``CountingMode._call``), an entry point such as ``generate`` is part
    of the model: the root includes every operator it runs, also those outside ``self(...)`` (token
    sampling), which show as the root's own operators. Its own call is not counted as a forward
    call (``calls`` stays the number of ``model(...)`` calls).
    """
    if func_name == "forward":
        return model(*args, **kwargs)  # through __call__, so the root's hooks run
    entry = getattr(model, func_name)
    if mode is None:
        return entry(*args, **kwargs)
    try:
        return mode._call(model, entry, args, kwargs, name=mode.attached_name(model))
    finally:
        root = mode.result.by_module.get("")
        if root is not None and root.calls:
            root.calls -= 1


def check_entry(model: nn.Module, func_name: str) -> None:
    entry = getattr(model, func_name, None)
    if not callable(entry):
        public = sorted(n for n in dir(type(model)) if not n.startswith("_") and callable(getattr(type(model), n, None))
                        and n not in dir(nn.Module))
        raise AttributeError(f"{type(model).__name__} has no method {func_name!r} to profile (func_name); "
                             f"its own methods are {public or ['forward']}")
