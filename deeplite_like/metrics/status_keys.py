"""Status keys: the named slots a profiler fills, the displayable ``Metric`` kind of them, and the
options each value was measured with (no framework imports).

A ``StatusKey`` is a fancier dict entry: its class attribute ``NAME`` is the key, its instance
``value`` the computed result (``None`` until computed). A ``Metric`` also knows how to present
itself: a friendly name, a description, units, display scaling and which direction is better.

Values are raw, in base units: counts as ints, bytes as ints, seconds as floats. Only
``Metric.get_value`` / ``Metric.get_units`` scale them for display.

A value means something only with its options: MACs at batch 8 are not MACs at batch 1, a
latency on 2 threads is not a latency on 1. Every computed ``StatusKey`` keeps ``options``: the
arguments its function ran with, defaults included, with what actually ran filled in where the
argument left it open (``num_threads=None`` -> the thread count used, read from the value's
details). Reports state the options once, in a header line, and mark any value whose options
differ from the others' (``measured_with``, ``common_options``, ``describe_options``).
"""
from __future__ import annotations

import copy
import enum
import inspect
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from deeplite_like.units import format_number, pick_scale, scaled_value


class Comparative(enum.Enum):
    """Which direction of change is an improvement when two models are compared.

    deeplite-profiler's names are aliases of the same members, with its meaning: ``DIFF``
    compares by difference (``ref - value``; higher is better, as for accuracy), ``DIV`` by the
    ratio ``ref / value`` (higher is better), ``RECIPROCAL`` by ``value / ref`` (lower is better,
    as for size, MACs, time). ``Comparative('reciprocal')`` and the other lower-case names of
    deeplite's enum are accepted too.
    """

    LOWER_IS_BETTER = "lower is better"  # size, MACs, latency
    HIGHER_IS_BETTER = "higher is better"  # throughput, accuracy as a ratio
    DIFFERENCE = "difference"  # compared by difference, e.g. accuracy in points; higher is better
    DIFFERENCE_LOWER = "difference, lower is better"  # compared by difference, e.g. a loss
    NONE = "none"  # shown side by side, never judged
    # deeplite-profiler's names (aliases: ``Comparative.DIFF is Comparative.DIFFERENCE``)
    DIFF = "difference"
    DIV = "higher is better"
    RECIPROCAL = "lower is better"

    @classmethod
    def _missing_(cls, value: object) -> "Comparative | None":
        if isinstance(value, str):
            text = value.strip().lower()
            # deeplite's names ('diff', 'div', 'reciprocal', 'none') are our members' names, aliases included
            by_name = {name.lower(): member for name, member in cls.__members__.items()}
            by_value = {member.value: member for member in cls}
            return by_name.get(text) or by_value.get(text)
        return None


def as_comparative(value: Any) -> Comparative | None:
    """``value`` as a ``Comparative`` (a member, its value or a deeplite name), or ``None`` if unknown."""
    if isinstance(value, Comparative):
        return value
    try:
        return Comparative(value)
    except (ValueError, TypeError):
        return None


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

    #: A weak key yields to any other function claiming the same NAME, silently (see ``Profiler``).
    WEAK: ClassVar[bool] = False

    def __init__(self, value: Any = None, details: dict | None = None) -> None:
        if not self.NAME or not isinstance(self.NAME, str):
            raise TypeError(f"{type(self).__name__} must set the class attribute NAME to a non-empty str")
        self.value = value
        self.details: dict = dict(details or {})
        #: what the value was measured with (``deeplite_like.metrics.status_keys``): batch size, split, threads, ...
        self.options: dict = {}

    def fresh(self) -> "StatusKey":
        """A not-computed copy of this key: same class and instance settings, no value, no details.

        Copies rather than calling the class, so that a key configured per instance (deeplite's
        ``EvalMetric(unit_name='%')``) and one whose ``__init__`` takes no arguments both work.
        """
        new = copy.copy(self)
        new.value, new.details, new.options = None, {}, {}
        return new

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
        if scale.prefix and getattr(self, "UNIT_IS_WORD", False):  # '61.71 k params', not 'kparams'
            return f"{scale.prefix} {self.BASE_UNIT}"
        return f"{scale.prefix}{self.BASE_UNIT}"

    def displayed(self, scale=None) -> tuple[Any, str]:
        """``(value, units)`` as shown in reports, in ``scale`` (default: :meth:`display_scale`).

        A subclass may override :meth:`get_value` / :meth:`get_units` with the ``scale``
        parameter or, as deeplite-profiler's metrics do, with none (``def get_value(self)``);
        either form is honoured. Not overridden, the value is ``value / scale.factor`` rounded
        to 12 significant digits (an int stays an int at factor 1).
        """
        scale = scale or self.display_scale()
        if _overrides(self, "get_value"):
            value = _call_display(self.get_value, scale)
        else:
            value = scaled_value(self.value, scale)
        units = _call_display(self.get_units, scale) if _overrides(self, "get_units") else self.get_units(scale)
        return value, "" if units is None else str(units)

    def format(self, scale=None) -> str:
        """``'4.100 GMACs'``: scaled value and unit, or ``'not computed'``."""
        if self.value is None:
            return "not computed"
        value, units = self.displayed(scale)
        return f"{format_number(value)} {units}".rstrip()


def _overrides(metric: Metric, name: str) -> bool:
    return getattr(type(metric), name) is not getattr(Metric, name)


def _call_display(method: Any, scale: Any) -> Any:
    """Call an overridden ``get_value`` / ``get_units`` with ``scale`` if it takes a parameter."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin without a signature: assume ours
        return method(scale)
    return method(scale) if parameters else method()


def metric_comparative(metric: Metric) -> Comparative | None:
    """``metric.get_comparative()`` read as a ``Comparative`` (deeplite's metrics may return a str);
    ``None`` when it names none. Never raises for an unknown value: a report says ``n/a`` instead."""
    return as_comparative(metric.get_comparative())


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
