"""Display scaling and reading sizes. Values are stored raw (counts, bytes, seconds); only display scales them.

Counts use SI prefixes (k, M, G, T = 10**3 ...); bytes use binary prefixes
(KiB, MiB, GiB = 2**10 ...); durations use s, ms, us, ns. ``parse_bytes`` reads a memory size
written by a person (``"80GiB"``, ``"24 GB"``, ``"512MiB"``, ``"1e9"``).
"""
from __future__ import annotations

import math
import numbers
import re
from typing import Any, NamedTuple


class Scale(NamedTuple):
    """A display scale: divide a raw value by ``factor`` and label it with ``prefix``."""

    factor: float
    prefix: str


SI_SCALES = (Scale(1e12, "T"), Scale(1e9, "G"), Scale(1e6, "M"), Scale(1e3, "k"), Scale(1.0, ""))
BINARY_SCALES = (Scale(2.0**40, "Ti"), Scale(2.0**30, "Gi"), Scale(2.0**20, "Mi"), Scale(2.0**10, "Ki"), Scale(1.0, ""))
TIME_SCALES = (Scale(1.0, ""), Scale(1e-3, "m"), Scale(1e-6, "u"), Scale(1e-9, "n"))

UNIT_KINDS = ("count", "bytes", "seconds", "rate", "plain")


def pick_scale(value: float | None, kind: str) -> Scale:
    """Choose the largest scale of ``kind`` that keeps ``|value| >= 1`` (or the smallest one)."""
    if kind not in UNIT_KINDS:
        raise ValueError(f"unknown unit kind {kind!r}; expected one of {UNIT_KINDS}")
    if kind == "plain" or value is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return Scale(1.0, "")
    scales = {"count": SI_SCALES, "rate": SI_SCALES, "bytes": BINARY_SCALES, "seconds": TIME_SCALES}[kind]
    magnitude = abs(value)
    if magnitude == 0 or math.isnan(magnitude) or math.isinf(magnitude):
        return Scale(1.0, "") if kind != "seconds" else TIME_SCALES[1]
    for scale in scales:
        if magnitude >= scale.factor:
            return scale
    return scales[-1]


def scaled_value(value: Any, scale: Scale) -> Any:
    """``value / scale.factor`` for real numbers (an int stays an int at factor 1); others unchanged.

    A display value: rounded to 12 significant digits, which no 4-digit display can show.
    """
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return value
    if scale.factor == 1:
        return int(value) if isinstance(value, numbers.Integral) else float(value)
    # 12 significant digits drop the noise of the division (0.0021 / 1e-3 = 2.0999999999999996);
    # the exact raw value is always reported beside it.
    return float(f"{float(value) / scale.factor:.12g}")


def scaled(value: float, kind: str, base_unit: str) -> tuple[float, str]:
    """Return ``(value / factor, prefixed unit)``, e.g. ``(4.1, 'GMACs')`` for 4.1e9 MACs."""
    scale = pick_scale(value, kind)
    return value / scale.factor, f"{scale.prefix}{base_unit}"


def format_number(value: float, digits: int = 4) -> str:
    """Format a displayed number with ``digits`` significant figures, without exponent noise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if value == 0:
        return "0"
    if math.isnan(value) or math.isinf(value):
        return str(value)
    magnitude = int(math.floor(math.log10(abs(value))))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}" if abs(value) >= 10_000 else f"{value:.{decimals}f}"


def format_bytes(n: int) -> str:
    """Human form of a byte count with binary units: ``format_bytes(3 * 2**20) == '3.000 MiB'``, ``'8 B'``."""
    value, unit = scaled(n, "bytes", "B")
    if unit == "B" and float(value).is_integer():  # a byte count below 1 KiB is a whole number: '8 B'
        return f"{int(value)} B"
    return f"{format_number(value)} {unit}"


def format_share(percent: float) -> str:
    """A share in percent with one decimal, the same in every row of a column: ``'100.0 %'``, ``'7.5 %'``."""
    return f"{percent:.1f} %"


_UNITS = {
    "": 1, "b": 1,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_bytes(text: str | int) -> int:
    """Bytes in ``text``. ``KiB/MiB/GiB/TiB`` (and bare ``K/M/G/T``, as GPU makers mean them) are
    powers of 2; ``kB/MB/GB/TB`` are powers of 10. An int is returned as is."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise ValueError(f"a memory size must be positive, got {text}")
        return text
    match = _PATTERN.match(str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"cannot read {text!r} as a memory size; write it like '80GiB', '24GB' or '512MiB'")
    number = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if number != number or number == float("inf"):  # '1e999': no size (int() would raise OverflowError)
        raise ValueError(f"{text!r} is not a finite memory size; write it like '80GiB', '24GB' or '512MiB'")
    value = int(number)
    if value <= 0:
        raise ValueError(f"a memory size must be positive, got {text!r}")
    return value
