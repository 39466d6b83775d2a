"""``StatusReport``: one model's computed metrics, one row each (value scaled, unit)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deeplite_like.changes import is_number
from deeplite_like.reports.base import Report
from deeplite_like.reports.formatting import format_details, format_in_scale, jsonable, scaled_value
from deeplite_like.reports.ordering import ordered_keys
from deeplite_like.status import Metric, StatusKey


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


def metric_row(key: str, metric: Metric) -> MetricRow:
    """Snapshot a computed metric, scaled with its own display scale."""
    scale = metric.display_scale()
    numeric = is_number(metric.value)
    return MetricRow(key=key, name=metric.friendly_name(), value=metric.value, unit=metric.BASE_UNIT,
                     display_value=scaled_value(metric.value, scale),
                     display_unit=metric.get_units(scale) if numeric else metric.BASE_UNIT,
                     display=format_in_scale(metric.value, scale),
                     comparative=metric.get_comparative().value, description=metric.description(),
                     details=jsonable(metric.details) if metric.details else {})


class StatusReport(Report):
    """The computed metrics of one model.

    Args:
        name: the model's name (shown in the title).
        backend: the backend that computed it (``'torch'``, ``'keras'``).
        statuses: status key NAME -> ``StatusKey``; only computed ``Metric`` instances become
            rows (a ``layerwise_summary`` is reported on its own).
        short_print: when False, a note under the table gives each metric's description and
            its details (``StatusKey.details``).
    """

    def __init__(self, name: str, backend: str, statuses: Mapping[str, StatusKey], short_print: bool = True) -> None:
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
