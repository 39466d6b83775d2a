"""``StatusReport``: one model's computed metrics, one row each (value scaled, unit).

Rows come in a fixed order (``ordered_keys``): built-in keys in ``metrics.BUILTIN_KEYS`` order,
then user keys in the order they were first seen; ``make_display_filter_function`` is
deeplite-profiler's helper choosing which keys a profiler displays.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from deeplite_like.metrics import BUILTIN_KEYS
from deeplite_like.metrics.status_keys import Metric, StatusKey, common_options, describe_options, metric_comparative
from deeplite_like.reports.base import Report, format_cell, format_details, jsonable
from deeplite_like.reports.changes import NOT_MEASURED, is_number, noise_interval


@dataclass(frozen=True)
class MetricRow:
    """One metric's facts as reported: raw value in base units and its display form."""

    key: str
    name: str
    value: Any
    unit: str
    display_value: Any
    display_unit: str
    display: str
    comparative: str
    description: str
    details: dict
    options: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"key": self.key, "name": self.name, "value": jsonable(self.value), "unit": self.unit,
                "display_value": jsonable(self.display_value), "display_unit": self.display_unit,
                "display": self.display, "comparative": self.comparative,
                "description": self.description, "details": self.details, "options": self.options}


def comparative_text(metric: Metric) -> str:
    """The metric's comparative in words; ``'unknown (...)'`` when it returns no ``Comparative``."""
    comparative = metric_comparative(metric)
    return comparative.value if comparative is not None else f"unknown ({metric.get_comparative()!r})"


def spread_text(metric: Metric, display_value: Any) -> str:
    """``' (IQR 0.4100)'``: a measured value's interquartile range in the value's display scale, or ``''``."""
    interval = noise_interval(metric)
    if interval is None or not is_number(display_value) or not metric.value:
        return ""
    factor = float(display_value) / float(metric.value)
    return f" (IQR {format_cell((interval[1] - interval[0]) * factor)})"


def labelled_name(metric: StatusKey) -> str:
    """The metric's name, with the phases it covers when a backward pass was counted too."""
    name = metric.friendly_name()
    if (getattr(metric, "options", None) or {}).get("backward") and metric.NAME in ("macs", "flops"):
        return f"{name} (forward + backward)"
    return name


def untracked_ops(metric: StatusKey) -> dict[str, int]:
    """Operators that ran with no formula inside a count (``details['untracked']``): name -> calls."""
    untracked = (metric.details or {}).get("untracked")
    return {str(k): int(v) for k, v in untracked.items()} if isinstance(untracked, Mapping) else {}


def at_least(metric: StatusKey, text: str) -> str:
    """``'>= 1.234'`` when the count misses operators that ran without a formula, else ``text``."""
    return f">= {text}" if untracked_ops(metric) else text


def not_measured(metric: StatusKey) -> str | None:
    """Why a metric was not measured (``details['not_measured']``), or ``None``."""
    reason = (metric.details or {}).get("not_measured") if metric.value is None else None
    return str(reason) if reason else None


def metric_row(key: str, metric: Metric) -> MetricRow:
    """Snapshot a computed metric as the metric displays itself (its own scale, or its own
    ``get_value`` / ``get_units`` where a subclass overrides them); a measured value shows its
    spread beside it, and a metric that could not be measured says so."""
    if not_measured(metric):
        value, display_value, display_unit, display = None, None, "", NOT_MEASURED
    else:
        value = metric.value
        display_value, display_unit = metric.displayed() if is_number(value) else (value, metric.BASE_UNIT)
        display = at_least(metric, format_cell(display_value)) + spread_text(metric, display_value)
    return MetricRow(key=key, name=labelled_name(metric), value=value, unit=metric.BASE_UNIT,
                     display_value=display_value, display_unit=display_unit, display=display,
                     comparative=comparative_text(metric), description=metric.description(),
                     details=jsonable(metric.details) if metric.details else {},
                     options=dict(getattr(metric, "options", None) or {}))


class StatusReport(Report, Mapping):
    """The computed metrics of one model; also a read-only mapping NAME -> raw value.

    ``report['macs']``, ``'flops' in report``, ``dict(report)``: every status key the profiler
    holds, computed or not (``None``), as deeplite-profiler's ``compute_network_status`` returned.
    The display (table, JSON, CSV, ...) shows only the computed metrics.

    Args:
        name: the model's name (shown in the title).
        backend: the backend that computed it (``'torch'``, ``'keras'``).
        statuses: status key NAME -> ``StatusKey``; only computed ``Metric`` instances become
            rows (a ``layerwise_summary`` is reported on its own).
        short_print: when False, a note under the table gives each metric's description and
            its details (``StatusKey.details``).
        values: the raw values the mapping holds (default: those of ``statuses``).
    """

    KIND = "status"

    def __init__(self, name: str, backend: str, statuses: Mapping[str, StatusKey], short_print: bool = True,
                 values: Mapping[str, Any] | None = None) -> None:
        self._values = dict(values) if values is not None else {k: s.value for k, s in statuses.items()}
        self.name = str(name)
        self.backend = str(backend)
        self.short_print = short_print
        self.rows: list[MetricRow] = []
        self._detail_text: dict[str, str] = {}
        for key in ordered_keys(statuses):
            status = statuses[key]
            if isinstance(status, Metric) and (status.computed or not_measured(status)):
                self.rows.append(metric_row(key, status))
                if status.details:
                    self._detail_text[key] = format_details(status.details)
        #: options every value shares (stated once, above the table); a value measured with other
        #: options than the rest carries its own (``differing`` names them) on its row
        self.options, self.differing = common_options(row.options for row in self.rows)

    # -- read-only mapping of raw values (deeplite-profiler's status dict) --------------------
    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(f"{key!r} is not a status key of {self.name!r}; keys: {', '.join(self._values)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    __hash__ = object.__hash__  # a report is an object, not a value: Mapping would make it unhashable

    def __eq__(self, other: object) -> bool:
        return self is other

    @property
    def title(self) -> str:
        return f"{self.name} (backend: {self.backend})"

    def _header(self) -> list[str]:
        return ["Metric", "Value", "Unit"]

    def _preamble(self) -> list[str]:
        return [f"Measured with: {describe_options(self.options)}"] if self.options else []

    def _own_options(self, row: MetricRow) -> str:
        own = {k: v for k, v in row.options.items() if k in self.differing}
        return f" [{describe_options(own)}]" if own else ""

    def _display_rows(self) -> list[list[str]]:
        return [[row.name + self._own_options(row), row.display, row.display_unit] for row in self.rows]

    def _right_aligned(self) -> set[int]:
        return {1}

    def _notes(self) -> list[str]:
        notes = []
        if self.differing:
            notes.append(f"values measured with different {', '.join(sorted(self.differing))} carry their own "
                         "in brackets: compute them again with the same options to compare them")
        reasons: dict[str, list[str]] = {}
        for row in self.rows:
            if row.display == NOT_MEASURED and row.details.get("not_measured"):
                reasons.setdefault(str(row.details["not_measured"]), []).append(row.name)
        notes += [f"{', '.join(names)}: {NOT_MEASURED}: {reason}" for reason, names in reasons.items()]
        notes += [f"{row.name}: {row.details['spread_warning']}" for row in self.rows
                  if row.details.get("spread_warning")]
        untracked: dict[str, list[str]] = {}
        for row in self.rows:
            ops = row.details.get("untracked")
            if isinstance(ops, Mapping) and ops:
                listing = ", ".join(f"{op} x{calls}" for op, calls in ops.items())
                untracked.setdefault(listing, []).append(row.name)
        notes += [f"{', '.join(names)}: '>=' marks a count that misses {len(listing.split(', '))} operator(s) that "
                  f"ran with no formula and were counted as 0: {listing}" for listing, names in untracked.items()]
        if self.short_print:
            return notes
        for row in self.rows:
            note = f"{row.name}: {row.description}".rstrip()
            if row.key in self._detail_text:
                note += f" [{self._detail_text[row.key]}]"
            notes.append(note)
        return notes

    def to_dict(self) -> dict:
        return {"report": "status", "name": self.name, "backend": self.backend, "options": dict(self.options),
                "metrics": [row.as_dict() for row in self.rows]}

    CSV_COLUMNS = ["model", "backend", "key", "name", "value", "unit", "display_value", "display_unit", "options",
                   "details"]

    def _records(self) -> tuple[list[str], list[dict[str, Any]]]:
        records = [{"model": self.name, "backend": self.backend, **row.as_dict()} for row in self.rows]
        for record in records:
            record["details"] = record["details"] or None
            record["options"] = record["options"] or None
        return self.CSV_COLUMNS, records


def ordered_keys(*key_sequences: Iterable[str]) -> list[str]:
    """Union of the keys, built-in ones first (their fixed order), then the others by first sight."""
    seen: dict[str, None] = {}
    for keys in key_sequences:
        for key in keys:
            seen.setdefault(key, None)
    builtin = [key for key in BUILTIN_KEYS if key in seen]
    return builtin + [key for key in seen if key not in BUILTIN_KEYS]


def make_display_filter_function(order: Iterable[str] | None = None, include_leftovers: bool = True,
                                 exclude: Iterable[str] | str | None = None):
    """A display filter for ``Profiler.display_status_filter_func`` (deeplite-profiler's helper).

    The filter takes ``{NAME: StatusKey}`` and returns the keys to show: those in ``order``
    (default: every built-in key) and, with ``include_leftovers``, every other key; keys in
    ``exclude`` (a name or names) are never shown. Reports still draw the rows in their fixed
    order (built-in keys first). Filtering changes what reports display, never what is
    computed or returned as values.
    """
    excluded = {exclude} if isinstance(exclude, str) else set(exclude or ())
    first = list(BUILTIN_KEYS) if order is None else list(order)

    def display_filter(statuses: dict) -> dict:
        chosen = {key: statuses[key] for key in first if key in statuses and key not in excluded}
        if include_leftovers:
            chosen.update({key: value for key, value in statuses.items()
                           if key not in chosen and key not in excluded})
        return chosen

    return display_filter
