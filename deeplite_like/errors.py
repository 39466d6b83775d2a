"""Errors, warnings and argument checks shared by every backend (no framework imports).

One class per kind of failure, whichever backend raised it: ``except ForwardError`` catches a
model whose forward failed under the PyTorch or the Keras backend, from ``count_ops``,
``compute_network_status`` or ``get_model_profile`` alike. ``DataError`` says a split or a batch
is unusable; ``NotProvidedError`` that a peer's name (deeplite-profiler, DeepSpeed) is absent on
purpose, and what to use instead.

Arguments of the public entry points are checked before any work: a wrong argument must never
give a wrong number (``backward='no'`` is truthy, ``batch_size=-5`` slices,
``min_run_time=float('inf')`` times forever). Each check raises ``TypeError`` (wrong kind) or
``ValueError`` (wrong value) naming the argument, the API and what to pass instead.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os
import warnings
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator, Mapping

from deeplite_like.units import format_bytes

__all__ = ["BackwardError", "CountingError", "DataError", "FormulaError", "ForwardError", "MEMORY_SHARE",
           "NotProvidedError", "PROFILER_FLAGS", "UntrackedLayerWarning", "UntrackedOpWarning", "available_memory",
           "called_as", "caller", "check_batch_agrees", "check_batch_size", "check_fits_in_memory", "check_flag",
           "check_profiler_options", "check_seconds", "inputs_hint"]


class CountingError(RuntimeError):
    """A counting pass could not finish; the message says where and what to do."""


class DataError(ValueError):
    """A split is missing, empty or unusable, or a batch does not fit the ``ForwardPass``."""


class NotProvidedError(ImportError):
    """A name of a peer's API (deeplite-profiler, DeepSpeed) deliberately not provided here.

    Raised by a module's ``__getattr__``, so ``from module import name`` shows the message (which
    says what to use instead) rather than a bare "cannot import name". docs/migration.rst lists
    every such name with the reason.
    """


class ForwardError(CountingError):
    """The model's forward raised while being counted or profiled (the cause is chained)."""


class BackwardError(CountingError):
    """The loss or the backward pass failed while being counted (the cause is chained)."""


class FormulaError(CountingError):
    """A formula (of an operator, a layer or a whole module) raised or returned something unusable."""


class UntrackedOpWarning(UserWarning):
    """Operators ran with no formula and are not known to be free: they were counted as 0 (PyTorch, ONNX)."""


class UntrackedLayerWarning(UserWarning):
    """Layers ran with no formula, no recorded sublayers, and are not known to be free: counted as 0 (Keras)."""


_CALLER: ContextVar[str | None] = ContextVar("deeplite_like_caller", default=None)


@contextlib.contextmanager
def called_as(name: str) -> Iterator[str]:
    """Name the entry point for the block; an outer name, if set, is kept. Yields the name in force.

    Which public entry point the user called (``called_as``), so that deep errors name it: the
    errors of ``count_ops`` under ``compute_network_status`` say "check the inputs given to
    compute_network_status", not the name of an inner function. The outermost entry point wins.
    """
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


#: The switches of the built-in profiler functions (``compute_network_status(backward=True, ...)``).
PROFILER_FLAGS = ("backward", "meta", "causal_half", "include_weights", "training")

#: The share of available memory inputs may take (the rest is left to activations).
MEMORY_SHARE = 0.5


def _got(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def check_flag(value: Any, argument: str, api: str) -> bool:
    """``value`` as a bool: ``True``/``False`` (or a numpy bool, or the ints 0 and 1); ``TypeError`` otherwise.

    A string is refused: ``backward='no'`` is truthy, and would silently mean yes.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(value)
    if type(value).__name__ in ("bool_", "bool") and hasattr(value, "item"):  # numpy.bool_ without numpy
        return bool(value.item())
    raise TypeError(f"{api}({argument}=...) must be True or False, got {_got(value)}")


def check_batch_size(value: Any, argument: str = "batch_size", api: str = "", allow_none: bool = True) -> int | None:
    """``value`` as an int >= 1 (``None`` passes when ``allow_none``); ``TypeError``/``ValueError`` otherwise."""
    if value is None and allow_none:
        return None
    return check_positive_int(value, argument, api, "samples per batch")


def check_positive_int(value: Any, argument: str, api: str = "", unit: str = "") -> int:
    """``value`` as an int >= 1 (``unit`` says what it counts); ``TypeError``/``ValueError`` otherwise."""
    where = f"{api}({argument}=...)" if api else argument
    unit = f" ({unit})" if unit else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{where} must be an int >= 1{unit}, got {_got(value)}")
    if value < 1:
        raise ValueError(f"{where} must be >= 1{unit}, got {int(value)}")
    return int(value)


def check_seconds(value: Any, argument: str = "min_run_time", api: str = "") -> float:
    """``value`` as a finite float > 0 (seconds); ``TypeError`` for a non-number (``'1'``), ``ValueError``
    for ``nan``, ``inf`` (a run that never ends) and values <= 0."""
    where = f"{api}({argument}=...)" if api else argument
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a number of seconds (a float > 0), got {_got(value)}")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{where} must be > 0 seconds and finite, got {number!r}")
    return number


def check_profiler_options(options: Any, api: str) -> None:
    """Check the built-in functions' shared options among ``options`` (a mapping of keyword arguments):
    the switches (``PROFILER_FLAGS``), ``batch_size`` and ``min_run_time``. Other options pass."""
    for name in PROFILER_FLAGS:
        if name in options:
            check_flag(options[name], name, api)
    if "batch_size" in options:
        check_batch_size(options["batch_size"], "batch_size", api)
    if "min_run_time" in options:
        check_seconds(options["min_run_time"], "min_run_time", api)


def check_batch_agrees(batch_size: int | None, shapes: Any, api: str) -> None:
    """Refuse a ``batch_size`` that is no dimension of any input: the figures would be labelled with the wrong size.

    ``shapes``: the shapes of the input tensors (leading dimension first). A ``batch_size`` equal
    to any of their dimensions passes (a sequence-first input ``(L, N, E)`` has its batch in
    dimension 1); one that is none of them cannot be the batch that runs.
    """
    shapes = [tuple(int(d) for d in shape) for shape in shapes if len(shape)]
    if batch_size is None or not shapes or any(batch_size in shape for shape in shapes):
        return
    actual = shapes[0][0]
    shown = ", ".join("x".join(map(str, shape)) for shape in shapes)
    raise ValueError(f"{api}(batch_size={batch_size}) disagrees with the inputs ({shown}): "
                     f"no input has {batch_size} samples, so the figures would be those of batch {actual}, labelled "
                     f"batch {batch_size}. Pass inputs with {batch_size} samples, or leave batch_size out")


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation here (Linux ``MemAvailable``), or ``None`` if unknown.

    ``available_memory`` says how much a new allocation may take here, so that an input resized to
    a huge batch is refused with its estimate instead of dying in the allocator.
    """
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the value is in kB (KiB)
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):  # available pages, else all of them (macOS)
        try:
            return os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):  # not POSIX, or the name is unknown here
            continue
    return None


def check_fits_in_memory(nbytes: int, what: str, argument: str, available: int | None = None) -> None:
    """``MemoryError`` naming ``argument`` when ``nbytes`` exceed ``MEMORY_SHARE`` of the memory available here.

    ``what`` says how the estimate was made (``'10**12 samples of 16 B each'``); ``available``
    defaults to ``available_memory()`` (``None``: unknown, nothing is refused). Raised before
    anything is allocated.
    """
    available = available_memory() if available is None else available
    if available is None or nbytes <= MEMORY_SHARE * available:
        return
    raise MemoryError(f"{argument}: the inputs alone would take {format_bytes(nbytes)} ({what}), more than half of "
                      f"the {format_bytes(available)} of memory available here; refused before allocating them. "
                      "MACs and FLOPs grow linearly with the batch size: profile a batch that fits and scale")
