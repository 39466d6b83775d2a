"""CompareReport: common scale per row, change wording, 3 models, not computed, units, names."""
from __future__ import annotations

import csv
import io
import json

import pytest

from deeplite_like import metrics as M
from deeplite_like.metrics.status_keys import Comparative, Metric
from deeplite_like.reports import CompareReport

MiB = 2**20
Accuracy = M.EvalMetricDefault


class Latency(Metric):
    NAME = "latency"
    FRIENDLY_NAME = "Latency"
    BASE_UNIT = "s"
    UNIT_KIND = "seconds"
    COMPARATIVE = Comparative.LOWER_IS_BETTER
    DECREASE_WORD = "faster"
    INCREASE_WORD = "slower"


class LatencyMs(Latency):
    BASE_UNIT = "ms"
    UNIT_KIND = "plain"


class FractionAccuracy(Metric):
    NAME = "eval_metric"
    FRIENDLY_NAME = "Evaluation metric"
    COMPARATIVE = Comparative.DIFFERENCE


def teacher() -> dict:
    return {"model_size": M.ModelSize(42 * MiB), "macs": M.Macs(556_700_000), "execution_time": M.ExecutionTime(0.002),
            "eval_metric": Accuracy(76.83), "layerwise_summary": M.LayerwiseSummary("table")}


def student() -> dict:
    return {"model_size": M.ModelSize(921_600), "macs": M.Macs(120_000_000), "execution_time": M.ExecutionTime(0.001),
            "eval_metric": Accuracy(76.13)}


def test_two_models_common_scale_and_wording():
    report = CompareReport([("teacher", "torch", teacher()), ("student", "torch", student())])
    table = report.to_table()
    assert table.field_names == ["Metric", "Unit", "teacher", "student", "student vs teacher"]
    assert [list(row) for row in table.rows] == [
        # 556.7e6 MACs -> teacher's scale M: 556.7 and 120.0; 556.7 / 120 = 4.639 -> "4.64x fewer"
        ["Computational complexity", "MMACs", "556.7", "120.0", "4.64x fewer"],
        # 921,600 B in the teacher's MiB scale (not KiB): 921600 / 1048576 = 0.87890625 -> "0.8789";
        # 44040192 / 921600 = 47.787 -> "47.79x smaller"
        ["Model size", "MiB", "42.00", "0.8789", "47.79x smaller"],
        # 2 ms vs 1 ms: 2 / 1 -> "2.00x faster"
        ["Execution time", "ms", "2.000", "1.000", "2.00x faster"],
        # 76.13 - 76.83 = -0.70 pts
        ["Evaluation metric", "%", "76.83", "76.13", "-0.70 pts"],
    ]
    assert report.title == "Comparison: teacher (torch, reference) vs student (torch)"


def test_three_models_and_not_computed():
    tiny = {"macs": M.Macs(55_670_000), "model_size": M.ModelSize()}  # size registered, not computed
    report = CompareReport([("teacher", "torch", teacher()), ("student", "torch", student()),
                            ("tiny", "keras", tiny)])
    table = report.to_table()
    assert table.field_names == ["Metric", "Unit", "teacher", "student", "student vs teacher",
                                 "tiny", "tiny vs teacher"]
    rows = {row[0]: list(row) for row in table.rows}
    # 55.67e6 in MMACs: 55.67; 556.7 / 55.67 = 10 -> "10.00x fewer"
    assert rows["Computational complexity"][5:] == ["55.67", "10.00x fewer"]
    assert rows["Model size"][5:] == ["not computed", "not computed"]
    assert rows["Evaluation metric"][5:] == ["not computed", "not computed"]  # key absent from tiny
    data = report.to_dict()
    assert [m["name"] for m in data["models"]] == ["teacher", "student", "tiny"]
    assert data["models"][2]["backend"] == "keras"
    size = data["metrics"][1]
    assert size["values"]["tiny"] == {"value": None, "unit": "B", "display_value": None, "display": "not computed", "options": {}}
    assert size["changes"]["tiny"] == {"text": "not computed", "verdict": "n/a", "ratio": None, "difference": None}


def test_reference_not_computed_uses_first_computed_scale():
    report = CompareReport([("a", "torch", {"macs": M.Macs()}), ("b", "torch", {"macs": M.Macs(2_500_000)})])
    # b: 2.5e6 -> M scale -> "2.500" MMACs; a is not computed, so the change is too
    assert [list(row) for row in report.to_table().rows] == [
        ["Computational complexity", "MMACs", "not computed", "2.500", "not computed"]]


def test_key_computed_by_no_model_is_left_out_and_order_is_builtin_then_first_seen():
    class Extra(Latency):
        NAME = "extra"
        FRIENDLY_NAME = "Extra"

    a = {"latency": Latency(0.5), "flops": M.Flops(), "macs": M.Macs(10)}
    b = {"extra": Extra(1.0), "latency": Latency(0.25), "macs": M.Macs(10)}
    report = CompareReport([("a", "torch", a), ("b", "torch", b)])
    assert [row.key for row in report.rows] == ["macs", "latency", "extra"]
    # equal MACs -> "same"; 0.5 / 0.25 = 2 -> "2.00x faster"; extra only in b -> reference not computed
    assert [row.changes[0].text for row in report.rows] == ["same", "2.00x faster", "not computed"]


def test_duplicate_names_are_disambiguated():
    report = CompareReport([("model", "torch", teacher()), ("model", "torch", student()),
                            ("model", "keras", student())])
    assert report.names == ["model", "model (2)", "model (3)"]
    assert report.to_table().field_names[2:] == ["model", "model (2)", "model (2) vs model",
                                                 "model (3)", "model (3) vs model"]
    assert list(report.to_dict()["metrics"][0]["values"]) == ["model", "model (2)", "model (3)"]


def test_model_named_like_a_fixed_column_still_renders():
    report = CompareReport([("Metric", "torch", teacher()), ("Unit", "torch", student())])
    assert report.to_table().field_names == ["Metric", "Unit", "Metric (2)", "Unit (2)", "Unit vs Metric"]


def test_other_units_are_converted_into_the_reference_scale_with_a_note():
    # reference 1 ms stored in s; other 2.1 stored in ms -> 0.0021 s -> shown "2.100" in ms; 2.10x slower
    report = CompareReport([("ref", "torch", {"latency": Latency(0.001)}), ("new", "torch", {"latency": LatencyMs(2.1)})])
    assert [list(row) for row in report.to_table().rows] == [["Latency", "ms", "1.000", "2.100", "2.10x slower"]]
    assert str(report).splitlines()[-1] == "- Latency: new's value converted from 'ms' to 's'"
    cell = report.to_dict()["metrics"][0]["values"]["new"]
    assert (cell["value"], cell["unit"], cell["display_value"]) == (2.1, "ms", 2.1)


def test_unrelated_units_are_shown_in_their_own_unit_never_refused():
    report = CompareReport([("ref", "torch", {"eval_metric": Accuracy(76.8)}),
                            ("new", "torch", {"eval_metric": FractionAccuracy(0.77)})])
    assert [list(row) for row in report.to_table().rows] == [
        ["Evaluation metric", "%", "76.80", "0.7700", "n/a (units '%' and '' differ)"]]
    assert "cannot be converted" in str(report)


def test_long_print_notes_give_direction_and_description():
    report = CompareReport([("t", "torch", teacher()), ("s", "torch", student())], short_print=False)
    notes = str(report).splitlines()[-4:]
    assert notes[0] == f"- Computational complexity (lower is better): {M.Macs.DESCRIPTION}"
    assert notes[3].startswith("- Evaluation metric (difference): ")


def test_csv_long_format_is_parseable_and_exact():
    report = CompareReport([("teacher", "torch", teacher()), ("student", "torch", student())])
    rows = list(csv.DictReader(io.StringIO(report.to_csv())))
    assert len(rows) == 4 * 2  # 4 metrics x 2 models
    ref, other = rows[2], rows[3]  # model_size
    assert (ref["model"], ref["role"], ref["value"], ref["change"]) == ("teacher", "reference", "44040192", "")
    assert (other["model"], other["role"], other["value"], other["display_value"], other["display_unit"]) == (
        "student", "compared", "921600", "0.87890625", "MiB")
    assert (other["change"], other["verdict"]) == ("47.79x smaller", "better")
    # ratio 921600 / 44040192 and difference 921600 - 44040192 = -43118592, exact
    assert float(other["ratio"]) == 921_600 / 44_040_192
    assert int(other["difference"]) == -43_118_592


def test_json_round_trip_and_markdown_shape():
    report = CompareReport([("<t>", "torch", teacher()), ("s|x", "torch", student()), ("u", "torch", student())])
    assert json.loads(report.to_json()) == report.to_dict()
    lines = report.to_markdown().splitlines()
    assert lines[0] == r"**Comparison: \<t\> (torch, reference) vs s\|x (torch) vs u (torch)**"
    table = lines[2:]
    # 7 columns -> 8 unescaped pipes per line, header + alignment + 4 rows
    assert len(table) == 6
    assert all(line.replace("\\|", "").count("|") == 8 for line in table)
    html = report._repr_html_()
    assert "<t>" not in html and "&lt;t&gt;" in html


def test_needs_two_models():
    with pytest.raises(ValueError, match="at least two"):
        CompareReport([("only", "torch", teacher())])
