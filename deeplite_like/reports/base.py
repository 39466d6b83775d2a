"""The rendering every report shares: ``Report``, its cells, and its text table fitted to a width.

``Report``: one result object, many renderings (text table, dict, JSON, CSV, Markdown, HTML).

A subclass holds the facts (a snapshot taken when it is built) and says two things: its
display table (``title``, ``_header``, ``_display_rows``, ``_notes``) and its exact data
(``to_dict`` and the raw ``_records`` written to CSV). Everything else is rendered here.
Tables are drawn by ``prettytable``; CSV and JSON by the standard library.

**Cells**: scaled numbers, details, JSON-ready copies, strict JSON text and safe CSV cells.
Presentation only: nothing here measures, and raw values are never changed in place.

Two rules every file we write follows (docs/reliability.rst, "Reports are safe to open"):

* **JSON is strict** (RFC 8259): a float that is not finite is written as the *string*
  ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, the spelling of the protobuf JSON mapping, never
  as the bare ``NaN`` / ``Infinity`` tokens that Python's ``json`` emits by default and that
  strict readers (``jq``, browsers' ``JSON.parse``, Go, Rust's serde) refuse. ``strict_json``.
* **CSV cells cannot be formulas**: a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or
  a carriage return (a model or module name such as ``=HYPERLINK(...)``) is written with a
  leading ``'``, as OWASP advises against spreadsheet formula injection; numbers are written as
  numbers (``-3`` stays a number). ``csv_cell``.

**Text tables that fit a width** (``fit_report``): chosen columns, low-priority columns left out, cells
folded. This draws a ``Report``'s display table (its header, display rows and
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

import abc
import contextlib
import csv
import difflib
import enum
import io
import json
import math
import numbers
import os
import re
import shutil
import stat
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from prettytable import PrettyTable, TableStyle

import deeplite_like.reports.html as html
from deeplite_like.metrics.status_keys import Metric
from deeplite_like.reports.changes import NOT_COMPUTED, is_number
from deeplite_like.units import Scale, format_number, scaled, scaled_value


_MARKDOWN_SPECIAL = re.compile(r"([\\|*`<>\[\]])")


def unique_names(names: list[str]) -> list[str]:
    """Disambiguate repeated names in order: ``['m', 'm', 'x']`` -> ``['m', 'm (2)', 'x']``."""
    seen: set[str] = set()
    result = []
    for name in names:
        candidate, n = name, 1
        while candidate in seen:
            n += 1
            candidate = f"{name} ({n})"
        seen.add(candidate)
        result.append(candidate)
    return result


def _markdown_escape(text: str) -> str:
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("\n", " ")


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader never sees half a report and a failed write keeps the old one.

    A regular file (or a new one) is written to a temporary file beside it, flushed to disk and
    renamed over it (``os.replace``: atomic on POSIX and Windows), keeping the old file's permission
    bits; a symbolic link's target is replaced, not the link. A FIFO or a device is written in place.
    On failure the temporary file is removed and ``OSError`` propagates.
    """
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        with open(target, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        return
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        else:  # as open() would have made it: 0o666 less the umask
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class Report(abc.ABC):
    """Base of every report; subclasses provide the facts, this class renders them."""

    #: Which layout renderers give the report (``html``, ``fit``): ``"status"``, ``"compare"``, ``"table"``.
    KIND: ClassVar[str] = "report"

    #: File extension -> method name used by :meth:`save`.
    FORMATS = {".json": "to_json", ".csv": "to_csv", ".md": "to_markdown", ".markdown": "to_markdown",
               ".txt": "to_text", ".html": "to_html", ".htm": "to_html"}

    @property
    @abc.abstractmethod
    def title(self) -> str:
        """The table's title."""

    @abc.abstractmethod
    def _header(self) -> list[str]:
        """Display column names."""

    @abc.abstractmethod
    def _display_rows(self) -> list[list[str]]:
        """Display rows: one list of strings per row, aligned with :meth:`_header`."""

    def _right_aligned(self) -> set[int]:
        """Indices of the columns drawn right-aligned (numbers); the rest are left-aligned."""
        return set()

    def _notes(self) -> list[str]:
        """Lines shown under the table (descriptions, details, conversions); none by default."""
        return []

    def _preamble(self) -> list[str]:
        """Lines shown above the table (what the figures were measured with); none by default."""
        return []

    @abc.abstractmethod
    def to_dict(self) -> dict:
        """Exact data made of JSON types: raw values in base units, and their display form."""

    @abc.abstractmethod
    def _records(self) -> tuple[list[str], list[dict[str, Any]]]:
        """CSV columns and rows of raw values (one flat dict per row)."""

    # ------------------------------------------------------------------ renderings
    def _build_table(self, escape=lambda text: text) -> PrettyTable:
        header = unique_names(self._header())  # prettytable refuses repeated field names
        table = PrettyTable([escape(name) for name in header])
        table.title = escape(self.title)
        right = self._right_aligned()
        for index, name in enumerate(header):
            table.align[escape(name)] = "r" if index in right else "l"
        for row in self._display_rows():
            table.add_row([escape(cell) for cell in row])
        return table

    def to_table(self) -> PrettyTable:
        """The display table as a ``prettytable.PrettyTable`` (notes not included)."""
        return self._build_table()

    def to_text(self) -> str:
        """The table as text, followed by the notes, one per line."""
        lines = list(self._preamble()) + [self.to_table().get_string()]
        lines += [f"- {note}" for note in self._notes()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as strict JSON text (a non-finite float is the string ``"NaN"``,
        ``"Infinity"`` or ``"-Infinity"``: ``strict_json``)."""
        return strict_json(self.to_dict(), indent=indent)

    def to_csv(self) -> str:
        """Raw values as CSV (header row first), readable by the ``csv`` module; a text cell that a
        spreadsheet would run as a formula starts with ``'`` (``csv_cell``)."""
        columns, records = self._records()
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([csv_cell(column) for column in columns])
        for record in records:
            writer.writerow([csv_cell(record.get(column)) for column in columns])
        return buffer.getvalue()

    def to_markdown(self) -> str:
        """A Markdown table with a bold title, then the notes as a list (special characters escaped)."""
        table = self._build_table(_markdown_escape)
        table.set_style(TableStyle.MARKDOWN)
        head, _, body = table.get_string().partition("\n")  # the bold title, then the table
        lines = [head, *(f"\n*{_markdown_escape(line)}*" for line in self._preamble()), body]
        notes = self._notes()
        if notes:
            lines.append("")
            lines += [f"- {_markdown_escape(note)}" for note in notes]
        return "\n".join(lines) + "\n"

    def _repr_html_(self) -> str:
        """Rich HTML for notebooks (table, charts, notes; every name and value escaped).

        Drawn by ``deeplite_like.reports.html.fragment``.
        """
        return html.fragment(self)

    def to_html(self, title: str | None = None) -> str:
        """One self-contained HTML page: the table, its charts and notes (no network needed).

        Drawn by ``deeplite_like.reports.html.to_html``, which also puts several reports on one page.
        """
        return html.to_html(self, title=title)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the report in the format named by the extension (.json .csv .md .txt .html), whole or not at
        all (``write_atomically``: a failed write keeps the file that was there)."""
        path = Path(path)
        method = self.FORMATS.get(path.suffix.lower())
        if method is None:
            raise ValueError(f"cannot tell which format to write {str(path)!r} in from its extension "
                             f"{path.suffix!r}; use one of {', '.join(self.FORMATS)}")
        text = getattr(self, method)()
        write_atomically(str(path), text if text.endswith("\n") else text + "\n")
        return path


# -- Cell formatting: scaled numbers, details, JSON-ready copies, strict JSON, safe CSV cells ----------------
def format_cell(value: Any) -> str:
    """A displayed cell: numbers with 4 significant digits, ``None`` as empty, others as text."""
    if value is None:
        return ""
    if is_number(value):
        return format_number(int(value) if isinstance(value, numbers.Integral) else float(value))
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(format_cell(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def format_quantity(value: float, kind: str, unit: str, unit_is_word: bool = False) -> str:
    """``'1.234 ms'`` for 0.001234 of ``unit`` ``'s'``: the value scaled to its unit kind's prefix.

    A unit that is a word (``params``) takes its prefix apart, as the status tables show it:
    ``'78.04 k params'``, not ``'78.04 kparams'``.
    """
    number, shown_unit = scaled(float(value), kind, unit)
    if unit_is_word and shown_unit != unit:
        shown_unit = f"{shown_unit[:len(shown_unit) - len(unit)]} {unit}"
    return f"{format_number(number)} {shown_unit}".rstrip()


def format_seconds(value: Any) -> str:
    """A table cell of seconds (``'1.234 ms'``); empty for ``None``."""
    return "" if value is None else format_quantity(value, "seconds", "s")


def format_in_scale(value: Any, scale: Scale) -> str:
    """``'42.00'`` for 44040192 bytes in the MiB scale; ``'not computed'`` for ``None``."""
    if value is None:
        return NOT_COMPUTED
    return format_cell(scaled_value(value, scale))


def format_details(details: Mapping[str, Any]) -> str:
    """``'buffers: 1.000 KiB, runs: 100'``: a ``Metric`` detail formats itself with its unit;
    a plain number has no unit to show and is written with 4 significant digits."""
    return ", ".join(f"{key}: {value.format() if isinstance(value, Metric) else format_cell(value)}"
                     for key, value in details.items())


def jsonable(value: Any) -> Any:
    """A copy of ``value`` made of JSON types only: numpy scalars become ints/floats, tuples
    lists, dict keys strings, a ``Metric`` ``{'value', 'unit'}``, anything else its ``str``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, Metric):
        return {"value": jsonable(value.value), "unit": value.BASE_UNIT}
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(item) for item in value]
    if hasattr(value, "tolist"):  # numpy / framework arrays, without importing them
        return jsonable(value.tolist())
    return str(value)


#: Non-finite floats in strict JSON: the protobuf JSON mapping's strings.
NON_FINITE_JSON = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}

#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP's list).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def finite_json_value(value: Any) -> Any:
    """A copy of ``value`` (JSON types) with every non-finite float replaced by its string (``NON_FINITE_JSON``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE_JSON[repr(value)]
    if isinstance(value, Mapping):
        return {key: finite_json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json_value(item) for item in value]
    return value


def strict_json(data: Any, indent: int | None = 2) -> str:
    """``data`` as strict JSON text: non-finite floats as ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``.

    Every JSON report we write goes through here (``Report.to_json``, the command line's JSON).
    """
    return json.dumps(finite_json_value(data), indent=indent, allow_nan=False)


def csv_cell(value: Any) -> Any:
    """A raw value for a CSV cell: ``None`` empty, nested values as compact JSON text, a text cell that a
    spreadsheet would run as a formula (``FORMULA_STARTS``) prefixed with ``'``; numbers unchanged."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        value = json.dumps(finite_json_value(value), separators=(",", ":"), allow_nan=False)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


# -- Text tables that fit a width ----------------------------------------------------------------------------
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
