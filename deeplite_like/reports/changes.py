"""What changed between a reference model's metric and another model's, in words.

``describe_change(reference, other)`` says ``'4.80x smaller'``, ``'2.10x slower'``,
``'-0.70 pts'``: the direction is always in the words, never in a bare ratio whose meaning
depends on argument order.

* ``LOWER_IS_BETTER`` / ``HIGHER_IS_BETTER`` compare by ratio: the factor in the text is the
  larger value over the smaller one (always >= 1), followed by the metric's
  ``DECREASE_WORD`` or ``INCREASE_WORD``.
* ``DIFFERENCE`` (higher is better) / ``DIFFERENCE_LOWER`` (lower is better) compare by
  ``other - reference``: in points for a percentage, else in the metric's units, scaled.
* ``NONE`` shows the difference and never judges.
* A measured value with a spread (a latency's interquartile range, ``noise_interval``) is
  ``'same (within noise)'`` when the two ranges overlap: only a difference larger than the
  noise earns a verdict.

Values are compared in the reference's base unit. When a user-defined metric declares another
``BASE_UNIT`` for the same ``NAME`` (``ms`` vs ``s``, ``MB`` vs ``MiB``), the other value is
converted first (:func:`conversion_factor`); units that cannot be related give an ``n/a`` text.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Literal

from deeplite_like.metrics.status_keys import Comparative, Metric, metric_comparative
from deeplite_like.units import format_number, pick_scale

Verdict = Literal["better", "worse", "same", "n/a"]

NOT_COMPUTED = "not computed"
NOT_MEASURED = "not measured"
WITHIN_NOISE = "same (within noise)"


def _number(value: Any) -> float | None:
    value = getattr(value, "value", value)  # a detail may be a Metric (ExecutionTime(iqr))
    return float(value) if is_number(value) else None


def noise_interval(metric: Metric | None) -> tuple[float, float] | None:
    """The spread of a measured value, in its base unit: ``(low, high)`` or ``None`` (exact).

    Read from the value's details: ``interval`` (``(low, high)``), else the quartiles ``q1`` and
    ``q3``, else ``median +/- iqr / 2``. Counts and sizes have none: they are exact.
    """
    if metric is None or not is_number(metric.value):
        return None
    details = metric.details or {}
    interval = details.get("interval")
    given = interval if isinstance(interval, (tuple, list)) and len(interval) == 2 else (None, None)
    for low, high in (given, (details.get("q1"), details.get("q3"))):
        low, high = _number(low), _number(high)
        if low is not None and high is not None:
            return (min(low, high), max(low, high))
    iqr = _number(details.get("iqr"))
    if iqr is not None:
        return (float(metric.value) - iqr / 2, float(metric.value) + iqr / 2)
    return None


@dataclass(frozen=True)
class Change:
    """A change from a reference value, in words.

    Attributes:
        text: ``'4.80x smaller'``, ``'-0.70 pts'``, ``'same'``, ``'not computed'``, ``'n/a (...)'``.
        verdict: ``'better'``, ``'worse'``, ``'same'`` or ``'n/a'`` (not judged or not comparable).
        ratio: ``other / reference`` in the reference's base unit (``< 1`` means other is
            lower); ``None`` when undefined (not numeric, reference 0, not computed).
        difference: ``other - reference`` in the reference's base unit, or ``None``.
    """

    text: str
    verdict: Verdict
    ratio: float | None = None
    difference: float | None = None


# --------------------------------------------------------------------------- unit conversion
# Used only when two metrics with the same NAME declare different BASE_UNITs. A unit is read
# as an optional prefix and a base ("ms" = m + s, "GMACs" = G + MACs, "MiB" = Mi + B), with an
# optional "/denominator" ("samples/ms"). Two units convert when they share a base.
#
# "%" and "pts" are the same unit; a percentage and a unitless fraction are NOT converted: an
# empty unit says nothing about the scale (0.768 or 76.8), so guessing could be off by 100x.

_DECIMAL_PREFIXES = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY_PREFIXES = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
# Sub-unit prefixes apply to seconds only: read generally they would relate "mAP" to "AP".
_TIME_PREFIXES = {"m": 1e-3, "u": 1e-6, "\u00b5": 1e-6, "\u03bc": 1e-6, "n": 1e-9}
_ALIASES = {
    "byte": ("B", 1.0), "bytes": ("B", 1.0),
    "sec": ("s", 1.0), "secs": ("s", 1.0), "second": ("s", 1.0), "seconds": ("s", 1.0),
    "min": ("s", 60.0), "h": ("s", 3600.0),
    "pts": ("%", 1.0), "percent": ("%", 1.0),
}
PERCENT_UNITS = frozenset({"%", "pts", "percent"})


def _readings(unit: str) -> dict[str, float]:
    """Every (base -> factor to base) reading of a unit without '/': ``'ms'`` -> ``{ms: 1, s: 1e-3}``."""
    unit = unit.strip()
    if unit in _ALIASES:
        base, factor = _ALIASES[unit]
        return {base: factor}
    readings = {unit: 1.0}
    for prefix, factor in _BINARY_PREFIXES.items():
        if unit == prefix + "B":
            return {unit: 1.0, "B": factor}  # "MiB" is not also "M" + "iB"
    for prefix, factor in _DECIMAL_PREFIXES.items():
        if unit.startswith(prefix) and len(unit) > len(prefix):
            base, base_factor = _ALIASES.get(unit[len(prefix):], (unit[len(prefix):], 1.0))
            readings[base] = factor * base_factor
    for prefix, factor in _TIME_PREFIXES.items():
        if unit == prefix + "s":
            readings["s"] = factor
    return readings


def _fraction_readings(unit: str) -> dict[tuple[str, str], float]:
    numerator, _, denominator = unit.partition("/")
    return {(num_base, den_base): num_factor / den_factor
            for num_base, num_factor in _readings(numerator).items()
            for den_base, den_factor in _readings(denominator).items()}


def conversion_factor(from_unit: str, to_unit: str) -> float | None:
    """The factor turning a value in ``from_unit`` into ``to_unit``, or ``None`` if unrelated.

    ``conversion_factor('ms', 's') == 1e-3``; ``conversion_factor('MiB', 'MB') == 1.048576``;
    ``conversion_factor('GMACs', 'MACs') == 1e9``; ``conversion_factor('%', '') is None``.
    """
    if from_unit.strip() == to_unit.strip():
        return 1.0
    source, target = _fraction_readings(from_unit), _fraction_readings(to_unit)
    factors = {source[base] / target[base] for base in source.keys() & target.keys()}
    if len(factors) != 1:  # nothing shared, or two readings that disagree: refuse to guess
        return None
    return factors.pop()


def is_number(value: Any) -> bool:
    """True for real numbers (numpy scalars included), False for bools, strings, None, arrays."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _plain(value: numbers.Real) -> int | float:
    return int(value) if isinstance(value, numbers.Integral) else float(value)


# --------------------------------------------------------------------------- wording
_RATIO_KINDS = (Comparative.LOWER_IS_BETTER, Comparative.HIGHER_IS_BETTER)


def _signed(number_text: str, negative: bool) -> str:
    return ("-" if negative else "+") + number_text


def _points_text(diff: float) -> str:
    """``'-0.70 pts'``; a non-zero change too small for 2 decimals keeps 2 significant digits."""
    text = f"{abs(diff):.2f}"
    if float(text) == 0 and diff != 0:
        text = format_number(abs(float(diff)), 2)
    return f"{_signed(text, diff < 0)} pts"


def _difference_text(diff: int | float, metric: Metric) -> str:
    """``other - reference`` in the metric's units, scaled (``'+30.00 us'``, ``'-0.03000 loss'``)."""
    if metric.BASE_UNIT in PERCENT_UNITS:
        return _points_text(diff)
    scale = pick_scale(abs(diff), metric.UNIT_KIND)
    magnitude = abs(diff) if scale.factor == 1 else abs(diff) / scale.factor
    return f"{_signed(format_number(magnitude), diff < 0)} {scale.prefix}{metric.BASE_UNIT}".rstrip()


def _ratio_change(ref: int | float, value: int | float, metric: Metric, ratio: float | None,
                  difference: int | float) -> Change:
    if ref == 0:
        return Change("n/a (reference is 0)", "n/a", ratio, difference)
    if value == 0:
        return Change("n/a (compared value is 0)", "n/a", ratio, difference)
    if ref < 0 or value < 0:
        return Change("n/a (negative values have no ratio)", "n/a", ratio, difference)
    went_up = value > ref
    factor = max(value, ref) / min(value, ref)
    word = metric.INCREASE_WORD if went_up else metric.DECREASE_WORD
    better = went_up == (metric_comparative(metric) is Comparative.HIGHER_IS_BETTER)
    # Two decimals; from 1000x on the decimals say nothing and commas help: '278,350,000x'.
    factor_text = f"{factor:.2f}" if factor < 1000 else f"{round(factor):,}"
    return Change(f"{factor_text}x {word}", "better" if better else "worse", ratio, difference)


def describe_change(reference: Metric | None, other: Metric | None) -> Change:
    """Describe ``other`` against ``reference`` with the reference metric's rules and words.

    Either may be ``None`` or not computed (a key computed for some models only): the result is
    ``'not computed'`` with verdict ``'n/a'``. Never raises for values that cannot be compared;
    the text says why (``'n/a (units '%' and '' differ)'``).
    """
    for role, metric in (("reference", reference), ("other", other)):
        if metric is not None and not isinstance(metric, Metric):
            raise TypeError(f"describe_change: {role} must be a Metric (or None), got "
                            f"{type(metric).__name__}; only Metric status keys are compared")
    change = _describe(reference, other)
    incomplete = [m for m in (reference, other) if m is not None and (m.details or {}).get("untracked")]
    if incomplete and change.verdict != "n/a":
        # a count that misses operators run without a formula is a lower bound: no verdict on it
        return Change(f"{change.text} (incomplete count)", "n/a", change.ratio, change.difference)
    return change


def _describe(reference: Metric | None, other: Metric | None) -> Change:
    if reference is None or other is None or reference.value is None or other.value is None:
        unmeasured = any(m is not None and (m.details or {}).get("not_measured") for m in (reference, other))
        return Change(NOT_MEASURED if unmeasured else NOT_COMPUTED, "n/a")
    ref, value = reference.value, other.value
    if not (is_number(ref) and is_number(value)):
        if isinstance(ref, str) and isinstance(value, str) and ref == value:
            return Change("same", "same")
        return Change("n/a (not a number)", "n/a")
    factor = conversion_factor(other.BASE_UNIT, reference.BASE_UNIT)
    if factor is None:
        return Change(f"n/a (units {reference.BASE_UNIT!r} and {other.BASE_UNIT!r} differ)", "n/a")
    ref, value = _plain(ref), _plain(value)
    if factor != 1:
        value = value * factor
    if value == ref:  # both 0 included; inf == inf too
        return Change("same", "same", 1.0 if ref != 0 and math.isfinite(ref) else None, 0)
    if not (math.isfinite(ref) and math.isfinite(value)):
        return Change("n/a (not finite)", "n/a")
    difference = value - ref
    ratio = value / ref if ref != 0 else None
    spreads = noise_interval(reference), noise_interval(other)
    if spreads[0] is not None and spreads[1] is not None and factor == 1 \
            and spreads[0][0] <= spreads[1][1] and spreads[1][0] <= spreads[0][1]:
        # the interquartile ranges overlap: the measured difference is not told apart from noise
        return Change(WITHIN_NOISE, "same", ratio, difference)
    comparative = metric_comparative(reference)
    if comparative is None:
        return Change(f"n/a (unknown comparative {reference.get_comparative()!r})", "n/a", ratio, difference)
    if comparative in _RATIO_KINDS:
        return _ratio_change(ref, value, reference, ratio, difference)
    text = _difference_text(difference, reference)
    if comparative is Comparative.NONE:
        return Change(text, "n/a", ratio, difference)
    better = (difference > 0) == (comparative is Comparative.DIFFERENCE)
    return Change(text, "better" if better else "worse", ratio, difference)


__all__ = ["Change", "NOT_COMPUTED", "PERCENT_UNITS", "Verdict", "conversion_factor", "describe_change",
           "is_number"]
