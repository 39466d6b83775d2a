"""StatusReport and the renderings every report shares (text, dict, JSON, CSV, Markdown, HTML, save)."""
from __future__ import annotations

import csv
import io
import json
import re

import pytest

from deeplite_like import metrics as M
from deeplite_like.metrics.status_keys import Comparative, Metric
from deeplite_like.reports import StatusReport

MiB = 2**20


class Custom(Metric):
    NAME = "custom"
    FRIENDLY_NAME = "Custom <score>"
    BASE_UNIT = "pts"
    DESCRIPTION = "A user metric."
    COMPARATIVE = Comparative.DIFFERENCE


def statuses() -> dict:
    # Inserted out of the built-in order on purpose; flops is registered but not computed.
    return {
        "custom": Custom(3),
        "execution_time": M.ExecutionTime(0.0021, {"min": M.ExecutionTime(0.0019), "runs": 100}),
        "layerwise_summary": M.LayerwiseSummary(object()),
        "model_size": M.ModelSize(42 * MiB),
        "flops": M.Flops(),
        "macs": M.Macs(1_500_000_000),
    }


# Rows, derived by hand:
#   macs 1.5e9 -> G scale: 1.5, 4 significant digits -> "1.500" GMACs
#   model_size 42 * 2**20 B -> MiB scale: 42 -> "42.00" MiB
#   execution_time 0.0021 s -> ms scale: 2.1 -> "2.100" ms
#   custom 3 (int, unit "pts", plain kind: factor 1 keeps the int) -> "3" pts
EXPECTED_ROWS = [
    ["Computational complexity", "1.500", "GMACs"],
    ["Model size", "42.00", "MiB"],
    ["Execution time", "2.100", "ms"],
    ["Custom <score>", "3", "pts"],
]


def test_rows_in_builtin_order_then_user_keys_non_metrics_and_uncomputed_left_out():
    report = StatusReport("resnet", "torch", statuses())
    assert [list(row) for row in report.to_table().rows] == EXPECTED_ROWS
    assert report.to_table().field_names == ["Metric", "Value", "Unit"]
    assert report.title == "resnet (backend: torch)"


def test_user_keys_keep_insertion_order():
    class Other(Custom):
        NAME = "other"
        FRIENDLY_NAME = "Other"

    report = StatusReport("m", "torch", {"other": Other(1), "custom": Custom(2), "macs": M.Macs(7)})
    assert [row.key for row in report.rows] == ["macs", "other", "custom"]


def test_text_is_the_table_then_notes():
    short = StatusReport("resnet", "torch", statuses())
    assert str(short) == short.to_table().get_string()
    lines = str(short).splitlines()
    assert "resnet (backend: torch)" in lines[1]
    assert "| Model size               | 42.00 | MiB   |" in lines  # value right-aligned, others left


def test_long_print_adds_descriptions_and_formatted_details():
    report = StatusReport("resnet", "torch", statuses(), short_print=False)
    notes = str(report).splitlines()[-4:]
    assert notes[0] == f"- Computational complexity: {M.Macs.DESCRIPTION}"
    # details: the Metric detail formats itself (0.0019 s -> "1.900 ms"); a plain number has no unit
    assert notes[2] == f"- Execution time: {M.ExecutionTime.DESCRIPTION} [min: 1.900 ms, runs: 100]"
    assert notes[3] == "- Custom <score>: A user metric."


def test_dict_has_raw_and_display_values():
    data = StatusReport("resnet", "torch", statuses()).to_dict()
    assert (data["report"], data["name"], data["backend"]) == ("status", "resnet", "torch")
    size = data["metrics"][1]
    assert size == {
        "key": "model_size", "name": "Model size", "value": 44040192, "unit": "B",
        "display_value": 42.0, "display_unit": "MiB", "display": "42.00", "comparative": "lower is better",
        "description": M.ModelSize.DESCRIPTION, "details": {}, "options": {},
    }
    time = data["metrics"][2]
    # 0.0021 s / 1e-3 = 2.1 ms (the float noise 2.0999999999999996 is rounded off the display value)
    assert (time["value"], time["display_value"], time["display_unit"]) == (0.0021, 2.1, "ms")
    assert time["details"] == {"min": {"value": 0.0019, "unit": "s"}, "runs": 100}
    assert data["metrics"][3]["value"] == 3 and isinstance(data["metrics"][3]["value"], int)


def test_json_round_trips():
    report = StatusReport("resnet", "torch", statuses(), short_print=False)
    assert json.loads(report.to_json()) == report.to_dict()
    assert report.to_json(indent=None).count("\n") == 0


def test_csv_is_parseable_with_exact_values():
    rows = list(csv.DictReader(io.StringIO(StatusReport("resnet", "torch", statuses()).to_csv())))
    assert [row["key"] for row in rows] == ["macs", "model_size", "execution_time", "custom"]
    assert rows[0] == {"model": "resnet", "backend": "torch", "key": "macs", "name": "Computational complexity",
                       "value": "1500000000", "unit": "MACs", "display_value": "1.5", "display_unit": "GMACs",
                       "options": "", "details": ""}
    assert float(rows[2]["value"]) == 0.0021
    assert json.loads(rows[2]["details"]) == {"min": {"value": 0.0019, "unit": "s"}, "runs": 100}


def test_markdown_table_shape_and_escaping():
    report = StatusReport("a|b <x>", "torch", statuses(), short_print=False)
    lines = report.to_markdown().splitlines()
    assert lines[0] == r"**a\|b \<x\> (backend: torch)**"
    assert lines[1] == ""
    table = lines[2:2 + 2 + len(EXPECTED_ROWS)]
    unescaped_pipes = [len(re.findall(r"(?<!\\)\|", line)) for line in table]
    assert unescaped_pipes == [4] * len(table)  # 3 columns on every line
    assert re.fullmatch(r"\| :-+ *\| *-+: *\| :-+ *\|", table[1])  # left, right, left
    assert [cell.strip() for cell in table[2].strip("|").split("|")] == ["Computational complexity", "1.500", "GMACs"]
    assert r"Custom \<score\>" in table[5]
    notes = lines[2 + len(table) + 1:]
    assert notes[-1] == r"- Custom \<score\>: A user metric."


def test_html_escapes_names_and_values():
    html = StatusReport("<b>model</b>", "torch", statuses(), short_print=False)._repr_html_()
    assert "<b>" not in html
    assert "&lt;b&gt;model&lt;/b&gt; (backend: torch)" in html
    assert "<td>Custom &lt;score&gt;</td>" in html
    assert html.startswith('<div class="deeplite-like-report">') and html.rstrip().endswith("</div>")


@pytest.mark.parametrize("suffix, method", [(".json", "to_json"), (".csv", "to_csv"), (".md", "to_markdown"),
                                            (".txt", "to_text"), (".html", "to_html")])
def test_save_picks_the_format_from_the_extension(tmp_path, suffix, method):
    report = StatusReport("resnet", "torch", statuses())
    path = report.save(tmp_path / f"report{suffix}")
    assert path.read_text(encoding="utf-8").rstrip("\n") == getattr(report, method)().rstrip("\n")


def test_save_refuses_an_unknown_extension(tmp_path):
    with pytest.raises(ValueError, match=r"'\.xlsx'.*\.json"):
        StatusReport("resnet", "torch", statuses()).save(tmp_path / "report.xlsx")


def test_report_is_a_snapshot():
    status = statuses()
    report = StatusReport("resnet", "torch", status)
    status["macs"].value = 1
    assert report.to_dict()["metrics"][0]["value"] == 1_500_000_000


def test_empty_status_gives_an_empty_table():
    report = StatusReport("m", "keras", {"flops": M.Flops()})
    assert report.to_dict()["metrics"] == []
    assert list(csv.reader(io.StringIO(report.to_csv()))) == [StatusReport.CSV_COLUMNS]
