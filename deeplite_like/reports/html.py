"""Rich HTML for reports: one self-contained file (``to_html``) or a notebook fragment (``fragment``).

A document holds, per report, its table and the charts that say the same thing at a glance:

* a ``StatusReport``: the summary table;
* a ``CompareReport``: the compare table and a ratio chart (each metric of each model against
  the reference, log scale, green where better, red where worse);
* a per-layer ``TableReport`` (columns ``module`` and ``macs``): bar charts of where the MACs,
  the parameters, the output memory and (when the table has a ``*_s`` column) the time go, over
  the leaf modules, and the table itself, sortable by clicking a column header.

Everything is inline: CSS in a ``<style>``, charts as SVG drawn in Python
(``deeplite_like.reports.charts``), a few lines of JavaScript for sorting. The file loads
nothing from the network and reads the same without JavaScript (only sorting needs it).

The training-memory page:

    The training-memory page: live bytes after every operator, one colour per phase, and the categories.

    Pure functions from the plain data of a ``TrainingMemory`` (no framework import) to inline SVG
    and one self-contained HTML page (``html.document``). The timeline keeps, for each of at most
    ``MAX_POINTS`` buckets of consecutive operators, the largest live total, so the peak is drawn at
    its exact height however many operators the step ran.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from deeplite_like._version import __version__
from deeplite_like.reports.changes import is_number
from deeplite_like.reports.charts import (Bar, PALETTE, RatioBar, TITLE_SPACE, _e, _nice_ticks, _svg,
                                          bar_chart, ratio_chart)
from deeplite_like.units import format_bytes, format_number, pick_scale, scaled


# Reports call these renderings; the layout is chosen by ``report.KIND``, so this module imports no
# report class (``Report``, ``CompareReport``, ``TableReport`` below are any report of that kind).
Report = CompareReport = TableReport = Any

__all__ = ["MAX_POINTS", "document", "fragment", "is_layer_table", "layer_charts", "module_depth", "notes_html",
           "report_section", "timeline_chart", "to_html", "training_memory_page"]

TOP_BARS = 12  # bars per per-layer chart; the rest are summed into one "other" bar

CSS = """
.deeplite-like-report { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; color: #1f2933;
  line-height: 1.4; }
.deeplite-like-report h1 { font-size: 1.6em; margin: 0 0 .2em; }
.deeplite-like-report h2 { font-size: 1.25em; margin: 1.6em 0 .5em; border-bottom: 1px solid #d9e2ec;
  padding-bottom: .2em; }
.deeplite-like-report .subtitle { color: #52606d; margin: 0 0 1em; }
.deeplite-like-report nav a { margin-right: 1em; color: #2f5f98; text-decoration: none; }
.deeplite-like-report table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
.deeplite-like-report caption { text-align: left; font-weight: 600; padding: .3em 0; }
.deeplite-like-report th, .deeplite-like-report td { padding: .25em .7em; border-bottom: 1px solid #e4e7eb;
  text-align: left; white-space: nowrap; }
.deeplite-like-report th { background: #f0f4f8; position: sticky; top: 0; }
.deeplite-like-report td.num, .deeplite-like-report th.num { text-align: right; font-variant-numeric: tabular-nums; }
.deeplite-like-report tbody tr:nth-child(even) { background: #f9fafb; }
.deeplite-like-report table.sortable th { cursor: pointer; user-select: none; }
.deeplite-like-report table.sortable th:hover { background: #d9e2ec; }
.deeplite-like-report th[aria-sort=descending]::after { content: " \\25BC"; font-size: .8em; }
.deeplite-like-report th[aria-sort=ascending]::after { content: " \\25B2"; font-size: .8em; }
.deeplite-like-report td.better { color: #2e7d32; } .deeplite-like-report td.worse { color: #c62828; }
.deeplite-like-report .charts { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 1em 2em;
  margin: .5em 0 1em; }
.deeplite-like-report .chart { max-width: 100%; height: auto; }
.deeplite-like-report ul.notes { color: #52606d; font-size: .85em; margin: .3em 0 1em; padding-left: 1.2em; }
.deeplite-like-report .scroll { max-height: 36em; overflow: auto; display: inline-block; max-width: 100%; }
.deeplite-like-report details > summary { cursor: pointer; color: #2f5f98; margin: .5em 0; }
.deeplite-like-report .cell { max-width: 900px; overflow-x: auto; }
.deeplite-like-report .wide { max-width: 100%; overflow-x: auto; }
"""

# Sorting: click (or Enter on) a header; numbers sort by their raw value (data-value), largest
# first; text alphabetically; a second click reverses. Ties keep the table's order.
SORT_JS = """
(function () {
  function keyOf(cell) {
    var raw = cell.getAttribute('data-value');
    if (raw !== null && raw !== '' && !isNaN(Number(raw))) return {num: true, v: Number(raw)};
    return {num: false, v: cell.textContent.trim().toLowerCase()};
  }
  function sortBy(th) {
    var table = th.closest('table'), body = table.tBodies[0], col = th.cellIndex;
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = th.classList.contains('num');
    var current = th.getAttribute('aria-sort');
    var dir = current ? (current === 'descending' ? 'ascending' : 'descending') : (numeric ? 'descending' : 'ascending');
    var sign = dir === 'ascending' ? 1 : -1;
    var keyed = rows.map(function (row, i) { return {row: row, i: i, k: keyOf(row.cells[col])}; });
    keyed.sort(function (a, b) {
      if (a.k.v === b.k.v) return a.i - b.i;
      if (a.k.num !== b.k.num) return a.k.num ? -1 : 1;
      return (a.k.v < b.k.v ? -1 : 1) * sign;
    });
    keyed.forEach(function (item) { body.appendChild(item.row); });
    Array.prototype.forEach.call(th.parentNode.cells, function (other) { other.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir);
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable th'), function (th) {
    if (th.dataset.sortable) return;
    th.dataset.sortable = '1';
    th.tabIndex = 0;
    th.addEventListener('click', function () { sortBy(th); });
    th.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortBy(th); }
    });
  });
})();
"""

# Per-layer columns charted: column -> (title, unit kind, base unit, additive over leaves).
LAYER_CHART_COLUMNS = {
    "macs": ("Where the MACs go", "count", "MACs", True),
    "params": ("Where the parameters are", "count", "params", True),
    "activation_bytes": ("Output memory per module", "bytes", "B", False),
}
_TIME_COLUMN = re.compile(r"(^|_)(time|latency|duration)(_s)?$|_s$")


def _format(value: float, kind: str, unit: str) -> str:
    if kind == "bytes":
        return format_bytes(int(value))
    number, label = scaled(value, kind, unit if unit != "params" else "")
    if kind == "count" and label == unit.replace("params", "") and float(number).is_integer():
        number = int(number)  # 650 parameters, not 650.0
    return f"{format_number(number)} {label}".rstrip()


# ------------------------------------------------------------------------------ tables
def module_depth(name: str) -> int:
    """Levels below the model (``""``, depth 0) of a qualified module name (``layer1.0`` is 2)."""
    return 0 if name == "" else name.count(".") + 1


def qualified_names(rows: Sequence[dict]) -> list[str]:
    """The rows' qualified module names (``""`` the model, ``"layer1.0.conv1"``).

    A per-layer table keys its rows by qualified name; one that shows indented short names
    instead (``"(model)"``, ``"  layer1"``, ``"    conv1"``, two spaces per level) has them
    rebuilt from the indentation.
    """
    names = [str(row["module"]) for row in rows]
    if not any(name == "(model)" or name.startswith(" ") for name in names):
        return names
    result: list[str] = []
    stack: list[str] = []
    for name in names:
        if name == "(model)":
            result.append("")
            stack = []
            continue
        depth = max(1, (len(name) - len(name.lstrip(" "))) // 2)
        stack = stack[:depth - 1] + [name.strip()]
        result.append(".".join(stack))
    return result


def is_layer_table(report: Report) -> bool:
    """A per-layer summary: a ``TableReport`` whose rows are keyed by qualified module name."""
    return report.KIND == "table" and "module" in report.columns and "macs" in report.columns


NUM = ' class="num"'


def _table(report: Report, sortable: bool, caption: bool = True) -> str:
    header = report._header()
    rows = report._display_rows()
    right = report._right_aligned()
    table = report if report.KIND == "table" else None  # its raw values sort the rows
    names = qualified_names(table.rows) if table is not None and "module" in table.columns else None
    verdicts = _compare_verdicts(report)
    parts = [f'<table class="{"sortable" if sortable else "static"}">',
             f"<caption>{_e(report.title)}</caption>" if caption else "", "<thead><tr>"]
    parts += [f'<th scope="col"{NUM if i in right else ""}>{_e(name)}</th>' for i, name in enumerate(header)]
    parts.append("</tr></thead><tbody>")
    for r, row in enumerate(rows):
        cells = []
        for c, text in enumerate(row):
            attributes = []
            classes = ["num"] if c in right else []
            if verdicts and (r, c) in verdicts:
                classes.append(verdicts[(r, c)])
            if classes:
                attributes.append(f'class="{" ".join(classes)}"')
            if table is not None:
                value = table.rows[r][table.columns[c]]
                if is_number(value):
                    attributes.append(f'data-value="{float(value)!r}"')
                if table.columns[c] == "module" and names is not None:
                    attributes.append(f'style="padding-left: {0.7 + 1.2 * module_depth(names[r]):.1f}em" '
                                      f'title="{_e(names[r])}"')
            cells.append(f"<td{' ' + ' '.join(attributes) if attributes else ''}>{_e(text)}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _compare_verdicts(report: Report) -> dict[tuple[int, int], str]:
    """``(row, column) -> 'better' | 'worse'`` for the change cells of a compare table."""
    if report.KIND != "compare":
        return {}
    marks = {}
    for r, row in enumerate(report.rows):
        for i, change in enumerate(row.changes):
            if change.verdict in ("better", "worse"):
                marks[(r, 4 + 2 * i)] = change.verdict
    return marks


def _preamble(report: Report) -> str:
    lines = report._preamble()
    return "".join(f'<p class="subtitle">{_e(line)}</p>' for line in lines)


def notes_html(notes: Sequence[str]) -> str:
    """The notes as an HTML list, every one escaped (``""`` for none)."""
    if not notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{_e(note)}</li>" for note in notes) + "</ul>"


# ------------------------------------------------------------------------------ charts
def _leaves(names: Sequence[str]) -> list[int]:
    """Indices of rows with no descendant among the rows (the root counts only when alone)."""
    leaves = []
    for index, name in enumerate(names):
        prefix = name + "."
        if name == "" and len(names) > 1:
            continue
        if not any(other.startswith(prefix) for other in names if other != name):
            leaves.append(index)
    return leaves


def _time_columns(report: TableReport) -> list[str]:
    return [c for c in report.columns if c not in LAYER_CHART_COLUMNS and _TIME_COLUMN.search(c)
            and any(is_number(row[c]) for row in report.rows)]


def layer_charts(report: TableReport, top: int = TOP_BARS) -> list[str]:
    """SVG bar charts of where MACs, parameters, output memory and time go, over leaf modules."""
    names = qualified_names(report.rows)
    types = {name: row.get("type") for name, row in zip(names, report.rows)}
    leaves = _leaves(names)
    root = next((row for row, name in zip(report.rows, names) if name == ""), None)
    specs = {c: spec for c, spec in LAYER_CHART_COLUMNS.items() if c in report.columns}
    for column in _time_columns(report):
        specs[column] = ("Where the time goes", "seconds", "s", True)
    charts = []
    for column, (title, kind, unit, additive) in specs.items():
        values = [(names[i], float(report.rows[i][column])) for i in leaves if is_number(report.rows[i][column])]
        if not any(v > 0 for _, v in values):
            continue
        total = float(root[column]) if additive and root is not None and is_number(root[column]) else \
            (sum(v for _, v in values) if additive else 0.0)
        values.sort(key=lambda item: -item[1])
        nonzero = [item for item in values if item[1] > 0]
        shown, rest = nonzero[:top], nonzero[top:]

        def text(value: float) -> str:
            share = f" ({format_number(100 * value / total, 3)} %)" if additive and total > 0 else ""
            return _format(value, kind, unit) + share

        bars = [Bar(_bar_label(name, types.get(name)), value, text(value)) for name, value in shown]
        if rest and additive:  # a sum of outputs of different modules would mean nothing
            rest_value = sum(v for _, v in rest)
            bars.append(Bar(f"{len(rest)} other modules", rest_value, text(rest_value), tone="rest"))
        if additive and root is not None:
            outside = total - sum(v for _, v in values)
            if outside > 0.5e-9 * max(total, 1):
                bars.append(Bar("(outside leaf modules)", outside, text(outside), tone="rest",
                                tooltip="run directly in a parent module's forward, not inside any leaf module"))
        zero = len(values) - len(nonzero)
        subtitle = (f"{len(values)} leaf modules" + (f", top {len(shown)}" if rest else "")
                    + (f", {zero} at 0 not shown" if zero else "")
                    + (f"; total {_format(total, kind, unit)}" if additive and total > 0 else ""))
        charts.append(bar_chart(f"{title}: {report.title.split(': ', 1)[-1]}", bars, subtitle=subtitle))
    return charts


def _bar_label(name: str, kind: object) -> str:
    """A bar's label: the module's qualified name and its type (``features.0 (Conv2d)``)."""
    name = name or "(model)"
    return f"{name} ({kind})" if kind else name


def compare_chart(report: CompareReport) -> str:
    """A ratio chart of every ratio-compared metric of every model against the reference."""
    bars = []
    several = len(report.names) > 2
    for row in report.rows:
        if row.comparative not in ("lower is better", "higher is better"):
            continue
        for name, change in zip(report.names[1:], row.changes):
            if change.ratio is None or not change.ratio > 0:
                continue
            bars.append(RatioBar(name if several else row.name, float(change.ratio), change.text, change.verdict,
                                 group=row.name if several else ""))
    if not bars:
        return ""
    others = ", ".join(report.names[1:])
    return ratio_chart(f"{others} against {report.reference}", bars,
                       subtitle="ratio to the reference, log scale; green is better, red is worse")


# ------------------------------------------------------------------------------ assembly
def _charts_block(charts: Sequence[str]) -> str:
    charts = [c for c in charts if c]
    return '<div class="charts">' + "\n".join(charts) + "</div>" if charts else ""


def report_section(report: Report, anchor: str = "", heading: bool = True, collapse_table: bool = False) -> str:
    """One report as an HTML ``<section>``: heading, charts, table, notes."""
    parts = [f'<section id="{_e(anchor)}">' if anchor else "<section>"]
    if heading:
        parts.append(f"<h2>{_e(report.title)}</h2>")
    parts.append(_preamble(report))
    if report.KIND == "compare":
        parts += [f'<div class="scroll">{_table(report, sortable=False, caption=not heading)}</div>',
                  _charts_block([compare_chart(report)])]
    elif is_layer_table(report):
        table = f'<div class="scroll">{_table(report, sortable=True, caption=not heading)}</div>'
        if collapse_table:
            table = f"<details><summary>per-layer table ({len(report.rows)} rows, sortable)</summary>{table}</details>"
        parts += [_charts_block(layer_charts(report)), table]
    else:
        parts.append(f'<div class="wide">{_table(report, sortable=report.KIND == "table", caption=not heading)}'
                     "</div>")
    parts.append(notes_html(report._notes()))
    parts.append("</section>")
    return "\n".join(p for p in parts if p)


def document(title: str, sections: Sequence[str], subtitle: str = "", nav: Sequence[tuple[str, str]] = ()) -> str:
    """A complete, self-contained HTML page around ``sections`` (HTML strings)."""
    links = " ".join(f'<a href="#{_e(anchor)}">{_e(label)}</a>' for anchor, label in nav)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>", f"<style>body {{ margin: 2em; background: #fff; }}{CSS}</style>", "</head>",
        '<body><div class="deeplite-like-report">', f"<h1>{_e(title)}</h1>",
        f'<p class="subtitle">{_e(subtitle + " - " if subtitle else "")}deeplite-like {_e(__version__)}; '
        "a self-contained page: no script or style is loaded from elsewhere</p>",
        f"<nav>{links}</nav>" if len(nav) > 1 else "",
        *sections,
        f"</div><script>{SORT_JS}</script>", "</body>", "</html>", ""])


def to_html(*reports: Report, title: str | None = None, subtitle: str = "") -> str:
    """One self-contained HTML page showing ``reports`` in order (tables, charts, notes)."""
    if not reports:
        raise ValueError("to_html needs at least one report")
    for report in reports:
        if not isinstance(getattr(type(report), "KIND", None), str):
            raise TypeError(f"to_html renders Report objects, got {type(report).__name__}")
    anchors = [f"section-{index + 1}" for index in range(len(reports))]
    sections = [report_section(report, anchor) for report, anchor in zip(reports, anchors)]
    nav = [(anchor, report.title) for anchor, report in zip(anchors, reports)]
    return document(title or reports[0].title, sections, subtitle=subtitle, nav=nav)


def fragment(report: Report) -> str:
    """The report as an HTML ``<div>`` for notebooks: scoped style, charts, table, notes, sorting.

    It fits a 900 px notebook cell: the fragment is at most 900 px wide and a table wider than
    that scrolls sideways inside it instead of being cut.
    """
    body = report_section(report, heading=False)
    return (f'<div class="deeplite-like-report"><style>{CSS}</style>\n<div class="cell">{body}</div>\n'
            f"<script>{SORT_JS}</script></div>")


# -- The training-memory page -----------------------------------------------------------------------

MAX_POINTS = 600


def _buckets(timeline: Sequence[tuple[str, int]]) -> list[tuple[int, str, int]]:
    """(first operator index, phase, largest live bytes) per bucket; a bucket never spans two phases."""
    size = max(1, math.ceil(len(timeline) / MAX_POINTS))
    points: list[tuple[int, str, int]] = []
    for index, (phase, live) in enumerate(timeline):
        if points and points[-1][1] == phase and index - points[-1][0] < size:
            start, _, top = points[-1]
            points[-1] = (start, phase, max(top, live))
        else:
            points.append((index, phase, live))
    return points


def timeline_chart(timeline: Sequence[tuple[str, int]], title: str = "Live memory during the step",
                   subtitle: str = "", width: int = 760, height: int = 320) -> str:
    """Live bytes (y) after each operator (x), one polyline per phase, the peak marked."""
    left, right, top, bottom = 80, 20, TITLE_SPACE + 10, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    points = _buckets(timeline)
    largest = max((live for _, _, live in points), default=0)
    scale = pick_scale(largest, "bytes")
    ticks = _nice_ticks(largest / scale.factor if largest else 1.0)
    count = max(1, len(timeline) - 1)

    def fx(index: int) -> float:
        return left + plot_w * index / count

    def fy(value: float) -> float:
        return top + plot_h - plot_h * value / scale.factor / ticks[-1]

    body = [f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#d9e2ec"/>']
    for tick in ticks:
        y = top + plot_h - plot_h * tick / ticks[-1]
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eef2f6"/>')
        body.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#52606d">'
                    f"{_e(f'{tick:g} {scale.prefix}B')}</text>")
    body.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#1f2933">'
                f"operators, in the order they ran ({len(timeline)})</text>")
    phases = list(dict.fromkeys(phase for _, phase, _ in points))
    for number, phase in enumerate(phases):
        colour = PALETTE[number % len(PALETTE)]
        path = " ".join(f"{fx(i):.1f},{fy(v):.1f}" for i, p, v in points if p == phase)
        body.append(f'<polyline class="series" points="{path}" fill="none" stroke="{colour}" stroke-width="1.5">'
                    f"<title>{_e(phase)}</title></polyline>")
        body.append(f'<text x="{left + 8 + 110 * number}" y="{top + 16}" fill="{colour}">{_e(phase)}</text>')
    if points:
        index, phase, live = max(points, key=lambda p: p[2])
        body.append(f'<circle class="point peak" cx="{fx(index):.1f}" cy="{fy(live):.1f}" r="4" fill="#c62828">'
                    f"<title>{_e(f'peak {format_bytes(live)} ({live} B) in {phase}')}</title></circle>")
    return _svg("timeline-chart", width, height, title, subtitle, body)


def training_memory_page(report: Mapping[str, Any], title: str) -> str:
    """A self-contained HTML page for the JSON form of a ``TrainingMemory`` (``commands/memory.py``)."""
    rows = [("parameters", "params_bytes"), ("gradients", "grads_bytes"), ("optimizer states", "optimizer_bytes"),
            ("activations (end of forward)", "activations_bytes"), ("peak", "peak_bytes")]
    bars = [Bar(label, report[key], f"{format_bytes(report[key])}", tone="worse" if key == "peak_bytes" else "neutral")
            for label, key in rows]
    table = ["<table><thead><tr><th>phase</th><th>start</th><th>peak</th><th>end</th></tr></thead><tbody>"]
    for phase in report["phases"]:
        table.append(f"<tr><td>{_e(phase['name'])}</td>" + "".join(
            f"<td>{_e(format_bytes(phase[k]))}</td>" for k in ("start_bytes", "peak_bytes", "end_bytes")) + "</tr>")
    table.append("</tbody></table>")
    allowance = report["allowance"]
    notes = (f"<p>Peak at {_e(report['peak_at'])}. Not seen, apart (not in the peak): allocator rounding "
             f"{_e(format_bytes(allowance['rounding_bytes']))}, cuBLAS workspace "
             f"{_e(format_bytes(allowance['cublas_workspace_bytes']))}, CUDA context about "
             f"{_e(format_bytes(allowance['cuda_context_bytes']))}.</p>")
    section = "\n".join(['<section><div class="charts">',
                         bar_chart("Where the memory goes", bars, subtitle="bytes per rank"),
                         timeline_chart([tuple(p) for p in report["timeline"]]),
                         "</div>", *table, notes, "</section>"])
    return document(title, [section])
