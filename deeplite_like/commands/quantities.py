"""Quantities written on the command line, parsed strictly: ``2G`` MACs, ``25M`` params, ``100MiB``,
``5ms``, ``2%``.

Each parser returns the value in base units (a count, bytes, seconds, a fraction) or raises
``argparse.ArgumentTypeError`` saying what was wrong and how to write it. Nothing is guessed:
a size or a time without its unit, ``m`` (milli) where ``M`` (millions) was surely meant, and
a tolerance without ``%`` are refused.
"""
from __future__ import annotations

import argparse
import math
import re

_NUMBER = r"(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
COUNT_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
BYTE_UNITS = {"B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
              "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
SECOND_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    match = re.fullmatch(_NUMBER + r"\s*(?P<unit>[A-Za-z\u00b5%/]*)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as {what}; write it like {example}")
    value = float(match.group("number"))
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; write it like {example}")
    return value, match.group("unit")


def parse_count(text: str, unit: str = "") -> int:
    """``'2G'`` -> 2_000_000_000; ``'1.5M'``, ``'25M'``, ``'2e9'``, ``'2GMACs'`` (``unit`` after the prefix).

    Prefixes are SI (10**3 steps): k (or K), M, G, T.
    """
    example = f"2G{unit}, 25M, 1.5k or 2000000"
    value, suffix = _split(text, "a count", example)
    if unit and suffix.endswith(unit):
        suffix = suffix[:-len(unit)]
    if suffix == "m":
        raise argparse.ArgumentTypeError(f"{text!r}: 'm' is milli; write M for millions (e.g. {value:g}M)")
    if suffix not in COUNT_PREFIXES:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown suffix {suffix!r}; use k, M, G or T "
                                         f"(e.g. {example})")
    return round(value * COUNT_PREFIXES[suffix])


def parse_bytes(text: str) -> int:
    """``'100MiB'`` -> 104_857_600; ``'25MB'`` -> 25_000_000 (MB is 10**6, MiB 2**20); the unit is required."""
    example = "100MiB, 25MB or 512KiB"
    value, suffix = _split(text, "a size", example)
    if suffix == "":
        raise argparse.ArgumentTypeError(f"{text!r}: a size needs its unit (B, KiB, MiB, GiB, kB, MB, GB), "
                                         f"e.g. {example}")
    if suffix not in BYTE_UNITS:
        close = {unit.lower(): unit for unit in BYTE_UNITS}.get(suffix.lower())
        raise argparse.ArgumentTypeError(f"{text!r}: unknown size unit {suffix!r}"
                                         + (f" (did you mean {close!r}?)" if close else "")
                                         + f"; use one of {', '.join(BYTE_UNITS)}")
    return round(value * BYTE_UNITS[suffix])


def parse_seconds(text: str) -> float:
    """``'5ms'`` -> 0.005; ``'200us'``, ``'1.5s'``; the unit is required."""
    example = "5ms, 200us or 1.5s"
    value, suffix = _split(text, "a time", example)
    if suffix == "":
        raise argparse.ArgumentTypeError(f"{text!r}: a time needs its unit (s, ms, us, ns), e.g. {example}")
    if suffix not in SECOND_UNITS:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown time unit {suffix!r}; use s, ms, us or ns")
    return value * SECOND_UNITS[suffix]


def parse_percent(text: str) -> float:
    """``'2%'`` -> 0.02; the ``%`` is required (is ``2`` two percent or two hundred?)."""
    value, suffix = _split(text, "a percentage", "2% or 0.5%")
    if suffix != "%":
        raise argparse.ArgumentTypeError(f"{text!r}: write the tolerance as a percentage, e.g. 2% or 0.5%")
    return value / 100.0


def positive(parse, what: str):
    """An argparse type: ``parse``, and the value must be > 0."""
    def parse_positive(text: str):
        value = parse(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be more than 0")
        return value

    parse_positive.__name__ = parse.__name__
    return parse_positive
