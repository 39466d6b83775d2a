"""Rendering command results in the format asked for, to standard output or ``--output FILE``.

Formats: ``table`` (text), ``json``, ``csv``, ``markdown``, ``html``. The format is
``--format`` or, without it, the extension of ``--output`` (``.json .csv .md .html .txt``);
table text otherwise. Per-layer tables follow ``--depth`` (modules at most N levels deep),
``--top`` (the K leaf modules with the most MACs, or of ``--sort``), ``--sort``, ``--columns``
and ``--tree``; text tables fit ``--width`` (``deeplite_like.reports.base.fit_report``).

CSV holds one table: the summary (profile) or compare rows. With ``--output out.csv`` the
per-layer rows go to ``out.layers.csv`` beside it (``out.<model>.layers.csv`` for a compare).

Every JSON report is stamped with the version of its schema (``stamped``): ``schema_version`` is
``"MAJOR.MINOR"``; MINOR grows when fields are added (old readers keep working), MAJOR when a
field is renamed, removed or changes meaning. docs/cli.rst documents the fields;
``tests/cli/test_json_schema.py`` checks every report against that description.
"""
from __future__ import annotations

import os
import re
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from deeplite_like._version import __version__
from deeplite_like.reports.changes import is_number
from deeplite_like.cli.exit_codes import CommandError, UsageError, raise_if_interrupted
from deeplite_like.cli.runner import ModelResult
from deeplite_like.reports import CompareReport, Report, TableReport
from deeplite_like.reports.base import (ColumnError, LAYER_DROP_ORDER, choose_columns, fit_report, strict_json,
                                        write_atomically)
from deeplite_like.reports.html import (document, is_layer_table, module_depth, notes_html, qualified_names,
                                        report_section, to_html)
from deeplite_like.reports.table import as_tree
from html import escape as html_escape

SCHEMA_VERSION = "1.1"
TOOL = "deeplite-like"
FORMATS = ("table", "json", "csv", "markdown", "html")
EXTENSIONS = {".txt": "table", ".json": "json", ".csv": "csv", ".md": "markdown", ".markdown": "markdown",
              ".html": "html", ".htm": "html"}


def resolve_format(fmt: str | None, output: str | None) -> str:
    """``--format``, else the ``--output`` extension's format, else ``'table'``; conflicts are errors."""
    implied = EXTENSIONS.get(Path(output).suffix.lower()) if output else None
    if fmt is None:
        if output and implied is None:
            raise UsageError(f"cannot tell the format of --output {output!r} from its extension",
                             f"add --format ({'|'.join(FORMATS)}) or use one of {', '.join(EXTENSIONS)}")
        return implied or "table"
    if implied is not None and implied != fmt:
        raise UsageError(f"--format {fmt} does not match --output {output!r}, which names a {implied} file",
                         "drop --format, or change the file's extension")
    return fmt


@dataclass(frozen=True)
class LayerView:
    """Which per-layer rows and columns to show, and how text is drawn.

    Attributes:
        depth: modules at most this deep (the model is depth 0).
        top: the K leaf modules with the most of ``sort`` (MACs by default).
        sort: the column (key or header) the rows are ordered by, largest first.
        columns: the columns shown (keys or headers); the module column is always kept.
        tree: draw the modules as an indented tree (text and Markdown).
        width: characters per line of text tables (``None``: no limit).
    """

    depth: int | None = None
    top: int | None = None
    sort: str | None = None
    columns: tuple[str, ...] | None = None
    tree: bool = False
    width: int | None = None


def select_layers(table: TableReport, view: LayerView, title: str | None = None) -> TableReport:
    """The per-layer table with the rows ``view`` asks for (a new report; raw values unchanged).

    ``depth`` keeps modules at most that deep (the model itself is depth 0). ``top`` then keeps
    the model row and the K modules with the most of the ``sort`` column (MACs by default) among
    those without a shown child. ``sort`` orders the rows after the model's own (numbers largest
    first); ``columns`` keeps those columns, the module column first.
    """
    if view.depth is None and view.top is None and view.sort is None and view.columns is None and title is None:
        return table
    sort = _column_key(table, view.sort, "--sort") if view.sort is not None else "macs"
    named = [(name, row) for name, row in zip(qualified_names(table.rows), table.rows)
             if view.depth is None or module_depth(name) <= view.depth]
    notes = list(table.notes)
    if view.depth is not None:
        notes.append(f"modules at most {view.depth} level{'s' if view.depth != 1 else ''} deep")
    if view.top is not None:
        shown = [name for name, _ in named]
        leaves = [(name, row) for name, row in named
                  if name != "" and not any(other.startswith(name + ".") for other in shown)]
        leaves = sort_rows(leaves, sort)
        notes.append(f"the {min(view.top, len(leaves))} of {len(leaves)} leaf modules with the most "
                     f"{table.headers.get(sort, sort)}")
        named = [(name, row) for name, row in named if name == ""] + leaves[:view.top]
    if view.sort is not None:
        named = [(name, row) for name, row in named if name == ""] + sort_rows(
            [(name, row) for name, row in named if name != ""], sort)
        order = ", largest first" if _numeric(table, sort) else ""
        notes.append(f"sorted by {table.headers.get(sort, sort)}{order}")
    columns = table.columns
    if view.columns is not None:
        chosen = [_column_key(table, name, "--columns") for name in view.columns]
        columns = ["module"] * ("module" in table.columns and "module" not in chosen) + list(dict.fromkeys(chosen))
    rows = [row for _, row in named]
    return TableReport(title or table.title, columns, rows,
                       formatters={k: v for k, v in table.formatters.items() if k in columns},
                       headers={k: v for k, v in table.headers.items() if k in columns}, notes=notes)


def _numeric(table: TableReport, column: str) -> bool:
    return any(is_number(row.get(column)) for row in table.rows)


def sort_rows(named: list, column: str) -> list:
    """``(name, row)`` pairs ordered by ``row[column]``: numbers largest first, text A to Z, empty last.

    Ties keep the model's order (the sort is stable).
    """
    def key(item):
        value = item[1].get(column)
        if is_number(value):
            return (0, -float(value), "")
        if value is None or value == "":
            return (2, 0.0, "")
        return (1, 0.0, str(value).lower())

    return sorted(named, key=key)


def _column_key(table: TableReport, name: str, option: str) -> str:
    """The column key ``name`` (a key or a header, any case) names in ``table``; a usage error otherwise."""
    try:
        index = choose_columns(table, [name])[0]
    except ColumnError as exc:
        raise UsageError(f"{option}: {exc}", f"{option} takes a column's key or header, e.g. {option} macs") from None
    return table.columns[index]


def layer_title(result: ModelResult) -> str:
    """``'Per-layer summary: resnet_small (ResNetSmall)'``: the model's name, then its class."""
    kind = result.layers.title.split(": ", 1)[-1] if result.layers is not None else ""
    return f"Per-layer summary: {result.name}" + (f" ({kind})" if kind and kind != result.name else "")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "model"


@dataclass
class Rendered:
    """What a command writes: the main text, and side files (path -> text) for ``--output``."""

    text: str
    side_files: dict[str, str] = field(default_factory=dict)


def stamped(report: str, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``schema_version``, ``report`` (its kind) and the tool's name and version first."""
    return {"schema_version": SCHEMA_VERSION, "report": report, "tool": TOOL, "tool_version": __version__, **data}


def schema_major(version: object) -> int | None:
    """The MAJOR of a ``schema_version`` (``None`` when it is missing or not ``"MAJOR.MINOR"``)."""
    if not isinstance(version, str):
        return None
    major, _, minor = version.partition(".")
    return int(major) if major.isdigit() and minor.isdigit() else None


def json_rendered(report: str, data: dict[str, Any]) -> Rendered:
    """``data`` as an indented JSON report of the kind ``report``, stamped with the schema version."""
    return Rendered(strict_json(stamped(report, data)) + "\n")


def render_profile(result: ModelResult, fmt: str, view: LayerView, output: str | None) -> Rendered:
    """One profiled model in ``fmt``."""
    status = result.status_report()
    layers = select_layers(result.layers, view) if result.layers is not None else None
    notes = result.notes
    if fmt == "json":
        extra = {}
        if result.roofline is not None:
            extra["roofline"] = result.roofline.as_dict()
        if result.serving is not None:
            extra["serving"] = result.serving.as_dict()
        if result.node_times is not None:
            extra["node_times"] = result.node_times.as_dict()
        return json_rendered("profile", {"name": result.name, "model": result.spec, "backend": result.backend,
                                         "status": status.to_dict(),
                                         "layers": layers.to_dict() if layers is not None else None, **extra,
                                         "notes": notes})
    if fmt == "csv":
        side = {}
        if output and layers is not None:
            side[layers_csv_path(output)] = layers.to_csv()
        return Rendered(status.to_csv(), side)
    # a status table with no metric (--metrics layers) would be an empty frame: leave it out
    reports: list[Report] = ([status] if status.rows or layers is None else []) + ([layers] if layers is not None else [])
    if result.roofline is not None:
        reports.append(result.roofline.top_table())
    if result.serving is not None:
        reports.append(result.serving.report())
    if result.node_times is not None and result.node_times.unjoined:
        reports.append(result.node_times.unjoined_table())
    if fmt == "csv" and (result.roofline is not None or result.serving is not None):
        raise UsageError("--format csv writes the metrics and the per-layer table; the predicted time and serving "
                         "tables have no CSV form", "use --format json (or text, markdown, html)")
    if fmt == "html":
        page = to_html(*reports, title=f"Profile of {result.name}", subtitle=result.spec)
        if result.roofline is not None:  # the roofline chart above its table
            chart = f'<div class="charts">{result.roofline.chart()}</div>'
            marker = f"<h2>{html_escape(result.roofline.top_table().title)}</h2>"
            page = page.replace(marker, marker + chart, 1)
        return Rendered(page)
    return Rendered(_join(reports, fmt, notes, view))


def render_compare(report: CompareReport, results: Sequence[ModelResult], fmt: str, view: LayerView,
                   output: str | None, with_layers: bool) -> Rendered:
    """A compare report (and, where asked, each model's per-layer table) in ``fmt``."""
    layers = [(r, select_layers(r.layers, view, title=layer_title(r))) for r in results if r.layers is not None] \
        if with_layers else []
    notes = [f"{r.name}: {note}" for r in results for note in r.notes]
    if fmt == "json":
        models = [{"name": r.name, "model": r.spec, "backend": r.backend, "status": r.status_report().to_dict(),
                   "layers": select_layers(r.layers, view).to_dict() if r.layers is not None else None}
                  for r in results]
        return json_rendered("compare-run", {"compare": report.to_dict(), "models": models, "notes": notes})
    if fmt == "csv":
        side = {}
        if output:
            for result, table in layers:
                side[layers_csv_path(output, result.name)] = table.to_csv()
        return Rendered(report.to_csv(), side)
    if fmt == "html":
        sections = [report_section(report, "compare")]
        nav = [("compare", "Comparison")]
        for index, (result, table) in enumerate(layers):
            anchor = f"layers-{index + 1}"
            sections.append(report_section(table, anchor, collapse_table=True))
            nav.append((anchor, f"{result.name}: per layer"))
        if notes:
            sections.append(notes_html(notes))
        title = "Comparison: " + " vs ".join(report.names)
        return Rendered(document(title, sections, subtitle=f"reference: {report.reference}", nav=nav))
    return Rendered(_join([report] + [table for _, table in layers], fmt, notes, view))


def render_text(report: Report, fmt: str, view: LayerView = LayerView(),
                drop_order: Sequence[str] | None = None) -> str:
    """One report as a text table (fitted to ``view.width``) or Markdown; a per-layer table as a tree
    when ``view.tree``. ``drop_order``: the columns that may be left out to fit, the first first
    (default: a per-layer table's low-priority columns; none for other tables)."""
    if drop_order is None:
        drop_order = LAYER_DROP_ORDER if is_layer_table(report) else getattr(report, "drop_order", ())
    if view.tree and is_layer_table(report):
        report = as_tree(report)  # type: ignore[arg-type]
    if fmt == "markdown":
        return report.to_markdown()
    if view.width is None:
        return report.to_text()
    return fit_report(report, view.width, drop_order=drop_order).text


def _join(reports: Sequence[Report], fmt: str, notes: Sequence[str], view: LayerView = LayerView()) -> str:
    """Text tables or Markdown, one report after another, then the notes."""
    parts = [render_text(report, fmt, view) for report in reports]
    if fmt == "markdown":
        if notes:
            parts.append("\n".join(f"- {note}" for note in notes) + "\n")
        return "\n".join(parts)
    text = "\n\n".join(parts) + "\n"
    if notes:
        lines = [f"note: {note}" for note in notes]
        if view.width is not None:
            lines = [wrapped for line in lines for wrapped in textwrap.wrap(line, max(40, view.width),
                                                                            subsequent_indent="  ")]
        text += "\n" + "\n".join(lines) + "\n"
    return text


def layers_csv_path(output: str, model_name: str | None = None) -> str:
    """Where ``--output out.csv`` puts per-layer rows: ``out.layers.csv`` (a compare: ``out.<model>.layers.csv``)."""
    suffix = ".layers.csv" if model_name is None else f".{_slug(model_name)}.layers.csv"
    return str(Path(output).with_suffix(suffix))


def require_writable_output(output: str | None, option: str = "--output") -> None:
    """Refuse an ``--output`` that cannot be written, before any model is loaded or profiled.

    A directory, a path below a file (``notes.txt/report.html``), a missing directory and a
    place this process may not write are each a ``UsageError`` naming the path. A regular file
    (or a new one) is checked by creating a file beside it, as the final write will
    (``write_atomically``); nothing is opened at ``output`` itself, so an existing report is
    untouched and a FIFO's reader does not see an end of file before the report comes. A FIFO
    or a device (``/dev/stdout``) is checked for write permission only.
    """
    if output is None:
        return
    target = Path(output)
    if target.is_dir():
        raise UsageError(f"{option} {output!r} is a directory, not a file",
                         f"name a file in it, e.g. {option} {str(target / 'report.html')!r}")
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise UsageError(f"{option} {output!r}: {str(ancestor)!r} is a file, not a directory",
                         "write the report somewhere else")
    if not target.parent.is_dir():
        raise UsageError(f"{option} {output!r}: the directory {str(target.parent)!r} does not exist",
                         "create it first, or write somewhere else")
    if target.exists() and not target.is_file():  # a FIFO, a device: written in place
        if not os.access(target, os.W_OK):
            raise UsageError(f"{option} {output!r} cannot be written: Permission denied",
                             "write the report somewhere this user may write")
        return
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{option} {output!r} cannot be written: Permission denied",
                         "write the report somewhere this user may write")
    try:
        handle, probe = tempfile.mkstemp(dir=target.resolve().parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{option} {output!r} cannot be written: {exc.strerror}",
                         "write the report somewhere this user may write") from None
    os.close(handle)
    os.unlink(probe)


def write(rendered: Rendered, output: str | None, stdout: IO[str], stderr: IO[str]) -> None:
    """Write the text to ``output`` (or ``stdout``) and the side files; name the files written on ``stderr``.

    Each file is written by ``write_atomically``; a file that cannot be written is a
    ``CommandError`` naming it (exit 1: the work is done, and the old file is kept). After a
    Ctrl-C that something swallowed, nothing is written (``KeyboardInterrupt``).
    """
    raise_if_interrupted()
    if output is None:
        stdout.write(rendered.text)
        return
    written = []
    for path, text in [(output, rendered.text), *rendered.side_files.items()]:
        target = Path(path)
        if not target.parent.is_dir():
            raise UsageError(f"--output {output!r}: the directory {str(target.parent)!r} does not exist",
                             "create it first, or write somewhere else")
        try:
            write_atomically(path, text if text.endswith("\n") else text + "\n")
        except OSError as exc:
            raise CommandError(f"cannot write {path!r}: {exc.strerror or exc}",
                               "free space or choose another --output; a file that was there before is kept "
                               "as it was") from None
        written.append(str(target))
    print(f"wrote {', '.join(written)}", file=stderr)
