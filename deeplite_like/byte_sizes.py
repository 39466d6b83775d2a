"""Parse a memory size written by a person: ``"80GiB"``, ``"24 GB"``, ``"512MiB"``, ``"1e9"``."""
from __future__ import annotations

import re

__all__ = ["parse_bytes"]

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
