"""The training-memory page: live bytes after every operator, one colour per phase, and the categories.

Pure functions from the plain data of a ``TrainingMemory`` (no framework import) to inline SVG
and one self-contained HTML page (``html.document``). The timeline keeps, for each of at most
``MAX_POINTS`` buckets of consecutive operators, the largest live total, so the peak is drawn at
its exact height however many operators the step ran.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from deeplite_like.reports.charts import PALETTE, TITLE_SPACE, Bar, _e, _nice_ticks, _svg, bar_chart
from deeplite_like.reports.html import document
from deeplite_like.units import format_bytes, pick_scale

__all__ = ["timeline_chart", "training_memory_page", "MAX_POINTS"]

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
