"""Splits: from a user's ``data_splits`` to an iterable of batches, checked.

``data_splits`` maps a split name to an iterable of batches::

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
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from deeplite_like.data.adapters import _quoted, adapter_for
from deeplite_like.errors import DataError

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
