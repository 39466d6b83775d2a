"""Text tables that fit a width: chosen columns, low-priority columns left out, cells folded.

Presentation only: this draws a ``Report``'s display table (its header, display rows and
notes) in at most ``width`` characters per line, and changes no value. In order, until the
table fits:

1. ``columns`` (when given) chooses the columns shown, by key or header (case-insensitive);
2. the columns of ``drop_order`` are left out, the first first (per-layer tables: input
   shapes, calls, output bytes, ...); a note names them;
3. a compare report's models are headed ``#1`` (the reference), ``#2``, ``#2 vs #1``, and a
   note names them;
4. the widest column is narrowed one character at a time and its cells folded onto several
   lines, first at spaces only (never a number), then anywhere, down to ``MIN_CELL``
   characters; a header longer than its column is cut with an ellipsis.

The title is folded onto several lines; notes are wrapped. ``width=None`` draws the table in
full (``Report.to_text``'s output, with ``columns`` applied).
"""
from __future__ import annotations

import difflib
import shutil
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from prettytable import PrettyTable

from deeplite_like.reports.base import Report, unique_names

#: Per-layer columns (keys) left out first when a table is too wide, the first first.
LAYER_DROP_ORDER = ("input_shapes", "bytes_moved", "bound", "calls", "activation_bytes", "output_shapes", "macs_share",
                    "flops", "type", "latency_s", "params")
MIN_CELL = 6  # characters: a column is never folded narrower than this
MIN_WIDTH = 40  # the narrowest width a table is fitted to


class ColumnError(ValueError):
    """``columns`` names a column the table does not have."""


@dataclass(frozen=True)
class Column:
    """One displayed column: its key (``TableReport`` column or header), header and alignment."""

    key: str
    header: str
    right: bool


def terminal_width(default: int = 80) -> int:
    """The terminal's width in characters: ``COLUMNS`` when set, else the terminal's, else ``default``."""
    return shutil.get_terminal_size((default, 24)).columns


def _columns(report: Report) -> list[Column]:
    header = report._header()
    keys = list(getattr(report, "columns", header))
    keys = keys if len(keys) == len(header) else header
    right = report._right_aligned()
    return [Column(key, name, index in right) for index, (key, name) in enumerate(zip(keys, header))]


def choose_columns(report: Report, names: Sequence[str]) -> list[int]:
    """Indices of the columns ``names`` picks (keys or headers, any case), in the order named.

    Raises ``ColumnError`` naming an unknown column, the closest one, and every column there is.
    """
    columns = _columns(report)
    lookup: dict[str, int] = {}
    for index, column in enumerate(columns):
        lookup.setdefault(column.key.lower(), index)
        lookup.setdefault(column.header.lower(), index)
    chosen: list[int] = []
    for name in names:
        index = lookup.get(name.strip().lower())
        if index is None:
            close = difflib.get_close_matches(name.lower(), list(lookup), n=1)
            raise ColumnError(f"no column {name!r} in {report.title!r}" + (f" (did you mean {close[0]!r}?)" if close
                                                                           else "")
                              + f"; its columns are: {', '.join(c.key for c in columns)}")
        if index not in chosen:
            chosen.append(index)
    return chosen


def _table_width(widths: Sequence[int]) -> int:
    """Characters of a prettytable line: each column's text plus two spaces of padding and a bar."""
    return sum(widths) + 3 * len(widths) + 1


def _cell_width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _natural(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([_cell_width(header[i])] + [_cell_width(row[i]) for row in rows]) for i in range(len(header))]


def _floor(header: str, cells: Sequence[str], right: bool) -> int:
    """The narrowest a column gets before words are broken: its header, its numbers, its longest word."""
    if right:
        return max([len(header)] + [_cell_width(cell) for cell in cells])
    words = [len(word) for cell in cells for word in cell.split()]
    return max([len(header), MIN_CELL] + words)


def _fold(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False)) or text


@dataclass
class Fitted:
    """A fitted table: its text (table and notes), and what was done to fit it."""

    text: str
    dropped: list[str]
    folded: bool


def fit_report(report: Report, width: int | None, columns: Sequence[str] | None = None,
               drop_order: Sequence[str] = LAYER_DROP_ORDER) -> Fitted:
    """``report`` as text in at most ``width`` characters per line (``None``: no limit).

    Args:
        report: any report (its display table and notes are drawn).
        width: characters per line; at least ``MIN_WIDTH`` is used.
        columns: the columns to show (keys or headers); default every column.
        drop_order: keys of the columns that may be left out to fit, the first first.
    """
    all_columns = _columns(report)
    rows = report._display_rows()
    indices = choose_columns(report, columns) if columns else list(range(len(all_columns)))
    header = unique_names([column.header for column in all_columns])
    notes = list(report._notes())
    dropped: list[str] = []
    limit = None if width is None or width <= 0 else max(MIN_WIDTH, width)

    def widths() -> list[int]:
        return _natural([header[i] for i in indices], [[row[i] for i in indices] for row in rows])

    if limit is not None:
        keys = [column.key for column in all_columns]
        droppable = [keys.index(key) for key in drop_order if key in keys]
        for index in droppable:
            if _table_width(widths()) <= limit or len(indices) <= 2:
                break
            if index in indices and not columns:  # columns the user chose are never dropped
                indices.remove(index)
                dropped.append(all_columns[index].header)
        reference_note = _shorten_compare_headers(report, header, widths, limit)
        if reference_note:
            notes.insert(0, reference_note)
    shown = [header[i] for i in indices]
    body = [[row[i] for i in indices] for row in rows]
    right = [all_columns[i].right for i in indices]
    caps = _natural(shown, body)
    folded = False
    if limit is not None:
        # First fold text at spaces (never a number, never a header), then anything down to MIN_CELL.
        floors = [_floor(shown[i], [cells[i] for cells in body], right[i]) for i in range(len(shown))]
        for minimum in (floors, [min(MIN_CELL, c) for c in caps]):
            while _table_width(caps) > limit:
                narrowable = [i for i in range(len(caps)) if caps[i] > minimum[i]]
                if not narrowable:
                    break
                caps[max(narrowable, key=lambda i: caps[i])] -= 1
                folded = True
        shown = [name if len(name) <= caps[i] else name[:caps[i] - 1] + "\u2026" for i, name in enumerate(shown)]
        shown = unique_names(shown)
    table = PrettyTable(shown)
    for position, name in enumerate(shown):
        table.align[name] = "r" if right[position] else "l"
    body = [[_fold(cell, caps[i]) if _cell_width(cell) > caps[i] else cell for i, cell in enumerate(cells)]
            for cells in body]
    for cells in body:
        table.add_row(cells)
    inner = _table_width(_natural(shown, body)) - 4  # folding at spaces may leave a column narrower than its cap
    title = report.title
    table.title = _fold(title, inner) if limit is not None and len(title) > inner else title
    if dropped:
        notes.append(f"left out to fit {limit} columns: {', '.join(dropped)} (--columns chooses, --width 0 shows "
                     "every column)")

    def wrap(text: str, first: str = "") -> list[str]:
        if limit is None:
            return [first + text]
        return textwrap.wrap(text, limit, initial_indent=first, subsequent_indent="  ", break_long_words=True,
                             break_on_hyphens=False)

    # what the figures were measured with above the table, the notes below it
    lines = [line for text in report._preamble() for line in wrap(text)] + [table.get_string()]
    lines += [line for note in notes for line in wrap(note, "- ")]
    return Fitted("\n".join(lines), dropped, folded)


def _shorten_compare_headers(report: Report, header: list[str], widths, limit: int) -> str:
    """Head a too-wide compare report's columns ``#1`` (the reference), ``#2``, ``#2 vs #1``...; the legend.

    Columns are found by their headers (a model's name, ``NAME vs REFERENCE``), not by position.
    """
    if report.KIND != "compare" or _table_width(widths()) <= limit:
        return ""
    number = {name: index for index, name in enumerate(report.names, start=1)}
    suffix = f" vs {report.reference}"
    for index, text in enumerate(header):
        if index == 0:
            continue  # the metric's name
        if text in number:
            header[index] = f"#{number[text]}"
        elif text.endswith(suffix) and text[:-len(suffix)] in number:
            header[index] = f"#{number[text[:-len(suffix)]]} vs #1"
    legend = [f"#{number}: {name}" + (" (the reference)" if number == 1 else "")
              for name, number in number.items()]
    return "; ".join(legend)
