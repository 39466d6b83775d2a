"""Cell formatting shared by the reports: scaled numbers, details, JSON-ready copies.

Presentation only: nothing here measures, and raw values are never changed in place.
"""
from __future__ import annotations

import enum
import json
import numbers
from collections.abc import Mapping
from typing import Any

from deeplite_like.changes import NOT_COMPUTED, is_number
from deeplite_like.status import Metric
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


def format_quantity(value: float, kind: str, unit: str) -> str:
    """``'1.234 ms'`` for 0.001234 of ``unit`` ``'s'``: the value scaled to its unit kind's prefix."""
    number, shown_unit = scaled(float(value), kind, unit)
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


def csv_cell(value: Any) -> Any:
    """A raw value for a CSV cell: ``None`` empty, nested values as compact JSON text."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value
