"""``StatusReport``: one model's computed metrics, one row each (value scaled, unit)."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from deeplite_like.changes import is_number
from deeplite_like.reports.base import Report
from deeplite_like.reports.formatting import format_cell, format_details, jsonable
from deeplite_like.reports.ordering import ordered_keys
from deeplite_like.status import Metric, StatusKey, metric_comparative


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

    def as_dict(self) -> dict:
        return {"key": self.key, "name": self.name, "value": jsonable(self.value), "unit": self.unit,
                "display_value": jsonable(self.display_value), "display_unit": self.display_unit,
                "display": self.display, "comparative": self.comparative,
                "description": self.description, "details": self.details}


def comparative_text(metric: Metric) -> str:
    """The metric's comparative in words; ``'unknown (...)'`` when it returns no ``Comparative``."""
    comparative = metric_comparative(metric)
    return comparative.value if comparative is not None else f"unknown ({metric.get_comparative()!r})"


def metric_row(key: str, metric: Metric) -> MetricRow:
    """Snapshot a computed metric as the metric displays itself (its own scale, or its own
    ``get_value`` / ``get_units`` where a subclass overrides them)."""
    if is_number(metric.value):
        display_value, display_unit = metric.displayed()
    else:
        display_value, display_unit = metric.value, metric.BASE_UNIT
    return MetricRow(key=key, name=metric.friendly_name(), value=metric.value, unit=metric.BASE_UNIT,
                     display_value=display_value, display_unit=display_unit,
                     display=format_cell(display_value),
                     comparative=comparative_text(metric), description=metric.description(),
                     details=jsonable(metric.details) if metric.details else {})


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
            if isinstance(status, Metric) and status.computed:
                self.rows.append(metric_row(key, status))
                if status.details:
                    self._detail_text[key] = format_details(status.details)

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

    def _display_rows(self) -> list[list[str]]:
        return [[row.name, row.display, row.display_unit] for row in self.rows]

    def _right_aligned(self) -> set[int]:
        return {1}

    def _notes(self) -> list[str]:
        if self.short_print:
            return []
        notes = []
        for row in self.rows:
            note = f"{row.name}: {row.description}".rstrip()
            if row.key in self._detail_text:
                note += f" [{self._detail_text[row.key]}]"
            notes.append(note)
        return notes

    def to_dict(self) -> dict:
        return {"report": "status", "name": self.name, "backend": self.backend,
                "metrics": [row.as_dict() for row in self.rows]}

    CSV_COLUMNS = ["model", "backend", "key", "name", "value", "unit", "display_value", "display_unit", "details"]

    def _records(self) -> tuple[list[str], list[dict[str, Any]]]:
        records = [{"model": self.name, "backend": self.backend, **row.as_dict()} for row in self.rows]
        for record in records:
            record["details"] = record["details"] or None
        return self.CSV_COLUMNS, records
