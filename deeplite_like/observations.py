"""Work shared by the profiler functions of one status computation (no framework imports).

Several built-in functions read the same instrumented forward: MACs/FLOPs, peak memory and the
per-layer table on PyTorch; MACs/FLOPs and the layer table on Keras, and peak memory too on
Keras' torch backend. ``Profiler`` enters
``shared_observations()`` around each ``compute_network_status``/``compare`` computation; inside
it, ``observed(key, make)`` runs ``make()`` once per key (the model, its inputs and the options
that change what the run sees) and hands every later caller the same result. Outside it,
``make()`` runs each time. Nothing outlives the scope: the next status measures afresh.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Callable, Iterator, TypeVar

__all__ = ["note", "noted", "observed", "sharing", "shared_observations"]

T = TypeVar("T")
_SHARED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("deeplite_like_observations", default=None)


@contextlib.contextmanager
def shared_observations() -> Iterator[None]:
    """Within the body, ``observed`` runs each distinct observation once."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def sharing() -> bool:
    """Whether a ``shared_observations`` scope is open (an observation then records everything it can)."""
    return _SHARED.get() is not None


def note(key: tuple, value: object = True) -> None:
    """Remember a fact for the rest of the scope (nothing outside one): e.g. that a model has run."""
    shared = _SHARED.get()
    if shared is not None:
        shared[key] = value


def noted(key: tuple) -> object:
    """What ``note`` or ``observed`` left under ``key`` in this scope; None if nothing."""
    shared = _SHARED.get()
    return None if shared is None else shared.get(key)


def observed(key: tuple, make: Callable[[], T]) -> T:
    """``make()``, or what it returned for ``key`` earlier in this scope."""
    shared = _SHARED.get()
    if shared is None:
        return make()
    if key not in shared:
        shared[key] = make()
    return shared[key]
