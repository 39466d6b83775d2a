"""How profile figures are written: scaled with SI prefixes (``as_string=True``) or raw.

Counts use 10**3 prefixes (``1.235 kMACs``, ``22.36 GFLOPs``), durations s/ms/us/ns, rates
``FLOP/s``. Raw mode writes the stored value itself (ints as ints, seconds as seconds).
"""
from __future__ import annotations

from deeplite_like.units import format_number, pick_scale


def count(value: int | float | None, unit: str = "", as_string: bool = True) -> str:
    """``'144 MACs'``, ``'1.235 kMACs'``, ``'61.71 k'`` (no unit); raw: ``'144'``."""
    if value is None:
        return "n/a"
    if not as_string:
        return str(value)
    scale = pick_scale(value, "count")
    if scale.factor == 1:
        text = str(int(value)) if float(value).is_integer() else format_number(float(value))
    else:
        text = format_number(value / scale.factor)
    return f"{text} {scale.prefix}{unit}".rstrip()


def seconds(value: float | None, as_string: bool = True) -> str:
    """``'12.35 ms'``; raw: seconds (``'0.01235'``); ``'n/a'`` when not measured."""
    return _prefixed(value, "seconds", "s", as_string)


def rate(value: float | None, as_string: bool = True) -> str:
    """Achieved FLOP/s: ``'1.83 TFLOP/s'``; raw: FLOP/s; ``'n/a'`` when not timed."""
    return _prefixed(value, "rate", "FLOP/s", as_string)


def _prefixed(value: float | None, kind: str, unit: str, as_string: bool) -> str:
    if value is None:
        return "n/a"
    if not as_string:
        return f"{value:.6g}"
    scale = pick_scale(value, kind)
    return f"{format_number(value / scale.factor)} {scale.prefix}{unit}"


def share(part: float | None, whole: float | None) -> str:
    """``'66.67%'`` of the whole; ``'-'`` when either is missing or the whole is 0."""
    if part is None or not whole:
        return "-"
    return f"{100.0 * part / whole:.2f}%"
