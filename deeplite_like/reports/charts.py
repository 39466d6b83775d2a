"""Charts as inline SVG text, drawn in Python: no plotting library, no script, no network.

Four kinds, each a pure function from data to an ``<svg>`` element:

* ``bar_chart``: horizontal bars with a label and a value text each (where the MACs go);
* ``ratio_chart``: one bar per metric on a log scale centred at 1x, coloured by verdict
  (how a student compares with its teacher);
* ``line_chart``: one or more series of points (latency or throughput against batch size);
* ``roofline_chart``: points on log-log axes under a device's roof (FLOP/s against FLOPs per byte).

Every text is escaped. Bars carry ``class="bar"``, points ``class="point"``, so a test can
find them; every bar and point has a ``<title>`` tooltip with its exact value.
"""
from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from deeplite_like.units import format_number, scaled

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d")
TONES = {"better": "#2e7d32", "worse": "#c62828", "same": "#757575", "n/a": "#9e9e9e", "neutral": PALETTE[0],
         "rest": "#b0b7c3"}
ROW = 22  # pixels per bar
TITLE_SPACE = 44


@dataclass(frozen=True)
class Bar:
    """One bar: ``value`` sets its length, ``text`` is written beside it, ``tone`` its colour."""

    label: str
    value: float
    text: str
    tone: str = "neutral"
    tooltip: str = ""


@dataclass(frozen=True)
class RatioBar:
    """One metric of one model against the reference: ``ratio`` = other / reference (> 0).

    ``group`` (the metric's name) is written once above its bars when several models are
    compared; ``label`` then names the model.
    """

    label: str
    ratio: float
    text: str
    tone: str = "neutral"
    group: str = ""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _shorten(text: str, limit: int) -> str:
    """Keep the end of a long dotted module name (``\u2026layer4.1.conv2``)."""
    return text if len(text) <= limit else "\u2026" + text[-(limit - 1):]


def _cut(text: str, limit: int) -> str:
    """Keep the start of a long label (``Computational compl\u2026``)."""
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _svg(kind: str, width: int, height: int, title: str, subtitle: str, body: list[str]) -> str:
    # xmlns names the SVG namespace (nothing is fetched); it lets a chart be saved as a .svg file too.
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {kind}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" font-family="{_e(FONT)}" font-size="12">',
            f"<title>{_e(title)}</title>",
            f'<text class="chart-title" x="0" y="16" font-size="14" font-weight="600" fill="#1f2933">{_e(title)}</text>']
    if subtitle:
        head.append(f'<text x="0" y="33" fill="#52606d">{_e(subtitle)}</text>')
    return "\n".join(head + body + ["</svg>"])


def bar_chart(title: str, bars: Sequence[Bar], subtitle: str = "", width: int = 640, label_width: int = 190,
              text_width: int = 160) -> str:
    """Horizontal bars, longest = the largest value; labels on the left, ``text`` on the right."""
    height = TITLE_SPACE + ROW * max(1, len(bars)) + 8
    area = width - label_width - text_width
    largest = max((b.value for b in bars if b.value > 0), default=0)
    body = []
    for index, bar in enumerate(bars):
        y = TITLE_SPACE + index * ROW
        length = 0.0 if largest <= 0 or bar.value <= 0 else max(1.0, area * bar.value / largest)
        colour = TONES.get(bar.tone, bar.tone)
        tip = bar.tooltip or f"{bar.label}: {bar.text}"
        body.append(f'<text x="{label_width - 8}" y="{y + 15}" text-anchor="end" fill="#1f2933">'
                    f"<title>{_e(bar.label)}</title>{_e(_shorten(bar.label, 28))}</text>")
        body.append(f'<rect class="bar" x="{label_width}" y="{y + 3}" width="{length:.1f}" height="{ROW - 6}" '
                    f'rx="2" fill="{colour}"><title>{_e(tip)}</title></rect>')
        body.append(f'<text x="{label_width + length + 6:.1f}" y="{y + 15}" fill="#3e4c59">{_e(bar.text)}</text>')
    if not bars:
        body.append(f'<text x="0" y="{TITLE_SPACE + 15}" fill="#52606d">nothing to show</text>')
    return _svg("bar-chart", width, height, title, subtitle, body)


def _ratio_span(ratios: Sequence[float]) -> float:
    """The half-width of the log axis: the next power of 2 at or above the largest factor (>= 2)."""
    largest = max((max(r, 1 / r) for r in ratios if r > 0 and math.isfinite(r)), default=2.0)
    return 2.0 ** max(1, math.ceil(math.log2(largest) - 1e-9))


def _ratio_tick(value: float) -> str:
    return f"{value:g}x" if value >= 1 else f"1/{1 / value:g}x"


def ratio_chart(title: str, bars: Sequence[RatioBar], subtitle: str = "", width: int = 720,
                label_width: int = 230, text_width: int = 130) -> str:
    """Bars from 1x to each ratio on a log2 axis (left: other is lower, right: higher)."""
    span = _ratio_span([b.ratio for b in bars])
    groups = [b.group for b in bars]
    group_rows = sum(1 for i, g in enumerate(groups) if g and (i == 0 or groups[i - 1] != g))
    top = TITLE_SPACE + 18
    height = top + ROW * (max(1, len(bars)) + group_rows) + 8
    area = width - label_width - text_width
    centre = label_width + area / 2
    half = area / 2 - 4
    levels = round(math.log2(span))

    def x_of(ratio: float) -> float:
        return centre + half * max(-1.0, min(1.0, math.log2(ratio) / levels))

    body = []
    step = max(1, round(levels / 3))
    for power in [0] + [sign * p for p in range(step, levels + 1, step) for sign in (-1, 1)]:
        x = x_of(2.0 ** power)
        body.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 6}" '
                    f'stroke="{"#52606d" if power == 0 else "#d9e2ec"}" stroke-width="1"/>')
        body.append(f'<text x="{x:.1f}" y="{top - 7}" text-anchor="middle" fill="#52606d">'
                    f"{_e(_ratio_tick(2.0 ** power))}</text>")
    y = top
    for index, bar in enumerate(bars):
        if bar.group and (index == 0 or bars[index - 1].group != bar.group):
            body.append(f'<text x="0" y="{y + 15}" font-weight="600" fill="#1f2933">{_e(bar.group)}</text>')
            y += ROW
        end = x_of(bar.ratio) if bar.ratio > 0 and math.isfinite(bar.ratio) else centre
        left, length = min(centre, end), abs(end - centre)
        colour = TONES.get(bar.tone, bar.tone)
        full = f"{bar.group}: {bar.label}" if bar.group else bar.label
        body.append(f'<text x="{label_width - 8}" y="{y + 15}" text-anchor="end" fill="#1f2933">'
                    f"<title>{_e(full)}</title>{_e(_cut(bar.label, 30))}</text>")
        body.append(f'<rect class="bar" x="{left:.1f}" y="{y + 3}" width="{max(length, 1.0):.1f}" height="{ROW - 6}" '
                    f'rx="2" fill="{colour}"><title>{_e(f"{full}: {bar.text} (ratio {bar.ratio:.4g})")}</title>'
                    "</rect>")
        body.append(f'<text x="{width - text_width + 8}" y="{y + 15}" fill="{colour}">{_e(bar.text)}</text>')
        y += ROW
    if not bars:
        body.append(f'<text x="0" y="{top + 15}" fill="#52606d">no metric has a ratio to show</text>')
    return _svg("ratio-chart", width, height, title, subtitle, body)


def _nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (steps of 1, 2, 2.5 or 5 x 10^k)."""
    if top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] < top - 1e-12 * top:
        ticks.append(ticks[-1] + step)
    return ticks


def line_chart(title: str, series: Mapping[str, Sequence[tuple[float, float]]], x_label: str, y_label: str,
               subtitle: str = "", x_log2: bool = False, y_format: Callable[[float], str] = lambda v: f"{v:g}",
               x_format: Callable[[float], str] = lambda v: f"{v:g}", width: int = 640, height: int = 340,
               spreads: Mapping[str, Sequence[tuple[float, float]]] | None = None) -> str:
    """Points joined by lines, one colour per series; the y axis starts at 0.

    ``spreads`` (series name -> ``(x, width)``) draws a vertical whisker of that width centred on
    the series' point at ``x`` (e.g. the interquartile range of a timing).
    """
    spreads = spreads or {}
    left, right, top, bottom = 70, 20, TITLE_SPACE + 10, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    points = [p for values in series.values() for p in values]
    xs = sorted({x for x, _ in points})

    def fx(x: float) -> float:
        lo, hi = (math.log2(xs[0]), math.log2(xs[-1])) if x_log2 else (xs[0], xs[-1])
        v = math.log2(x) if x_log2 else x
        return left + (plot_w * (v - lo) / (hi - lo) if hi > lo else plot_w / 2)

    widths = {(name, x): w for name, values in spreads.items() for x, w in values}
    tops = [y + widths.get((name, x), 0) / 2 for name, values in series.items() for x, y in values]
    ticks = _nice_ticks(max(tops, default=1.0))

    def fy(y: float) -> float:
        return top + plot_h - plot_h * y / ticks[-1]

    body = [f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#d9e2ec"/>']
    for tick in ticks:
        body.append(f'<line x1="{left}" y1="{fy(tick):.1f}" x2="{left + plot_w}" y2="{fy(tick):.1f}" stroke="#eef2f6"/>')
        body.append(f'<text x="{left - 6}" y="{fy(tick) + 4:.1f}" text-anchor="end" fill="#52606d">'
                    f"{_e(y_format(tick))}</text>")
    for x in xs:
        body.append(f'<text x="{fx(x):.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#52606d">'
                    f"{_e(x_format(x))}</text>")
    body.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#1f2933">'
                f"{_e(x_label)}</text>")
    body.append(f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" fill="#1f2933" '
                f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{_e(y_label)}</text>')
    for index, (name, values) in enumerate(series.items()):
        colour = PALETTE[index % len(PALETTE)]
        ordered = sorted(values)
        path = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in ordered)
        body.append(f'<polyline class="series" points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in ordered:
            spread = widths.get((name, x), 0)
            if spread > 0:
                body.append(f'<line class="spread" x1="{fx(x):.1f}" y1="{fy(max(0.0, y - spread / 2)):.1f}" '
                            f'x2="{fx(x):.1f}" y2="{fy(y + spread / 2):.1f}" stroke="{colour}" stroke-width="1.5"/>')
            body.append(f'<circle class="point" cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3.5" fill="{colour}">'
                        f"<title>{_e(f'{name}: {x_format(x)} -> {y_format(y)}')}</title></circle>")
        if len(series) > 1:
            body.append(f'<text x="{left + 8}" y="{top + 16 + 16 * index}" fill="{colour}">{_e(name)}</text>')
    return _svg("line-chart", width, height, title, subtitle, body)


@dataclass(frozen=True)
class RoofPoint:
    """One point of a roofline chart: ``intensity`` in FLOPs per byte, ``flops_per_s`` achieved or predicted."""

    label: str
    intensity: float
    flops_per_s: float
    tone: str = "neutral"
    tooltip: str = ""


def _decades(low: float, high: float) -> tuple[int, int]:
    """The powers of 10 just below ``low`` and just above ``high``."""
    return math.floor(math.log10(low) + 1e-9), math.ceil(math.log10(high) - 1e-9)


def _power_label(power: int, unit: str = "") -> str:
    value, shown = scaled(10.0 ** power, "count", unit) if unit else (10.0 ** power, "")
    return f"{value:g} {shown}".rstrip()


def _rate(value: float, unit: str) -> str:
    """``'87.99 GFLOP/s'``: 4 significant digits, SI prefix."""
    number, shown = scaled(value, "count", unit)
    return f"{format_number(float(number))} {shown}"


def roofline_chart(title: str, points: Sequence[RoofPoint], bandwidth: float, ceilings: Mapping[str, float],
                   subtitle: str = "", width: int = 640, height: int = 400) -> str:
    """A roofline on log-log axes: x FLOPs per byte, y FLOP/s; one circle (``class="point"``) per point.

    The roof (``class="roof"``): the memory slope ``bandwidth`` (bytes/s) x intensity, rising to each
    ceiling of ``ceilings`` (label -> peak FLOP/s), flat from that ceiling's ridge point (peak /
    bandwidth) on. A point with no FLOPs or no bytes has no place on log axes: it is left out and
    counted under the plot.
    """
    if bandwidth <= 0 or not ceilings or min(ceilings.values()) <= 0:
        raise ValueError(f"roofline_chart needs a positive bandwidth and peaks, got {bandwidth} and {dict(ceilings)}")
    drawn = [p for p in points if p.intensity > 0 and p.flops_per_s > 0
             and math.isfinite(p.intensity) and math.isfinite(p.flops_per_s)]
    ridges = [peak / bandwidth for peak in ceilings.values()]
    x_lo, x_hi = _decades(min([p.intensity for p in drawn] + ridges) / 10, max([p.intensity for p in drawn] + ridges) * 10)
    top_peak = max(ceilings.values())
    y_lo, y_hi = _decades(min([p.flops_per_s for p in drawn] + [bandwidth * 10.0 ** x_lo]), top_peak * 2)
    left, right, top, bottom = 86, 20, TITLE_SPACE + 10, 48
    plot_w, plot_h = width - left - right, height - top - bottom

    def fx(x: float) -> float:
        return left + plot_w * (math.log10(x) - x_lo) / (x_hi - x_lo)

    def fy(y: float) -> float:
        return top + plot_h - plot_h * (math.log10(y) - y_lo) / (y_hi - y_lo)

    body = [f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#d9e2ec"/>']
    for power in range(x_lo, x_hi + 1):
        body.append(f'<line x1="{fx(10.0 ** power):.1f}" y1="{top}" x2="{fx(10.0 ** power):.1f}" y2="{top + plot_h}" '
                    'stroke="#eef2f6"/>')
        body.append(f'<text x="{fx(10.0 ** power):.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#52606d">'
                    f"{_e(_power_label(power))}</text>")
    for power in range(y_lo, y_hi + 1):
        body.append(f'<line x1="{left}" y1="{fy(10.0 ** power):.1f}" x2="{left + plot_w}" y2="{fy(10.0 ** power):.1f}" '
                    'stroke="#eef2f6"/>')
        body.append(f'<text x="{left - 6}" y="{fy(10.0 ** power) + 4:.1f}" text-anchor="end" fill="#52606d">'
                    f"{_e(_power_label(power, 'FLOP/s'))}</text>")
    body.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle" fill="#1f2933">'
                "arithmetic intensity (FLOPs per byte)</text>")
    body.append(f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" fill="#1f2933" '
                f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">FLOP/s</text>')
    x_min = 10.0 ** x_lo
    slope_end = max(ridges)
    bw_text = _rate(bandwidth, "B/s")
    body.append(f'<line class="roof" x1="{fx(x_min):.1f}" y1="{fy(bandwidth * x_min):.1f}" x2="{fx(slope_end):.1f}" '
                f'y2="{fy(top_peak):.1f}" stroke="#1f2933" stroke-width="2"><title>memory roof: {_e(bw_text)}'
                "</title></line>")
    for index, (label, peak) in enumerate(sorted(ceilings.items(), key=lambda item: -item[1])):
        ridge, y = peak / bandwidth, fy(peak)
        dash = "" if index == 0 else ' stroke-dasharray="5 3"'
        peak_text = _rate(peak, "FLOP/s")
        body.append(f'<line class="roof" x1="{fx(ridge):.1f}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                    f'stroke="#1f2933" stroke-width="2"{dash}><title>{_e(label)} peak: {_e(peak_text)}, ridge point '
                    f"{ridge:.3g} FLOPs/byte</title></line>")
        body.append(f'<text x="{left + plot_w - 4}" y="{y - 5:.1f}" text-anchor="end" fill="#1f2933">'
                    f"{_e(label)} {_e(peak_text)}</text>")
    body.append(f'<text x="{fx(x_min) + 4:.1f}" y="{fy(bandwidth * x_min) - 14:.1f}" fill="#1f2933">{_e(bw_text)}</text>')
    for point in drawn:
        colour = TONES.get(point.tone, point.tone)
        tip = point.tooltip or f"{point.label}: {point.intensity:.3g} FLOPs/byte, {point.flops_per_s:.3g} FLOP/s"
        body.append(f'<circle class="point" cx="{fx(point.intensity):.1f}" cy="{fy(point.flops_per_s):.1f}" r="4" '
                    f'fill="{colour}" fill-opacity="0.8"><title>{_e(tip)}</title></circle>')
    left_out = len(points) - len(drawn)
    if left_out:
        body.append(f'<text x="{left + 6}" y="{top + 14}" fill="#52606d">{left_out} not drawn (no FLOPs or no bytes)'
                    "</text>")
    return _svg("roofline-chart", width, height, title, subtitle, body)
