"""Status keys: the named slots a profiler fills, and the displayable ``Metric`` kind of them.

A ``StatusKey`` is a fancier dict entry: its class attribute ``NAME`` is the key, its instance
``value`` the computed result (``None`` until computed). A ``Metric`` also knows how to present
itself: a friendly name, a description, units, display scaling and which direction is better.

Values are raw, in base units: counts as ints, bytes as ints, seconds as floats. Only
``Metric.get_value`` / ``Metric.get_units`` scale them for display.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

from deeplite_like.units import format_number, pick_scale


class Comparative(enum.Enum):
    """Which direction of change is an improvement when two models are compared."""

    LOWER_IS_BETTER = "lower is better"  # size, MACs, latency
    HIGHER_IS_BETTER = "higher is better"  # throughput, accuracy as a ratio
    DIFFERENCE = "difference"  # compared by difference, e.g. accuracy in points; higher is better
    DIFFERENCE_LOWER = "difference, lower is better"  # compared by difference, e.g. a loss
    NONE = "none"  # shown side by side, never judged


@dataclass(frozen=True)
class Detailed:
    """A computed value together with details a report may show (spread, per-sample, ...).

    A ``ProfilerFunction`` may return ``Detailed(value, {...})`` wherever it returns a value; the
    profiler stores ``value`` as the status value and the dict as ``StatusKey.details``.
    """

    value: Any
    details: dict = field(default_factory=dict)


class StatusKey:
    """A named slot in a profiler's status. Subclasses set the class attribute ``NAME``."""

    NAME: ClassVar[str] = ""

    def __init__(self, value: Any = None, details: dict | None = None) -> None:
        if not self.NAME:
            raise TypeError(f"{type(self).__name__} must set the class attribute NAME")
        self.value = value
        self.details: dict = dict(details or {})

    @property
    def computed(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(NAME={self.NAME!r}, value={self.value!r})"


class Metric(StatusKey):
    """A status key that is displayed in reports and compared between models.

    Subclasses set ``NAME``, ``FRIENDLY_NAME``, ``DESCRIPTION``, ``BASE_UNIT``, ``UNIT_KIND``
    (one of ``count``, ``bytes``, ``seconds``, ``rate``, ``plain``), ``COMPARATIVE`` and the
    words used when a value goes down or up against a reference (``DECREASE_WORD``,
    ``INCREASE_WORD``: ``'smaller'``/``'larger'``, ``'faster'``/``'slower'``, ...).
    """

    FRIENDLY_NAME: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""
    BASE_UNIT: ClassVar[str] = ""
    UNIT_KIND: ClassVar[str] = "plain"
    COMPARATIVE: ClassVar[Comparative] = Comparative.NONE
    DECREASE_WORD: ClassVar[str] = "lower"
    INCREASE_WORD: ClassVar[str] = "higher"

    @classmethod
    def description(cls) -> str:
        return cls.DESCRIPTION

    @classmethod
    def friendly_name(cls) -> str:
        return cls.FRIENDLY_NAME or cls.NAME.replace("_", " ").capitalize()

    def get_comparative(self) -> Comparative:
        return self.COMPARATIVE

    def display_scale(self, value: Any = None):
        """The scale used to display ``value`` (default: this metric's own value)."""
        return pick_scale(self.value if value is None else value, self.UNIT_KIND)

    def get_value(self, scale=None) -> Any:
        """The value scaled for display (``4.1`` for 4.1e9 MACs shown in GMACs)."""
        if not isinstance(self.value, (int, float)) or isinstance(self.value, bool):
            return self.value
        scale = scale or self.display_scale()
        if scale.factor == 1 and isinstance(self.value, int):
            return self.value
        return self.value / scale.factor

    def get_units(self, scale=None) -> str:
        """The display unit matching :meth:`get_value` (``'GMACs'``, ``'MiB'``, ``'ms'``)."""
        scale = scale or self.display_scale()
        return f"{scale.prefix}{self.BASE_UNIT}"

    def format(self, scale=None) -> str:
        """``'4.100 GMACs'``: scaled value and unit, or ``'not computed'``."""
        if self.value is None:
            return "not computed"
        value = self.get_value(scale)
        units = self.get_units(scale)
        return f"{format_number(value)} {units}".rstrip()
