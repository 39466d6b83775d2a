"""Arguments of the public entry points, checked before any work (no framework imports).

A wrong argument must never give a wrong number: ``backward='no'`` is truthy, ``batch_size=-5``
slices, ``min_run_time=float('inf')`` times forever, a ``batch_size`` that disagrees with the
inputs labels one batch's figures with another's size. Each check here raises ``TypeError``
(wrong kind) or ``ValueError`` (wrong value) naming the argument, the API and what to pass
instead. The entry points (``compute_network_status``/``compute_status`` through the
profilers' ``_check_options``, ``count_ops`` of Keras, ``estimate_training_memory``,
``largest_batch``, ``get_model_profile``, the timing functions) call them first.

It also knows how much memory a new allocation may take here (``available_memory``), so that an
input resized to a huge batch is refused with its estimate instead of dying in the allocator.
"""
from __future__ import annotations

import math
import numbers
import os
from pathlib import Path
from typing import Any

from deeplite_like.units import format_bytes

__all__ = ["available_memory", "check_batch_agrees", "check_batch_size", "check_fits_in_memory", "check_flag",
           "check_profiler_options", "check_seconds", "MEMORY_SHARE", "PROFILER_FLAGS"]

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
    where = f"{api}({argument}=...)" if api else argument
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{where} must be an int >= 1 (samples per batch), got {_got(value)}")
    if value < 1:
        raise ValueError(f"{where} must be >= 1 (samples per batch), got {int(value)}")
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
    """Bytes of memory available to a new allocation here (Linux ``MemAvailable``), or ``None`` if unknown."""
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
