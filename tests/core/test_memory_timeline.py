"""The training-memory timeline chart: buckets keep the peak, one polyline per phase, escaped text."""
from __future__ import annotations

import re

from deeplite_like.reports import html as memory_timeline
from deeplite_like.reports.html import _buckets, timeline_chart


def test_buckets_keep_each_bucket_maximum_and_never_mix_phases(monkeypatch):
    monkeypatch.setattr(memory_timeline, "MAX_POINTS", 2)
    timeline = [("forward", 1), ("forward", 9), ("forward", 3), ("forward", 2), ("backward", 5), ("backward", 4)]
    # 6 operators into at most 2 points -> buckets of 3 operators, cut at the phase change.
    assert _buckets(timeline) == [(0, "forward", 9), (3, "forward", 2), (4, "backward", 5)]


def test_chart_marks_the_exact_peak_and_draws_a_line_per_phase():
    timeline = [("forward", 100), ("forward", 3 * 2**20), ("backward", 2**20), ("optimizer", 5 * 2**20 + 7)]
    svg = timeline_chart(timeline, title="<step>")
    assert svg.count('<polyline class="series"') == 3
    assert "&lt;step&gt;" in svg and "<step>" not in svg
    peak = re.search(r'<circle class="point peak"[^>]*><title>([^<]*)</title>', svg).group(1)
    assert peak == "peak 5.000 MiB (5242887 B) in optimizer"
    assert ">6 MiB</text>" in svg  # y ticks in MiB, up to the first round tick above the peak
