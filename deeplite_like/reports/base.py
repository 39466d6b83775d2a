"""``Report``: one result object, many renderings (text table, dict, JSON, CSV, Markdown, HTML).

A subclass holds the facts (a snapshot taken when it is built) and says two things: its
display table (``title``, ``_header``, ``_display_rows``, ``_notes``) and its exact data
(``to_dict`` and the raw ``_records`` written to CSV). Everything else is rendered here.
Tables are drawn by ``prettytable``; CSV and JSON by the standard library.
"""
from __future__ import annotations

import abc
import contextlib
import csv
import io
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from prettytable import PrettyTable, TableStyle

import deeplite_like.reports.html as html
from deeplite_like.reports.formatting import csv_cell, strict_json

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
        ``"Infinity"`` or ``"-Infinity"``: ``reports.formatting.strict_json``)."""
        return strict_json(self.to_dict(), indent=indent)

    def to_csv(self) -> str:
        """Raw values as CSV (header row first), readable by the ``csv`` module; a text cell that a
        spreadsheet would run as a formula starts with ``'`` (``reports.formatting.csv_cell``)."""
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
