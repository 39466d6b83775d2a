"""The options a status value was measured with, and how reports state them (no framework imports).

A value means something only with its options: MACs at batch 8 are not MACs at batch 1, a
latency on 2 threads is not a latency on 1. Every computed ``StatusKey`` keeps
``options``: the arguments its function ran with, defaults included, with what actually ran
filled in where the argument left it open (``num_threads=None`` -> the thread count used, read
from the value's details). Reports state the options once, in a header line, and mark any
value whose options differ from the others'.
"""
from __future__ import annotations

import enum
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ORDER", "common_options", "describe_options", "measured_with", "option_value"]

#: Options reports show first, in this order; any other option follows, by name.
ORDER = ("batch_size", "split", "device", "num_threads", "dtype", "mode", "backward", "meta", "causal_half",
         "include_weights", "min_run_time")

#: Options a ``None`` leaves open, and the detail that says what ran instead.
_RESOLVED_FROM_DETAILS = ("batch_size", "device", "num_threads", "split")


def option_value(value: Any) -> Any:
    """A JSON-able, comparable form of an option's value (``'cpu'`` for ``Device.CPU``, a function's name)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return str(value.value) if isinstance(value.value, str) else value.name.lower()
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if callable(value):
        return getattr(value, "__qualname__", None) or type(value).__name__
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def measured_with(arguments: Mapping[str, Any], details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options of one computed value: its function's arguments (defaults included), made
    displayable, with ``None`` replaced by what the details say ran (else left out)."""
    details = details or {}
    options: dict[str, Any] = {}
    for name, value in arguments.items():
        if value is None and name in _RESOLVED_FROM_DETAILS and details.get(name) is not None:
            value = details[name]
        value = option_value(value)
        if name == "device" and isinstance(value, str) and value.lower() in ("cpu:0", "/cpu:0"):
            value = "cpu"  # TensorFlow's name for the one CPU device
        if value is not None:
            options[name] = value
    return dict(sorted(options.items(), key=lambda kv: (ORDER.index(kv[0]) if kv[0] in ORDER else len(ORDER),
                                                         kv[0])))


def common_options(all_options: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], set[str]]:
    """``(options shared by every value that has them, names whose values differ between values)``.

    An option only some values depend on (``num_threads``: the latency, not the MACs) is shared
    when every value that has it agrees.
    """
    seen: dict[str, list[Any]] = {}
    for options in all_options:
        for name, value in options.items():
            values = seen.setdefault(name, [])
            if value not in values:
                values.append(value)
    shared = {name: values[0] for name, values in seen.items() if len(values) == 1}
    differing = {name for name, values in seen.items() if len(values) > 1}
    ordered = sorted(shared, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    return {name: shared[name] for name in ordered}, differing


#: Option values a text header leaves out: a switch that is off, the default footprint, the
#: timing budget (JSON and CSV keep every option).
_UNREMARKABLE = {"include_weights": True, "min_run_time": None}


def describe_options(options: Mapping[str, Any]) -> str:
    """``'batch_size=1, split=test, num_threads=1, backward'``; ``''`` for none.

    A switch that is on is named alone (``backward``, ``meta``), one that is off is left out.
    """
    parts = []
    for name, value in options.items():
        if name in _UNREMARKABLE and (_UNREMARKABLE[name] is None or _UNREMARKABLE[name] == value):
            continue
        if value is False:
            continue
        parts.append(name if value is True else f"{name}={value}")
    return ", ".join(parts)
