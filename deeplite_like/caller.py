"""Which public entry point the user called, so that deep errors name it.

``count_ops`` runs under ``compute_network_status``, ``get_model_profile`` and the command line;
its errors say "check the inputs given to <the API the user called>", not the name of an inner
function the user never saw. The outermost entry point wins: ``compute_network_status`` calling
``compute_status`` is still ``compute_network_status``.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Iterator

__all__ = ["called_as", "caller", "inputs_hint"]

_CALLER: ContextVar[str | None] = ContextVar("deeplite_like_caller", default=None)


@contextlib.contextmanager
def called_as(name: str) -> Iterator[str]:
    """Name the entry point for the block; an outer name, if set, is kept. Yields the name in force."""
    outer = _CALLER.get()
    if outer is not None:
        yield outer
        return
    token = _CALLER.set(name)
    try:
        yield name
    finally:
        _CALLER.reset(token)


def caller(default: str) -> str:
    """The entry point the user called, or ``default`` (the function itself) when called directly."""
    return _CALLER.get() or default


def inputs_hint(default: str) -> str:
    """``'Check that the inputs given to <caller> have the shapes and dtypes the model expects'``."""
    name = caller(default)
    source = {"compute_network_status": "compute_network_status (the first batch of the data split, as the "
                                        "profiler's ForwardPass extracts it)",
              "compute_status": "compute_status (the first batch of the data split, as the profiler's "
                                "ForwardPass extracts it)",
              "the command line": "the command line (--input-shape / --inputs)"}.get(name, name)
    return f"Check that the inputs given to {source} have the shapes and dtypes the model expects"
