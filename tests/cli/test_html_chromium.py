"""The HTML report in a real browser: headless Chromium renders the charts and sorts the table.

Needs Debian's ``chromium`` (``apt-get install -y chromium``; ``.ci/run`` installs it). The page
gets a probe script appended after its own: it measures every chart's bars as laid out by
the browser, clicks the MACs header of the per-layer table twice, and writes what it saw
into the DOM, which ``--dump-dom`` returns after the scripts ran.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed here "
                                "(apt-get install -y chromium; .ci/run installs it)")

PROBE = """<script>
(function () {
  var charts = Array.prototype.map.call(document.querySelectorAll('svg.chart'), function (svg) {
    var box = svg.getBoundingClientRect();
    var bars = Array.prototype.map.call(svg.querySelectorAll('rect.bar'), function (r) {
      return r.getBoundingClientRect().width; });
    return {kind: svg.getAttribute('class'), width: box.width, height: box.height, bars: bars,
            title: svg.querySelector('title').textContent};
  });
  var table = document.querySelector('table.sortable');
  var headers = Array.prototype.map.call(table.tHead.rows[0].cells, function (th) { return th.textContent; });
  var col = headers.indexOf('MACs');
  function column() {
    return Array.prototype.map.call(table.tBodies[0].rows, function (row) {
      return Number(row.cells[col].getAttribute('data-value')); });
  }
  var before = column();
  table.tHead.rows[0].cells[col].click();
  var first = column(), firstSort = table.tHead.rows[0].cells[col].getAttribute('aria-sort');
  table.tHead.rows[0].cells[col].click();
  var second = column(), secondSort = table.tHead.rows[0].cells[col].getAttribute('aria-sort');
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({charts: charts, headers: headers, before: before, first: first,
    firstSort: firstSort, second: second, secondSort: secondSort});
  document.body.appendChild(out);
})();
</script>"""

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def _probe(page: Path, tmp_path: Path) -> dict:
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("</body>", PROBE + "\n</body>"))
    result = _chromium(tmp_path, "--dump-dom", probed.as_uri())
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert match, f"the probe did not run; chromium said: {result.stderr[-2000:]}"
    return json.loads(html.unescape(match.group(1)))


@pytest.mark.slow  # (about 3 s here)
def test_profile_page_renders_its_charts_and_sorts_its_table(tmp_path, cli):
    page = tmp_path / "resnet_small.html"
    code, _, err = cli("profile", "zoo:resnet_small", "--min-run-time", "0.01", "-o", str(page), "--no-progress")
    assert code == 0, err
    seen = _probe(page, tmp_path)
    titles = [chart["title"] for chart in seen["charts"]]
    assert titles == ["Where the MACs go: ResNetSmall", "Where the parameters are: ResNetSmall",
                      "Output memory per module: ResNetSmall", "Where the time goes: ResNetSmall"]
    for chart in seen["charts"]:
        assert chart["width"] > 300 and chart["height"] > 100
        assert chart["bars"] and max(chart["bars"]) > 100  # the largest bar is drawn, long
    # MACs: the four 3x3 convolutions of 2,359,296 MACs tie for the longest bar.
    assert seen["charts"][0]["bars"][:4] == [max(seen["charts"][0]["bars"])] * 4
    # the first click sorts numbers largest first, the second reverses.
    assert seen["before"] != seen["first"]
    assert seen["first"] == sorted(seen["before"], reverse=True) and seen["firstSort"] == "descending"
    assert seen["second"] == sorted(seen["before"]) and seen["secondSort"] == "ascending"
    assert seen["first"][0] == 12_501_632  # the whole model (docs/zoo.rst)

    shot = tmp_path / "resnet_small.png"
    result = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,2000", page.as_uri())
    assert shot.exists(), result.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a page of charts, not a blank one


def test_compare_page_renders_the_ratio_chart(tmp_path, cli):
    page = tmp_path / "compare.html"
    code, _, err = cli("compare", "zoo:resnet_small", "zoo:resnet_small_student", "--metrics",
                       "macs,params,size,layers", "-o", str(page), "--no-progress")
    assert code == 0, err
    seen = _probe(page, tmp_path)
    ratio = seen["charts"][0]
    assert ratio["kind"] == "chart ratio-chart" and ratio["title"] == "resnet_small_student against resnet_small"
    # MACs, total and trainable params, model size: all about 4x smaller, so 4 long bars.
    assert len(ratio["bars"]) == 4 and min(ratio["bars"]) > 100
    per_layer = [c["title"] for c in seen["charts"][1:]]
    assert per_layer.count("Where the MACs go: resnet_small (ResNetSmall)") == 1
    assert per_layer.count("Where the MACs go: resnet_small_student (ResNetSmall)") == 1


CELL_PROBE = """<script>
(function () {
  var cell = document.querySelector('.cell'), table = cell.querySelector('table'), box = table.parentElement;
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({cell: cell.getBoundingClientRect().width, table: table.scrollWidth,
    box: box.getBoundingClientRect().width, page: document.documentElement.scrollWidth,
    scrolls: box.scrollWidth > box.clientWidth});
  document.body.appendChild(out);
})();
</script>"""


def test_notebook_fragment_fits_a_900_px_cell(tmp_path):
    from deeplite_like.reports import TableReport

    columns = ["module"] + [f"metric_{i}" for i in range(14)]
    rows = [{"module": f"encoder.layers.{i}.self_attention.out_proj", **{c: 123_456_789 * (i + 1) for c in columns[1:]}}
            for i in range(5)]
    wide = TableReport("Per-layer summary: Wide", columns, rows)
    page = tmp_path / "cell.html"
    # in a 1400 px window: the fragment holds itself to a 900 px notebook cell
    page.write_text(f'<!DOCTYPE html><html><body style="margin:0">{wide._repr_html_()}{CELL_PROBE}</body></html>')
    result = _chromium(tmp_path, "--dump-dom", "--window-size=1400,900", page.as_uri())
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.S)
    assert match, result.stderr[-2000:]
    seen = json.loads(html.unescape(match.group(1)))
    assert seen["table"] > 900  # the table alone is wider than the cell...
    # ...so it scrolls sideways in its box inside the cell, neither cut nor overflowing the cell
    assert seen["cell"] <= 900 and seen["box"] <= 900 and seen["scrolls"]
    assert seen["page"] <= 1400
