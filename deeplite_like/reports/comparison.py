"""``CompareReport``: two or more models side by side, the first one the reference.

One row per metric computed by any model; every value of a row is shown in ONE scale (the
reference's: ``42.00`` and ``8.750`` MiB, never MiB beside KiB), and each other model has a
``<model> vs <reference>`` column with the change in words (``4.80x smaller``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deeplite_like.metrics.status_keys import Metric, StatusKey, common_options, describe_options
from deeplite_like.reports.base import Report, format_cell, format_in_scale, jsonable, scaled_value, unique_names
from deeplite_like.reports.changes import (NOT_COMPUTED, NOT_MEASURED, WITHIN_NOISE, Change, conversion_factor,
                                   describe_change, is_number)
from deeplite_like.reports.status import (at_least, comparative_text, labelled_name, not_measured, ordered_keys,
                                          spread_text, untracked_ops)
from deeplite_like.units import Scale, pick_scale


@dataclass(frozen=True)
class CompareCell:
    """One model's value in a row: raw in its own base unit, and shown in the row's scale."""

    value: Any
    unit: str
    display_value: Any
    display: str

    def as_dict(self) -> dict:
        return {"value": jsonable(self.value), "unit": self.unit, "display_value": jsonable(self.display_value),
                "display": self.display}


@dataclass(frozen=True)
class CompareRow:
    """One metric across the models; ``changes[i]`` compares model ``i + 1`` to the reference."""

    key: str
    name: str
    unit: str
    display_unit: str
    comparative: str
    description: str
    cells: list[CompareCell]
    changes: list[Change]


def _metric(statuses: Mapping[str, StatusKey], key: str) -> Metric | None:
    status = statuses.get(key)
    return status if isinstance(status, Metric) else None


def _row_unit(metrics: list[Metric | None], template: Metric, scale: Scale) -> str:
    """The row's display unit: as the first computed number shows itself, else the template's."""
    for metric in metrics:
        if metric is not None and is_number(metric.value) and conversion_factor(metric.BASE_UNIT,
                                                                                template.BASE_UNIT) == 1:
            return metric.displayed(scale)[1]
    return template.get_units(scale) if _default_units(template) else template.BASE_UNIT


def _default_units(metric: Metric) -> bool:
    return type(metric).get_units is Metric.get_units


def _custom_display(metric: Metric) -> bool:
    return type(metric).get_value is not Metric.get_value or not _default_units(metric)


def _cell(metric: Metric | None, template: Metric, scale: Scale, model: str, notes: list[str],
          row_unit: str) -> CompareCell:
    cell = _plain_cell(metric, template, scale, model, notes, row_unit)
    if metric is not None and cell.display_value is not None and cell.value is not None:
        cell = CompareCell(cell.value, cell.unit, cell.display_value,
                           at_least(metric, cell.display) + spread_text(metric, cell.display_value))
    return cell


def _plain_cell(metric: Metric | None, template: Metric, scale: Scale, model: str, notes: list[str],
                row_unit: str) -> CompareCell:
    if metric is not None and not_measured(metric):
        return CompareCell(None, metric.BASE_UNIT, None, NOT_MEASURED)
    if metric is None or not metric.computed:
        return CompareCell(None, template.BASE_UNIT if metric is None else metric.BASE_UNIT, None, NOT_COMPUTED)
    value = metric.value
    if not is_number(value):
        return CompareCell(value, metric.BASE_UNIT, value, format_in_scale(value, scale))
    if _custom_display(metric) and conversion_factor(metric.BASE_UNIT, template.BASE_UNIT) == 1:
        # the metric scales itself (deeplite's get_value() / get_units()): show it as it says,
        # with its unit in the cell where it differs from the row's
        shown, unit = metric.displayed(scale)
        text = format_cell(shown) + ("" if unit == row_unit else f" {unit}".rstrip())
        return CompareCell(value, metric.BASE_UNIT, shown, text)
    factor = conversion_factor(metric.BASE_UNIT, template.BASE_UNIT)
    if factor is None:
        notes.append(f"{template.friendly_name()}: {model}'s unit {metric.BASE_UNIT!r} cannot be converted "
                     f"to {template.BASE_UNIT!r}; its value is shown in its own unit")
        return CompareCell(value, metric.BASE_UNIT, None, metric.format())
    if factor != 1:
        notes.append(f"{template.friendly_name()}: {model}'s value converted from {metric.BASE_UNIT!r} "
                     f"to {template.BASE_UNIT!r}")
    converted = value * factor if factor != 1 else value  # unconverted, an int stays an int
    return CompareCell(value, metric.BASE_UNIT, scaled_value(converted, scale), format_in_scale(converted, scale))


def _row_scale(metrics: list[Metric | None], template: Metric) -> Scale:
    """The scale of the first computed numeric value, reference first, in the template's unit."""
    for metric in metrics:
        if metric is not None and is_number(metric.value):
            factor = conversion_factor(metric.BASE_UNIT, template.BASE_UNIT)
            if factor is not None:
                return pick_scale(metric.value * factor, template.UNIT_KIND)
    return Scale(1.0, "")


class CompareReport(Report):
    """Metrics of two or more models; the first entry is the reference (e.g. the teacher).

    Args:
        entries: ``(name, backend, statuses)`` per model, statuses mapping NAME -> ``StatusKey``.
            Repeated names are disambiguated (``model``, ``model (2)``).
        short_print: when False, a note per metric gives its direction and description.
    """

    KIND = "compare"

    def __init__(self, entries: Sequence[tuple[str, str, Mapping[str, StatusKey]]], short_print: bool = True) -> None:
        entries = list(entries)
        if len(entries) < 2:
            raise ValueError(f"CompareReport needs at least two (name, backend, statuses) entries, the first "
                             f"being the reference; got {len(entries)}")
        self.names = unique_names([str(name) for name, _, _ in entries])
        self.backends = [str(backend) for _, backend, _ in entries]
        self.short_print = short_print
        self.rows: list[CompareRow] = []
        self._conversion_notes: list[str] = []
        all_statuses = [statuses for _, _, statuses in entries]
        row_options: list[list[dict]] = []
        self._metrics: list[list[Metric | None]] = []
        for key in ordered_keys(*all_statuses):
            metrics = [_metric(statuses, key) for statuses in all_statuses]
            if not any(metric is not None and (metric.computed or not_measured(metric)) for metric in metrics):
                continue
            self.rows.append(self._row(key, metrics))
            self._metrics.append(metrics)
            row_options.append([dict(getattr(m, "options", None) or {}) if m is not None and m.computed else {}
                                for m in metrics])
        #: options every value of every model shares (stated once above the table); values measured
        #: otherwise carry their own in their cell (``differing`` names those options)
        self.options, self.differing = common_options(o for options in row_options for o in options)
        self._cell_options = row_options
        self._own = [[{k: v for k, v in o.items() if k in self.differing} for o in options]
                     for options in row_options]
        for row, own in zip(self.rows, self._own):  # values measured differently earn no verdict
            for index, change in enumerate(row.changes, start=1):
                if own[index] != own[0] and change.verdict != "n/a":
                    row.changes[index - 1] = Change(f"{change.text} (not like for like)", "n/a", change.ratio,
                                                    change.difference)

    def _row(self, key: str, metrics: list[Metric | None]) -> CompareRow:
        template = metrics[0] if metrics[0] is not None else next(m for m in metrics if m is not None)
        scale = _row_scale(metrics, template)
        row_unit = _row_unit(metrics, template, scale)
        cells = [_cell(metric, template, scale, name, self._conversion_notes, row_unit)
                 for metric, name in zip(metrics, self.names)]
        computed = [m for m in metrics if m is not None and m.computed]
        return CompareRow(key=key, name=labelled_name(computed[0] if computed else template), unit=template.BASE_UNIT,
                          display_unit=row_unit, comparative=comparative_text(template),
                          description=template.description(), cells=cells,
                          changes=[describe_change(metrics[0], metric) for metric in metrics[1:]])

    @property
    def reference(self) -> str:
        return self.names[0]

    @property
    def title(self) -> str:
        models = [f"{name} ({backend}{', reference' if index == 0 else ''})"
                  for index, (name, backend) in enumerate(zip(self.names, self.backends))]
        return "Comparison: " + " vs ".join(models)

    def _header(self) -> list[str]:
        header = ["Metric", "Unit", self.reference]
        for name in self.names[1:]:
            header += [name, f"{name} vs {self.reference}"]
        return header

    def _preamble(self) -> list[str]:
        return [f"Measured with: {describe_options(self.options)}"] if self.options else []

    def _shown(self, index: int, model: int) -> str:
        own = self._own[index][model]
        display = self.rows[index].cells[model].display
        return display + (f" [{describe_options(own)}]" if own else "")

    def _display_rows(self) -> list[list[str]]:
        rows = []
        for index, row in enumerate(self.rows):
            cells = [row.name, row.display_unit, self._shown(index, 0)]
            for model, change in enumerate(row.changes, start=1):
                cells += [self._shown(index, model), change.text]
            rows.append(cells)
        return rows

    def _right_aligned(self) -> set[int]:
        return {2} | {3 + 2 * index for index in range(len(self.names) - 1)}

    def _notes(self) -> list[str]:
        notes = list(self._conversion_notes)
        if self.differing:
            notes.append(f"values measured with different {', '.join(sorted(self.differing))} carry their own "
                         "in brackets: their comparison is not like for like")
        for row, metrics in zip(self.rows, self._metrics):
            for name, metric in zip(self.names, metrics):
                ops = untracked_ops(metric) if metric is not None else {}
                if ops:
                    notes.append(f"{row.name} of {name}: '>=' marks a count that misses operators that ran with no "
                                 f"formula and were counted as 0: {', '.join(f'{k} x{v}' for k, v in ops.items())}")
        for row, metrics in zip(self.rows, self._metrics):
            conventions = [(name, (metric.details or {}).get("convention")) for name, metric in zip(self.names, metrics)
                           if metric is not None]
            if len({text for _, text in conventions}) > 1:
                notes.append(f"{row.name}: each backend follows its own framework's convention, so the values may "
                             "differ for the same network: " + "; ".join(
                                 f"{name}: {text or 'not stated'}" for name, text in conventions))
        if any(change.text == WITHIN_NOISE for row in self.rows for change in row.changes):
            notes.append(f"'{WITHIN_NOISE}': the two measurements' interquartile ranges (IQR) overlap, so the "
                         "difference is not told apart from noise; a longer min_run_time or fewer threads "
                         "narrows them")
        if not self.short_print:
            notes += [f"{row.name} ({row.comparative}): {row.description}".rstrip() for row in self.rows]
        return notes

    def to_dict(self) -> dict:
        return {
            "report": "compare",
            "reference": self.reference,
            "models": [{"name": name, "backend": backend} for name, backend in zip(self.names, self.backends)],
            "options": dict(self.options),
            "metrics": [{
                "key": row.key, "name": row.name, "unit": row.unit, "display_unit": row.display_unit,
                "comparative": row.comparative, "description": row.description,
                "values": {name: {**cell.as_dict(), "options": own} for name, cell, own
                           in zip(self.names, row.cells, self._own[index])},
                "changes": {name: {"text": change.text, "verdict": change.verdict,
                                   "ratio": jsonable(change.ratio), "difference": jsonable(change.difference)}
                            for name, change in zip(self.names[1:], row.changes)},
            } for index, row in enumerate(self.rows)],
            "notes": self._conversion_notes,
        }

    CSV_COLUMNS = ["key", "name", "model", "backend", "role", "value", "unit", "display_value", "display_unit",
                   "change", "verdict", "ratio", "difference", "options"]

    def _records(self) -> tuple[list[str], list[dict[str, Any]]]:
        records = []
        for row_index, row in enumerate(self.rows):
            changes: list[Change | None] = [None, *row.changes]
            for index, (name, backend, cell, change) in enumerate(zip(self.names, self.backends, row.cells, changes)):
                record = {"key": row.key, "name": row.name, "model": name, "backend": backend,
                          "role": "reference" if index == 0 else "compared", "value": jsonable(cell.value),
                          "unit": cell.unit, "display_value": jsonable(cell.display_value),
                          "display_unit": row.display_unit,
                          "options": self._cell_options[row_index][index] or None}
                if change is not None:
                    record.update(change=change.text, verdict=change.verdict, ratio=change.ratio,
                                  difference=change.difference)
                records.append(record)
        return self.CSV_COLUMNS, records
