"""``TableReport``: a generic table of rows of raw values (per-layer summaries, breakdowns).

``as_tree`` draws a per-layer table as an indented tree (``--tree``), as torchinfo and DeepSpeed
print it: a new ``TableReport`` whose first column holds each module's own name indented under
its parent (``├─ conv1``, ``│  └─ 0``) in the model's order; every other column and every raw
value is unchanged, so the tree is fitted, sorted out and exported like the flat table.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from deeplite_like.reports.base import Report, format_cell, jsonable
from deeplite_like.reports.changes import is_number
from deeplite_like.reports.html import qualified_names


class TableReport(Report):
    """A titled table: ``columns`` are keys into each row dict; rows hold raw values.

    Args:
        title: the table's title.
        columns: the keys shown, in order (each row may lack some: the cell is empty).
        rows: one mapping of raw values per row; JSON and CSV keep them raw.
        formatters: column -> function turning a raw value into its displayed text
            (default: numbers with 4 significant digits, ``None`` empty).
        headers: column -> displayed header (default: the column key).
        notes: lines shown under the table.
        drop_order: columns a text table too wide for the terminal may leave out, the first first
            (``reports.base.fit_report``; a per-layer table has its own).
    """

    KIND = "table"

    def __init__(self, title: str, columns: Sequence[str], rows: Iterable[Mapping[str, Any]],
                 formatters: Mapping[str, Callable[[Any], str]] | None = None,
                 headers: Mapping[str, str] | None = None, notes: Sequence[str] = (),
                 drop_order: Sequence[str] = ()) -> None:
        self._title = str(title)
        self.drop_order = tuple(drop_order)
        self.columns = [str(column) for column in columns]
        if len(set(self.columns)) != len(self.columns):
            repeated = sorted({c for c in self.columns if self.columns.count(c) > 1})
            raise ValueError(f"TableReport {self._title!r}: columns must be unique, repeated: {repeated}")
        self.formatters = dict(formatters or {})
        self.headers = dict(headers or {})
        for option, mapping in (("formatters", self.formatters), ("headers", self.headers)):
            unknown = [key for key in mapping if key not in self.columns]
            if unknown:
                raise ValueError(f"TableReport {self._title!r}: {option} name unknown columns {unknown}; "
                                 f"columns are {self.columns}")
        self.rows = [{column: row.get(column) for column in self.columns} for row in rows]
        self.notes = [str(note) for note in notes]

    @property
    def title(self) -> str:
        return self._title

    def _header(self) -> list[str]:
        return [self.headers.get(column, column) for column in self.columns]

    def _display_rows(self) -> list[list[str]]:
        return [[self.formatters.get(column, format_cell)(row[column]) for column in self.columns]
                for row in self.rows]

    def _right_aligned(self) -> set[int]:
        """Columns whose present values are all numbers."""
        return {index for index, column in enumerate(self.columns)
                if any(row[column] is not None for row in self.rows)
                and all(row[column] is None or is_number(row[column]) for row in self.rows)}

    def _notes(self) -> list[str]:
        return self.notes

    def to_dict(self) -> dict:
        return {"report": "table", "title": self._title, "columns": self.columns,
                "headers": [self.headers.get(column, column) for column in self.columns],
                "rows": [jsonable(row) for row in self.rows], "notes": self.notes}

    def _records(self) -> tuple[list[str], list[dict[str, Any]]]:
        return self.columns, [jsonable(row) for row in self.rows]


TREE_COLUMN = "module"


def _parent(name: str) -> str | None:
    if name == "":
        return None
    return name.rsplit(".", 1)[0] if "." in name else ""


def tree_labels(names: list[str]) -> list[str]:
    """Indented labels of qualified module names (the model ``''`` first, then in the given order).

    A name's parent is the longest shown name it extends (``layers.0`` under ``layers``); a
    module whose parent is not shown hangs under the closest shown ancestor.
    """
    shown = set(names)

    def parent(name: str) -> str | None:
        up = _parent(name)
        while up is not None and up not in shown:
            up = _parent(up)
        return up

    parents = {name: parent(name) for name in names}
    children: dict[str | None, list[str]] = {}
    for name in names:
        children.setdefault(parents[name], []).append(name)
    labels: dict[str, str] = {}

    def visit(name: str, prefix: str, last: bool, root: bool) -> None:
        up = parents[name]
        local = name if not up else name[len(up) + 1:]
        labels[name] = "(model)" if name == "" else (local if root else prefix + ("└─ " if last else "├─ ") + local)
        below = prefix if root else prefix + ("   " if last else "│  ")
        kids = children.get(name, [])
        for index, kid in enumerate(kids):
            visit(kid, below, index == len(kids) - 1, False)

    tops = children.get(None, [])
    for index, top in enumerate(tops):
        visit(top, "", index == len(tops) - 1, True)
    return [labels[name] for name in names]


def as_tree(table: TableReport) -> TableReport:
    """``table`` (a per-layer table with a ``module`` column) with its modules drawn as a tree."""
    if TREE_COLUMN not in table.columns:
        raise ValueError(f"{table.title!r} has no {TREE_COLUMN!r} column to draw as a tree; columns: {table.columns}")
    labels = tree_labels(qualified_names(table.rows))
    rows = [{**row, TREE_COLUMN: label} for row, label in zip(table.rows, labels)]
    return TableReport(table.title, table.columns, rows, formatters=table.formatters, headers=table.headers,
                       notes=table.notes)
