"""Which public entry point the user called, so that deep errors name it.

``count_ops`` runs under ``compute_network_status``, ``get_model_profile`` and the command line;
its errors say "check the inputs given to <the API the user called>", not the name of an inner
function the user never saw. The outermost entry point wins: ``compute_network_status`` calling
``compute_status`` is still ``compute_network_status``.
"""
from __future__ import annotations

import contextlib
import warnings
from contextvars import ContextVar
from typing import Any, Iterator, Mapping

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


def model_inputs(api: str, positional: tuple, args: Any, kwargs: Mapping[str, Any] | None,
                 legacy: Mapping[str, Any]) -> tuple[tuple, dict]:
    """The model's inputs of ``api(model, *positional, args=..., kwargs=..., **legacy)``: ``(args, kwargs)``.

    One convention everywhere (``count_ops``, ``profile_job``, ``get_model_profile``,
    ``peak_activation_memory``): the model's positional inputs are ``args`` (a tuple; ``count_ops``
    also takes them right after the model), its keyword inputs are ``kwargs`` (a dict), and our
    own options are keyword arguments beside them, so a model argument named like an option
    (``meta``, ``backward``) goes in ``kwargs`` and is never taken for ours. Model keyword inputs
    passed loose (``count_ops(model, input_ids=ids)``, the old form) still work, with a
    ``DeprecationWarning``.
    """
    if args is not None and positional:
        raise TypeError(f"{api}: pass the model's positional inputs after the model or as args=(...), not both")
    if args is None:
        args = positional
    elif not isinstance(args, tuple):
        args = tuple(args) if isinstance(args, list) else (args,)
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(f"{api}: kwargs= takes a dict of the model's keyword inputs, got {type(kwargs).__name__}")
    merged = dict(kwargs or {})
    if legacy:
        both = sorted(set(legacy) & set(merged))
        if both:
            raise TypeError(f"{api}: the model input(s) {', '.join(both)} were given twice, loose and in kwargs=")
        names = ", ".join(sorted(legacy))
        warnings.warn(f"{api}: the model's keyword input(s) {names} were passed as keyword arguments of {api}; "
                      f"pass them as kwargs={{...}} (e.g. {api}(model, x, kwargs={{'{sorted(legacy)[0]}': ...}})). "
                      "Loose model keywords are deprecated: one named like an option (meta, backward) would be "
                      "taken for ours", DeprecationWarning, stacklevel=3)
        merged.update(legacy)
    return args, merged
