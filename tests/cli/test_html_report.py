"""The rich HTML renderer and its SVG charts (``deeplite_like.reports.html`` / ``.charts``)."""
from __future__ import annotations

import re
import time

import pytest
import torch
from torch import nn

from deeplite_like import metrics as M
from deeplite_like.backends.torch.latency import module_forward_times
from deeplite_like.reports import CompareReport, StatusReport, TableReport
from deeplite_like.reports.charts import Bar, RatioBar, bar_chart, line_chart, ratio_chart
from deeplite_like.reports.html import fragment, layer_charts, to_html

COLUMNS = ["module", "type", "params", "macs", "activation_bytes"]


def layer_table(rows=None) -> TableReport:
    # model "" = 100 MACs; "a" (60) holds "a.x" (50) and "a.y" (10); "b" 30; 10 MACs run in the
    # root's own forward, outside every leaf: 100 - (50 + 10 + 30) = 10.
    rows = rows or [
        {"module": "", "type": "Net", "params": 40, "macs": 100, "activation_bytes": 8},
        {"module": "a", "type": "Block", "params": 30, "macs": 60, "activation_bytes": 2048},
        {"module": "a.x", "type": "Conv2d", "params": 20, "macs": 50, "activation_bytes": 4096},
        {"module": "a.y", "type": "ReLU", "params": 0, "macs": 10, "activation_bytes": 2048},
        {"module": "b", "type": "Linear<T>", "params": 10, "macs": 30, "activation_bytes": 8},
    ]
    return TableReport("Per-layer summary: Net", COLUMNS, rows)


def _bars(svg: str) -> list[tuple[str, str]]:
    """(label, value text) of each bar, in order."""
    labels = re.findall(r'text-anchor="end" fill="#1f2933"><title>([^<]*)</title>', svg)
    texts = re.findall(r'</rect>\n<text x="[\d.]+" y="[\d.]+" fill="#3e4c59">([^<]*)</text>', svg)
    return list(zip(labels, texts))


def test_layer_charts_show_leaf_modules_and_what_runs_outside_them():
    macs, params, memory = layer_charts(layer_table())
    # each bar is labelled with the module's qualified name and its type
    assert _bars(macs) == [("a.x (Conv2d)", "50 MACs (50.0 %)"), ("b (Linear&lt;T&gt;)", "30 MACs (30.0 %)"),
                           ("a.y (ReLU)", "10 MACs (10.0 %)"), ("(outside leaf modules)", "10 MACs (10.0 %)")]
    # params: leaves 20 + 10 = 30 of 40; 10 are held by parents directly.
    assert _bars(params) == [("a.x (Conv2d)", "20 (50.0 %)"), ("b (Linear&lt;T&gt;)", "10 (25.0 %)"),
                             ("(outside leaf modules)", "10 (25.0 %)")]
    # output memory is not additive: no shares, no "outside" bar, no sum of other modules.
    assert _bars(memory) == [("a.x (Conv2d)", "4.000 KiB"), ("a.y (ReLU)", "2.000 KiB"), ("b (Linear&lt;T&gt;)", "8 B")]
    assert "a.y at 0" not in params and "4 leaf" not in params and "3 leaf modules" in params


def test_bar_lengths_are_proportional_to_the_values():
    svg = bar_chart("t", [Bar("x", 100, "100"), Bar("y", 25, "25"), Bar("z", 0, "0")], width=640, label_width=190,
                    text_width=160)
    widths = [float(w) for w in re.findall(r'class="bar" x="190" y="[\d.]+" width="([\d.]+)"', svg)]
    assert widths == [290.0, 72.5, 0.0]  # area 640 - 190 - 160 = 290 pixels for the largest; 290 / 4 = 72.5


def test_many_leaves_are_summed_into_one_other_bar():
    rows = [{"module": "", "type": "Net", "params": 0, "macs": 120, "activation_bytes": 0}]
    rows += [{"module": f"m{i}", "type": "L", "params": 0, "macs": 15 - i, "activation_bytes": 0} for i in range(15)]
    # leaves m0..m14 hold 15 + 14 + ... + 1 = 120 MACs; the top 12 are 15..4, the other 3 are 3 + 2 + 1 = 6.
    (macs,) = layer_charts(TableReport("Per-layer summary: Net", COLUMNS, rows))
    bars = _bars(macs)
    assert len(bars) == 13 and bars[0] == ("m0 (L)", "15 MACs (12.5 %)") and bars[-1] == ("3 other modules", "6 MACs (5.00 %)")


def test_a_time_column_gets_its_own_chart():
    rows = [dict(row, latency_s=t) for row, t in zip(layer_table().rows, [0.004, 0.003, 0.002, 0.0005, 0.0005])]
    table = TableReport("Per-layer summary: Net", COLUMNS + ["latency_s"], rows)
    charts = layer_charts(table)
    assert len(charts) == 4 and "Where the time goes" in charts[3]
    # leaves 2 + 0.5 + 0.5 = 3 ms of 4 ms: 1 ms outside the leaves (the root's own work).
    assert _bars(charts[3]) == [("a.x (Conv2d)", "2.000 ms (50.0 %)"), ("a.y (ReLU)", "500.0 us (12.5 %)"),
                                ("b (Linear&lt;T&gt;)", "500.0 us (12.5 %)"), ("(outside leaf modules)", "1.000 ms (25.0 %)")]


def test_ratio_chart_puts_lower_left_higher_right_on_a_log_scale():
    svg = ratio_chart("t", [RatioBar("macs", 0.25, "4.00x fewer", "better"), RatioBar("time", 2.0, "2.00x slower",
                                                                                      "worse")],
                      width=720, label_width=230, text_width=130)
    # area 720 - 230 - 130 = 360, centre 230 + 180 = 410, half 176; span 4 (the largest factor),
    # 2 levels: 1/4 is a full half to the left (410 - 176 = 234), 2 half of that to the right.
    rects = re.findall(r'class="bar" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*fill="(#\w+)"', svg)
    assert rects == [("234.0", "176.0", "#2e7d32"), ("410.0", "88.0", "#c62828")]
    assert ">1x</text>" in svg and ">1/4x</text>" in svg and ">4x</text>" in svg


def test_line_chart_draws_every_point():
    svg = line_chart("latency", {"resnet": [(1, 0.5), (2, 0.8), (4, 1.5)]}, "batch size", "ms", x_log2=True)
    assert svg.count('class="point"') == 3 and 'class="series"' in svg


def statuses(macs: int, time_s: float):
    return {"macs": M.Macs(macs), "execution_time": M.ExecutionTime(time_s)}


def test_compare_page_colours_changes_and_charts_ratios():
    report = CompareReport([("<teacher>", "torch", statuses(4_000, 0.002)), ("student", "torch", statuses(1_000, 0.004))])
    page = to_html(report)
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert "&lt;teacher&gt;" in page and "<teacher>" not in page
    assert '<td class="better">4.00x fewer</td>' in page and '<td class="worse">2.00x slower</td>' in page
    assert page.count('class="bar"') == 2


def test_status_report_page_and_save(tmp_path):
    report = StatusReport("net", "torch", statuses(1_500_000_000, 0.001))
    path = report.save(tmp_path / "net.html")
    page = path.read_text()
    assert page == report.to_html() + ("" if report.to_html().endswith("\n") else "\n")
    assert "Computational complexity" in page and "1.500" in page and "GMACs" in page


def test_notebook_fragment_is_a_div_with_its_style_and_charts():
    html = layer_table()._repr_html_()
    assert html.startswith('<div class="deeplite-like-report"><style>') and html.rstrip().endswith("</div>")
    # a notebook cell: the fragment is at most 900 px wide, a wider table scrolls inside it
    assert '<div class="cell"><section>' in html and ".deeplite-like-report .cell { max-width: 900px; overflow-x: auto; }" in html
    assert html.count("<svg") == 3 and "Linear&lt;T&gt;" in html
    assert '<td class="num" data-value="100.0">100</td>' in html  # raw value for sorting, text for reading
    assert fragment(layer_table()) == html


def test_page_loads_nothing_from_elsewhere():
    page = to_html(layer_table(), StatusReport("net", "torch", statuses(1, 1.0)))
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|@import|url\(|<link|<iframe""", page)
    assert page.count("<script>") == 1


def test_to_html_refuses_what_is_not_a_report():
    with pytest.raises(ValueError, match="at least one report"):
        to_html()
    with pytest.raises(TypeError, match="renders Report objects, got dict"):
        to_html({"macs": 1})


# ------------------------------------------------------------------------------ module times
class Sleeper(nn.Module):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.seconds)
        return x


def test_module_forward_times_include_children_and_leave_the_model_as_found():
    model = nn.Sequential(Sleeper(0.004), nn.Sequential(Sleeper(0.002), Sleeper(0.002))).train()
    times = module_forward_times(model, (torch.ones(1),), repeats=3, warmup=0)
    # each sleeper takes at least its sleep; "1" holds two of 2 ms; the model all three: >= 8 ms.
    assert times["0"] >= 0.004 and times["1.0"] >= 0.002 and times["1"] >= times["1.0"] + times["1.1"] >= 0.004
    assert times[""] >= times["0"] + times["1"] >= 0.008
    assert model.training and all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_indented_layer_names_are_read_as_qualified_names():
    from deeplite_like.reports.html import qualified_names

    rows = [{"module": m} for m in ("(model)", "  block", "    conv", "    act", "  head", "layer1.0")]
    assert qualified_names(rows[:5]) == ["", "block", "block.conv", "block.act", "head"]
    assert qualified_names([{"module": ""}, {"module": "layer1.0"}]) == ["", "layer1.0"]  # already qualified
    legacy = layer_table([dict(row, module=name) for row, name in
                          zip(layer_table().rows, ["(model)", "  a", "    x", "    y", "  b"])])
    assert layer_charts(legacy)[0] == layer_charts(layer_table())[0]
