"""Tensors of any framework, seen through one ``TensorAdapter`` each: described, measured, sliced.

Framework specifics live behind ``TensorAdapter`` objects, chosen per tensor: the one
``describe`` of a batch (``Tensor[float32, 8x3x32x32]``, ``ndarray[int64, 3]``, containers by
their structure) for every error message, a sample's bytes, and ``take`` for resizing a batch.
This module imports no framework: the numpy adapter imports numpy only when it handles an array,
and a backend's adapter (``deeplite_like.backends.torch.inputs``) registers itself when imported;
it is imported automatically the first time one of its tensors is met (its framework is then
already loaded). Nested tuples, lists and mappings of tensors are walked here too.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from deeplite_like.backends import all_backends

# How many items of a container ``describe`` shows, and how deep it looks.
_MAX_ITEMS = 6
_MAX_DEPTH = 4
# How many keys / fields an error message lists.
_MAX_KEYS = 20


@runtime_checkable
class TensorAdapter(Protocol):
    """What the data binding needs to know about one framework's tensor type."""

    name: str

    def is_tensor(self, x: object) -> bool:
        """True when ``x`` is a tensor of this framework. Must not import the framework."""

    def describe(self, x: Any) -> str:
        """A short description, ``Tensor[float32, 8x3x32x32]``."""

    def batch_dim(self, x: Any) -> int | None:
        """The size of the leading dimension, or ``None`` for a 0-d tensor."""

    def take(self, x: Any, n: int) -> Any:
        """``n`` samples along dim 0: the first ``n``, cycling (``i % len``) when ``n > len``."""


def _type_names(x: object) -> set[tuple[str, str]]:
    """``(module, qualname)`` of every class in ``type(x)``'s MRO (no import needed)."""
    return {(cls.__module__, cls.__qualname__) for cls in type(x).__mro__}


def format_shape(shape: Sequence[int]) -> str:
    """``(8, 3, 32)`` -> ``'8x3x32'``; a 0-d shape -> ``'scalar'``."""
    return "x".join(str(int(d)) for d in shape) if len(shape) else "scalar"


def _sample_bytes(x: Any) -> int:
    """Bytes of one sample (one row along dim 0) of an array or tensor, read from its shape and dtype (0 if unknown)."""
    try:
        shape = tuple(int(d) for d in x.shape)
    except (TypeError, ValueError, RuntimeError, AttributeError):  # a nested tensor, an unknown dimension
        return 0
    itemsize = getattr(x, "itemsize", None)  # numpy, torch
    if itemsize is None:
        itemsize = getattr(getattr(x, "dtype", None), "size", None)  # TensorFlow's DType
    if not isinstance(itemsize, int) or not shape:
        return 0
    return math.prod(shape[1:]) * itemsize


def cyclic_indices(batch: int, n: int) -> Any:
    """Rows taken to make ``n`` samples out of ``batch``: ``[0, 1, ..., b-1, 0, 1, ...][:n]``.

    A numpy ``intp`` array (8 bytes a row, as ``resize`` estimates), never a Python list of ``n``
    ints (36 bytes each). numpy is imported here, when rows are first taken.
    """
    import numpy as np

    if batch <= 0:
        raise ValueError(f"cannot take {n} samples from an empty batch (leading dimension 0)")
    return np.arange(n, dtype=np.intp) % batch


class NumpyAdapter:
    """``numpy.ndarray`` (and subclasses). numpy is imported only when an array is taken."""

    name = "numpy"

    def is_tensor(self, x: object) -> bool:
        return ("numpy", "ndarray") in _type_names(x)

    def describe(self, x: Any) -> str:
        return f"ndarray[{x.dtype}, {format_shape(x.shape)}]"

    def batch_dim(self, x: Any) -> int | None:
        return int(x.shape[0]) if x.ndim > 0 else None

    def take(self, x: Any, n: int) -> Any:
        batch = self.batch_dim(x)
        if batch is None:
            raise ValueError(f"cannot take samples from a 0-d array {self.describe(x)}")
        if n == batch:
            return x
        if n < batch:
            return x[:n]  # a view, as numpy slicing gives; the caller's array is not changed
        return x[cyclic_indices(batch, n)]


_ADAPTERS: list[TensorAdapter] = [NumpyAdapter()]

# Backends whose adapter module was imported on first sight of one of their tensors (the
# ``Backend`` records of deeplite_like.backends name the tensor types and the module).
_ADAPTERS_LOADED: set[str] = set()


def register_adapter(adapter: TensorAdapter) -> None:
    """Add ``adapter`` to the adapters tried, in order, for every tensor.

    An adapter with the same ``name`` as a registered one replaces it in place (so importing
    a backend module twice, or reloading it, does not register it twice).
    """
    if not isinstance(adapter, TensorAdapter):
        raise TypeError(
            f"register_adapter expects a TensorAdapter (name, is_tensor, describe, batch_dim, "
            f"take); got {type(adapter).__name__}"
        )
    for i, known in enumerate(_ADAPTERS):
        if known.name == adapter.name:
            _ADAPTERS[i] = adapter
            return
    _ADAPTERS.append(adapter)


def adapter_for(x: object) -> TensorAdapter | None:
    """The first registered adapter that accepts ``x`` as a tensor, or ``None``."""
    for adapter in _ADAPTERS:
        if adapter.is_tensor(x):
            return adapter
    # A tensor whose adapter lives in a backend module: seeing it means its framework is already
    # imported, so importing the adapter costs nothing more.
    names = _type_names(x)
    for backend in all_backends():
        if backend.name not in _ADAPTERS_LOADED and names.intersection(backend.tensor_types):
            backend.load_adapter()  # registers its adapter
            _ADAPTERS_LOADED.add(backend.name)
            return adapter_for(x)
    return None


# ---------------------------------------------------------------------------------------------
# Describing batches


def _is_namedtuple(x: object) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _key_label(key: object) -> str:
    return key if isinstance(key, str) and key.isidentifier() else repr(key)


def _items(parts: list[str], total: int) -> str:
    if total > len(parts):
        parts = [*parts, f"... {total - len(parts)} more"]
    return ", ".join(parts)


def describe(batch: object, _depth: int = 0) -> str:
    """The structure of a batch, for error messages.

    Tensors show as ``Tensor[dtype, shape]`` (numpy arrays as ``ndarray[dtype, shape]``),
    containers as ``tuple(...)``, ``list(...)``, ``dict(key=...)`` (a named tuple or a dict
    subclass by its class name), anything else by its type name. Long containers show their
    first few items and how many more there are.
    """
    adapter = adapter_for(batch)
    if adapter is not None:
        return adapter.describe(batch)
    if isinstance(batch, (tuple, list, Mapping)):
        name = type(batch).__name__
        if _depth >= _MAX_DEPTH:
            return f"{name}(...)"
        if isinstance(batch, Mapping):
            keys = list(batch.keys())
            parts = [f"{_key_label(k)}={describe(batch[k], _depth + 1)}" for k in keys[:_MAX_ITEMS]]
            return f"{name}({_items(parts, len(keys))})"
        if _is_namedtuple(batch):
            fields = type(batch)._fields
            parts = [f"{f}={describe(v, _depth + 1)}" for f, v in zip(fields[:_MAX_ITEMS], batch)]
            return f"{name}({_items(parts, len(batch))})"
        parts = [describe(v, _depth + 1) for v in batch[:_MAX_ITEMS]]
        return f"{name}({_items(parts, len(batch))})"
    if batch is None:
        return "None"
    return type(batch).__name__


def _quoted(keys: Iterable[object]) -> str:
    keys = list(keys)
    shown = ", ".join(repr(k) for k in keys[:_MAX_KEYS])
    return shown + (f", ... {len(keys) - _MAX_KEYS} more" if len(keys) > _MAX_KEYS else "")


def _where(split: str | None) -> str:
    return f"split {split!r}: " if split is not None else ""


# ---------------------------------------------------------------------------------------------
# Nested structures of inputs


def _map_leaves(fn: Callable[[Any], Any], x: Any) -> Any:
    """Apply ``fn`` to every leaf of nested tuples / lists / mappings, keeping the structure.

    Written here, not with ``torch.utils._pytree`` / ``keras.tree``: the core imports no
    framework. Named tuples keep their class; other mappings become ``dict``.
    """
    if adapter_for(x) is not None:
        return fn(x)
    if _is_namedtuple(x):
        return type(x)(*(_map_leaves(fn, v) for v in x))
    if isinstance(x, (tuple, list)):
        return type(x)(_map_leaves(fn, v) for v in x)
    if isinstance(x, Mapping):
        return {k: _map_leaves(fn, v) for k, v in x.items()}
    return fn(x)


def _leaves(x: Any) -> list[Any]:
    found: list[Any] = []
    _map_leaves(found.append, x)
    return found
