"""Rendering command results in the format asked for, to standard output or ``--output FILE``.

Formats: ``table`` (text), ``json``, ``csv``, ``markdown``, ``html``. The format is
``--format`` or, without it, the extension of ``--output`` (``.json .csv .md .html .txt``);
table text otherwise. Per-layer tables follow ``--depth`` (modules at most N levels deep) and
``--top`` (the K leaf modules with the most MACs).

CSV holds one table: the summary (profile) or compare rows. With ``--output out.csv`` the
per-layer rows go to ``out.layers.csv`` beside it (``out.<model>.layers.csv`` for a compare).
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from deeplite_like.commands.errors import UsageError
from deeplite_like.commands.run import ModelResult
from deeplite_like.reports import CompareReport, Report, TableReport
from deeplite_like.reports.html import qualified_names

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
    """Which per-layer rows to show: ``depth`` (max module depth) and ``top`` (K costliest leaves)."""

    depth: int | None = None
    top: int | None = None


def _depth(name: str) -> int:
    return 0 if name == "" else name.count(".") + 1


def select_layers(table: TableReport, view: LayerView, title: str | None = None) -> TableReport:
    """The per-layer table with the rows ``view`` asks for (a new report; raw values unchanged).

    ``depth`` keeps modules at most that deep (the model itself is depth 0). ``top`` then keeps
    the model row and the K modules with the most MACs among those without a shown child.
    """
    if view.depth is None and view.top is None and title is None:
        return table
    named = list(zip(qualified_names(table.rows), table.rows))
    named = [(name, row) for name, row in named if view.depth is None or _depth(name) <= view.depth]
    notes = list(table.notes)
    if view.depth is not None:
        notes.append(f"modules at most {view.depth} level{'s' if view.depth != 1 else ''} deep")
    if view.top is not None:
        shown = [name for name, _ in named]
        leaves = [(name, row) for name, row in named
                  if name != "" and not any(other.startswith(name + ".") for other in shown)]
        leaves.sort(key=lambda item: -(item[1].get("macs") or 0))
        notes.append(f"the {min(view.top, len(leaves))} of {len(leaves)} leaf modules with the most MACs")
        named = [(name, row) for name, row in named if name == ""] + leaves[:view.top]
    rows = [row for _, row in named]
    return TableReport(title or table.title, table.columns, rows, formatters=table.formatters, headers=table.headers,
                       notes=notes)


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
    side_files: dict[str, str]


def render_profile(result: ModelResult, fmt: str, view: LayerView, output: str | None) -> Rendered:
    """One profiled model in ``fmt``."""
    status = result.status_report()
    layers = select_layers(result.layers, view) if result.layers is not None else None
    notes = result.notes
    if fmt == "json":
        data = {"report": "profile", "name": result.name, "model": result.spec, "backend": result.backend,
                "status": status.to_dict(), "layers": layers.to_dict() if layers is not None else None,
                "notes": notes}
        return Rendered(json.dumps(data, indent=2) + "\n", {})
    if fmt == "csv":
        side = {}
        if output and layers is not None:
            side[str(Path(output).with_suffix(".layers.csv"))] = layers.to_csv()
        return Rendered(status.to_csv(), side)
    # a status table with no metric (--metrics layers) would be an empty frame: leave it out
    reports: list[Report] = ([status] if status.rows or layers is None else []) + ([layers] if layers is not None else [])
    if fmt == "html":
        from deeplite_like.reports.html import to_html

        return Rendered(to_html(*reports, title=f"Profile of {result.name}", subtitle=result.spec), {})
    return Rendered(_join(reports, fmt, notes), {})


def render_compare(report: CompareReport, results: Sequence[ModelResult], fmt: str, view: LayerView,
                   output: str | None, with_layers: bool) -> Rendered:
    """A compare report (and, where asked, each model's per-layer table) in ``fmt``."""
    layers = [(r, select_layers(r.layers, view, title=layer_title(r))) for r in results if r.layers is not None] \
        if with_layers else []
    notes = [f"{r.name}: {note}" for r in results for note in r.notes]
    if fmt == "json":
        data = {"report": "compare-run", "compare": report.to_dict(),
                "models": [{"name": r.name, "model": r.spec, "backend": r.backend,
                            "status": r.status_report().to_dict(),
                            "layers": select_layers(r.layers, view).to_dict() if r.layers is not None else None}
                           for r in results],
                "notes": notes}
        return Rendered(json.dumps(data, indent=2) + "\n", {})
    if fmt == "csv":
        side = {}
        if output:
            for result, table in layers:
                side[str(Path(output).with_suffix(f".{_slug(result.name)}.layers.csv"))] = table.to_csv()
        return Rendered(report.to_csv(), side)
    if fmt == "html":
        from deeplite_like.reports.html import document, report_section

        sections = [report_section(report, "compare")]
        nav = [("compare", "Comparison")]
        for index, (result, table) in enumerate(layers):
            anchor = f"layers-{index + 1}"
            sections.append(report_section(table, anchor, collapse_table=True))
            nav.append((anchor, f"{result.name}: per layer"))
        if notes:
            sections.append('<ul class="notes">' + "".join(f"<li>{_escape(n)}</li>" for n in notes) + "</ul>")
        title = "Comparison: " + " vs ".join(report.names)
        return Rendered(document(title, sections, subtitle=f"reference: {report.reference}", nav=nav), {})
    return Rendered(_join([report] + [table for _, table in layers], fmt, notes), {})


def _escape(text: str) -> str:
    import html

    return html.escape(text)


def _join(reports: Sequence[Report], fmt: str, notes: Sequence[str]) -> str:
    """Text tables or Markdown, one report after another, then the notes."""
    if fmt == "markdown":
        parts = [report.to_markdown() for report in reports]
        if notes:
            parts.append("\n".join(f"- {note}" for note in notes) + "\n")
        return "\n".join(parts)
    parts = [report.to_text() for report in reports]
    text = "\n\n".join(parts) + "\n"
    if notes:
        text += "\n" + "\n".join(f"note: {note}" for note in notes) + "\n"
    return text


def require_writable_output(output: str | None) -> None:
    """Refuse an ``--output`` that cannot be written, before any model is loaded or profiled.

    A directory, a path below a file (``notes.txt/report.html``), a missing directory and a
    place this process may not write are each a ``UsageError`` naming the path. The check
    opens the file for appending (nothing is truncated) and removes it again if it was new.
    """
    if output is None:
        return
    target = Path(output)
    if target.is_dir():
        raise UsageError(f"--output {output!r} is a directory, not a file",
                         f"name a file in it, e.g. --output {str(target / 'report.html')!r}")
    ancestor = target.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise UsageError(f"--output {output!r}: {str(ancestor)!r} is a file, not a directory",
                         "write the report somewhere else")
    if not target.parent.is_dir():
        raise UsageError(f"--output {output!r}: the directory {str(target.parent)!r} does not exist",
                         "create it first, or write somewhere else")
    existed = target.exists()
    try:
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"--output {output!r} cannot be written: {exc.strerror}",
                         "write the report somewhere this user may write") from None
    if not existed:
        target.unlink()


def write(rendered: Rendered, output: str | None, stdout) -> list[str]:
    """Write the text to ``output`` (or ``stdout``) and the side files; return the paths written."""
    written = []
    if output is None:
        stdout.write(rendered.text)
        return written
    for path, text in [(output, rendered.text), *rendered.side_files.items()]:
        target = Path(path)
        if not target.parent.is_dir():
            raise UsageError(f"--output {output!r}: the directory {str(target.parent)!r} does not exist",
                             "create it first, or write somewhere else")
        target.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        written.append(str(target))
    return written
