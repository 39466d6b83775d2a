"""Batches of any framework: their tensors seen through one adapter each, and the data splits they come from.

Tensors of any framework, seen through one ``TensorAdapter`` each: described, measured, sliced.

Framework specifics live behind ``TensorAdapter`` objects, chosen per tensor: the one
``describe`` of a batch (``Tensor[float32, 8x3x32x32]``, ``ndarray[int64, 3]``, containers by
their structure) for every error message, a sample's bytes, and ``take`` for resizing a batch.
This module imports no framework: the numpy adapter imports numpy only when it handles an array,
and a backend's adapter (``deeplite_like.backends.torch.inputs``) registers itself when imported;
it is imported automatically the first time one of its tensors is met (its framework is then
already loaded). Nested tuples, lists and mappings of tensors are walked here too.

**Splits**, from a user's ``data_splits`` to an iterable of batches, checked: ``data_splits`` maps a split name to an iterable of batches::

    {"train": train_loader, "test": [(x, y), ...], "calib": make_batches}

A split may be any re-iterable object (a list, a torch ``DataLoader``, a ``tf.data.Dataset``)
or a zero-argument callable that returns a fresh iterable each time it is called (a generator
function, ``lambda: iter(...)``).

**One-shot iterators are refused.** A generator object or ``iter(loader)`` can be read only
once: taking its first batch would silently drop that batch from a later evaluation, and a
second ``first_batch`` would see the second batch. ``first_batch`` raises ``DataError`` for
them and says how to fix it (pass a list, the loader itself, or a function that returns a fresh
iterator). Re-iterable splits are re-opened on every call: ``first_batch`` twice on a list or a
``DataLoader`` works; with ``shuffle=True`` it returns a different batch each time, so pass an
unshuffled loader when numbers must be reproducible.
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from deeplite_like.backends import all_backends
from deeplite_like.errors import DataError


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


# -- Splits: from a user's data_splits to an iterable of batches, checked ------------------------------------
SplitCheck = Callable[[str, object], None]
_SPLIT_CHECKS: list[SplitCheck] = []


def register_split_check(check: SplitCheck) -> None:
    """Add ``check(split_name, split_object)``, run before a split is read.

    A backend uses it to refuse objects it knows are not iterables of batches (a torch
    ``Dataset`` yields single samples); ``check`` raises ``DataError`` or returns ``None``.
    Registering the same function twice has no effect.
    """
    if check not in _SPLIT_CHECKS:
        _SPLIT_CHECKS.append(check)


def _refuse_non_batches(split: str, obj: object, *, made_by_factory: bool) -> None:
    source = "its factory returned" if made_by_factory else "it is"
    adapter = adapter_for(obj)
    if adapter is not None:
        raise DataError(
            f"split {split!r}: {source} a single {adapter.describe(obj)}, not an iterable of "
            f"batches; iterating it would yield single rows. Pass a list of batches, e.g. "
            f"{{{split!r}: [batch]}}"
        )
    if isinstance(obj, (str, bytes)):
        raise DataError(
            f"split {split!r}: {source} a {type(obj).__name__}, not an iterable of batches; "
            f"load the data and pass a data loader or a list of batches"
        )
    if obj is None:
        raise DataError(f"split {split!r}: {source} None, not an iterable of batches")


def _open_split(data_splits: Mapping[str, Any], split: str) -> Iterable[Any]:
    """Validate ``data_splits[split]`` and return a fresh iterable of its batches."""
    if not isinstance(data_splits, Mapping):
        raise DataError(
            f"data_splits must be a mapping of split name -> iterable of batches, e.g. "
            f"{{'train': train_loader, 'test': test_loader}}; got {type(data_splits).__name__} "
            f"while looking for split {split!r}"
        )
    if split not in data_splits:
        names = [str(k) for k in data_splits]
        if not names:
            raise DataError(f"no split {split!r}; data_splits is empty")
        message = f"no split {split!r}; available: {_quoted(sorted(names))}"
        close = difflib.get_close_matches(str(split), names, n=1)
        if close:
            message += f"; did you mean {close[0]!r}?"
        raise DataError(message)
    obj = data_splits[split]
    for check in _SPLIT_CHECKS:
        check(split, obj)
    _refuse_non_batches(split, obj, made_by_factory=False)
    if isinstance(obj, Iterator) and iter(obj) is obj:  # (an iterator whose __iter__ starts afresh is re-iterable)
        raise DataError(
            f"split {split!r}: it is a one-shot iterator ({type(obj).__name__}); reading a batch "
            f"would consume it. Pass a re-iterable (a list, the DataLoader itself) or a function "
            f"that returns a fresh iterator, e.g. {{{split!r}: lambda: make_batches()}}"
        )
    iterable = hasattr(obj, "__iter__") or hasattr(obj, "__getitem__")
    if not iterable and callable(obj):
        obj = obj()
        _refuse_non_batches(split, obj, made_by_factory=True)
    if not (hasattr(obj, "__iter__") or hasattr(obj, "__getitem__")):
        raise DataError(
            f"split {split!r}: {type(obj).__name__} is not an iterable of batches; pass a data "
            f"loader, a list of batches, or a function returning an iterator"
        )
    return obj


def split_loader(data_splits: Mapping[str, Any], split: str) -> Iterable[Any]:
    """The iterable of batches of ``data_splits[split]``, e.g. to hand to an evaluation function.

    A re-iterable split is returned as it is (a ``DataLoader`` stays a ``DataLoader``); a
    factory is called and its result returned. Errors are ``DataError`` (see ``first_batch``).
    """
    return _open_split(data_splits, split)


def iter_batches(data_splits: Mapping[str, Any], split: str) -> Iterator[Any]:
    """A fresh iterator over the batches of ``data_splits[split]``.

    The split is validated now (not at the first ``next``); errors are ``DataError``.
    """
    return iter(_open_split(data_splits, split))


def first_batch(data_splits: Mapping[str, Any], split: str) -> Any:
    """The first batch of ``data_splits[split]``, as the split yields it (nothing converted).

    Raises ``DataError`` when ``data_splits`` is not a mapping, the split is missing, empty, a
    one-shot iterator, or not an iterable of batches. An error raised by the user's loader
    while producing the batch propagates unchanged, with a note naming the split.
    """
    batches = iter_batches(data_splits, split)
    try:
        return next(batches)
    except StopIteration:
        raise DataError(f"split {split!r} is empty") from None
    except Exception as exc:
        exc.add_note(f"(raised while reading the first batch of split {split!r})")
        raise
    finally:
        close = getattr(batches, "close", None)  # end a generator now, not at garbage collection
        if callable(close):
            close()
