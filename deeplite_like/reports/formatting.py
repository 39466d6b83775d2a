"""Cell formatting shared by the reports: scaled numbers, details, JSON-ready copies, strict JSON text
and safe CSV cells.

Presentation only: nothing here measures, and raw values are never changed in place.

Two rules every file we write follows (docs/reliability.rst, "Reports are safe to open"):

* **JSON is strict** (RFC 8259): a float that is not finite is written as the *string*
  ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, the spelling of the protobuf JSON mapping, never
  as the bare ``NaN`` / ``Infinity`` tokens that Python's ``json`` emits by default and that
  strict readers (``jq``, browsers' ``JSON.parse``, Go, Rust's serde) refuse. ``strict_json``.
* **CSV cells cannot be formulas**: a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or
  a carriage return (a model or module name such as ``=HYPERLINK(...)``) is written with a
  leading ``'``, as OWASP advises against spreadsheet formula injection; numbers are written as
  numbers (``-3`` stays a number). ``csv_cell``.
"""
from __future__ import annotations

import enum
import json
import math
import numbers
from collections.abc import Mapping
from typing import Any

from deeplite_like.metrics.status_keys import Metric
from deeplite_like.reports.changes import NOT_COMPUTED, is_number
from deeplite_like.units import Scale, format_number, scaled, scaled_value


def format_cell(value: Any) -> str:
    """A displayed cell: numbers with 4 significant digits, ``None`` as empty, others as text."""
    if value is None:
        return ""
    if is_number(value):
        return format_number(int(value) if isinstance(value, numbers.Integral) else float(value))
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(format_cell(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def format_quantity(value: float, kind: str, unit: str, unit_is_word: bool = False) -> str:
    """``'1.234 ms'`` for 0.001234 of ``unit`` ``'s'``: the value scaled to its unit kind's prefix.

    A unit that is a word (``params``) takes its prefix apart, as the status tables show it:
    ``'78.04 k params'``, not ``'78.04 kparams'``.
    """
    number, shown_unit = scaled(float(value), kind, unit)
    if unit_is_word and shown_unit != unit:
        shown_unit = f"{shown_unit[:len(shown_unit) - len(unit)]} {unit}"
    return f"{format_number(number)} {shown_unit}".rstrip()


def format_seconds(value: Any) -> str:
    """A table cell of seconds (``'1.234 ms'``); empty for ``None``."""
    return "" if value is None else format_quantity(value, "seconds", "s")


def format_in_scale(value: Any, scale: Scale) -> str:
    """``'42.00'`` for 44040192 bytes in the MiB scale; ``'not computed'`` for ``None``."""
    if value is None:
        return NOT_COMPUTED
    return format_cell(scaled_value(value, scale))


def format_details(details: Mapping[str, Any]) -> str:
    """``'buffers: 1.000 KiB, runs: 100'``: a ``Metric`` detail formats itself with its unit;
    a plain number has no unit to show and is written with 4 significant digits."""
    return ", ".join(f"{key}: {value.format() if isinstance(value, Metric) else format_cell(value)}"
                     for key, value in details.items())


def jsonable(value: Any) -> Any:
    """A copy of ``value`` made of JSON types only: numpy scalars become ints/floats, tuples
    lists, dict keys strings, a ``Metric`` ``{'value', 'unit'}``, anything else its ``str``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, Metric):
        return {"value": jsonable(value.value), "unit": value.BASE_UNIT}
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(item) for item in value]
    if hasattr(value, "tolist"):  # numpy / framework arrays, without importing them
        return jsonable(value.tolist())
    return str(value)


#: Non-finite floats in strict JSON: the protobuf JSON mapping's strings.
NON_FINITE_JSON = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def finite_json_value(value: Any) -> Any:
    """A copy of ``value`` (JSON types) with every non-finite float replaced by its string (``NON_FINITE_JSON``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE_JSON[repr(value)]
    if isinstance(value, Mapping):
        return {key: finite_json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json_value(item) for item in value]
    return value


def strict_json(data: Any, indent: int | None = 2) -> str:
    """``data`` as strict JSON text: non-finite floats as ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``.

    Every JSON report we write goes through here (``Report.to_json``, the command line's JSON).
    """
    return json.dumps(finite_json_value(data), indent=indent, allow_nan=False)


def csv_cell(value: Any) -> Any:
    """A raw value for a CSV cell: ``None`` empty, nested values as compact JSON text, a text cell that a
    spreadsheet would run as a formula (``FORMULA_STARTS``) prefixed with ``'``; numbers unchanged."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(finite_json_value(value), separators=(",", ":"), allow_nan=False)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
