"""Every figure says what it was measured with; a latency verdict respects noise; untracked work is marked.

ToyModel([4, 3, 2]) at batch b: MACs = b*(4*3 + 3*2) = 18b; FLOPs = 2*18b + b*(3+2) = 41b; params 23.
"""
from __future__ import annotations

import csv
import io
import json

import pytest

from deeplite_like import Detailed, ProfilerFunction
from deeplite_like.metrics import ExecutionTime, Macs, Throughput
from deeplite_like.reports import CompareReport, StatusReport
from deeplite_like.reports.changes import WITHIN_NOISE, describe_change, noise_interval
from tests.core.toy import ToyModel, ToyProfiler


class ToyTime(ProfilerFunction):
    """A latency of 2 ms per sample with a fixed spread; refuses batch 8 (a call that fails half-way)."""

    def get_bounded_status_keys(self):
        return (ExecutionTime,)

    def __call__(self, model, batch_size=1, num_threads=None):
        if batch_size == 8:
            raise RuntimeError("out of memory at batch 8")
        median = 0.002 * batch_size
        return Detailed(median, {"batch_size": batch_size, "q1": ExecutionTime(median * 0.9),
                                 "q3": ExecutionTime(median * 1.1), "num_threads": num_threads or 1})


def timed_profiler(name: str) -> ToyProfiler:
    profiler = ToyProfiler(ToyModel([4, 3, 2]), name=name)
    profiler.register_profiler_function(ToyTime())
    return profiler


def test_compare_recomputes_a_value_cached_with_other_options():
    # The scenario: the student was computed at batch 8, then compared with no options.
    teacher, student = timed_profiler("teacher"), ToyProfiler(ToyModel([4, 3, 2]), name="student")
    student.compute_network_status(batch_size=8)
    assert student.status_get("macs") == 144  # 18 * 8
    report = teacher.compare(student)
    macs = next(row for row in report.rows if row.key == "macs")
    assert [cell.value for cell in macs.cells] == [18, 18] and macs.changes[0].text == "same"  # not "8.00x more"
    assert student.get_status("macs").options == {"batch_size": 1}
    assert report.options["batch_size"] == 1 and not report.differing
    assert report.to_text().splitlines()[0] == "Measured with: batch_size=1, num_threads=1"


def test_a_call_that_fails_half_way_leaves_a_report_that_says_which_value_is_which():
    profiler = timed_profiler("toy")
    profiler.compute_network_status(batch_size=1)
    with pytest.raises(RuntimeError, match="batch 8"):
        profiler.compute_network_status(batch_size=8)
    report = profiler.report()
    assert report["macs"] == 144 and report["execution_time"] == 0.002  # MACs at batch 8, time at batch 1
    assert report.differing == {"batch_size"}
    text = report.to_text()
    assert "Computational complexity [batch_size=8]" in text and "Execution time [batch_size=1]" in text
    assert "values measured with different batch_size carry their own in brackets" in text
    assert "Total parameters " in text and "Total parameters [" not in text  # params have no batch size
    # every format says it
    data = report.to_dict()
    assert {m["key"]: m["options"].get("batch_size") for m in data["metrics"]} == {
        "macs": 8, "flops": 8, "total_params": None, "execution_time": 1}
    rows = {row["key"]: row for row in csv.DictReader(io.StringIO(report.to_csv()))}
    assert json.loads(rows["macs"]["options"]) == {"batch_size": 8}
    assert json.loads(rows["execution_time"]["options"]) == {"batch_size": 1, "num_threads": 1}
    markdown_rows = [line for line in report.to_markdown().splitlines() if line.startswith("| Computational")]
    assert r"Computational complexity \[batch_size=8\]" in markdown_rows[0]  # brackets escaped
    assert "Execution time [batch_size=1]" in report.to_html()


def test_every_format_states_the_shared_options_once():
    report = timed_profiler("toy").compute_network_status(batch_size=2, num_threads=1)
    assert report.options == {"batch_size": 2, "num_threads": 1}
    header = "Measured with: batch_size=2, num_threads=1"
    assert report.to_text().count(header) == 1
    assert report.to_markdown().count(f"*{header}*") == 1
    assert report.to_html().count(header) == 1
    assert report.to_dict()["options"] == {"batch_size": 2, "num_threads": 1}


def _time(median: float, q1: float, q3: float) -> ExecutionTime:
    return ExecutionTime(median, {"q1": ExecutionTime(q1), "q3": ExecutionTime(q3)})


def test_latency_verdict_is_same_within_noise_when_the_quartile_ranges_overlap():
    # 1.143 ms [1.0, 1.3] vs 1.2 ms [1.1, 1.5]: the ranges overlap, so no verdict
    change = describe_change(_time(0.001143, 0.0010, 0.0013), _time(0.0012, 0.0011, 0.0015))
    assert (change.text, change.verdict) == (WITHIN_NOISE, "same")
    # 1.0 ms [0.95, 1.05] vs 1.8 ms [1.7, 1.9]: apart, so 1.8 / 1.0 = 1.80x slower
    change = describe_change(_time(0.0010, 0.00095, 0.00105), _time(0.0018, 0.0017, 0.0019))
    assert (change.text, change.verdict) == ("1.80x slower", "worse")
    # an iqr alone gives median +/- iqr/2: 10 ms +/- 1 ms
    assert noise_interval(ExecutionTime(0.010, {"iqr": ExecutionTime(0.002)})) == pytest.approx((0.009, 0.011))
    assert noise_interval(Macs(100)) is None  # a count is exact


def test_throughput_interval_and_the_spread_shown_beside_every_time():
    fast = Throughput(1000.0, {"interval": (900.0, 1100.0)})
    slow = Throughput(950.0, {"interval": (850.0, 1000.0)})
    assert describe_change(fast, slow).text == WITHIN_NOISE
    report = StatusReport("toy", "toy", {"execution_time": _time(0.002, 0.0019, 0.0023)})
    # 2 ms with q1 1.9 ms and q3 2.3 ms: IQR 0.4 ms, shown in the value's scale
    assert report.rows[0].display == "2.000 (IQR 0.4000)" and report.rows[0].display_unit == "ms"
    compared = CompareReport([("a", "toy", {"execution_time": _time(0.002, 0.0019, 0.0023)}),
                              ("b", "toy", {"execution_time": _time(0.0021, 0.0020, 0.0022)})])
    assert compared.rows[0].cells[1].display == "2.100 (IQR 0.2000)"
    assert compared.rows[0].changes[0].text == WITHIN_NOISE
    assert "interquartile ranges (IQR) overlap" in compared.to_text()
    assert "<td>same (within noise)</td>" in compared.to_html()  # neutral: neither the better nor the worse colour


def test_not_measured_is_said_in_every_format():
    time = ExecutionTime(None, {"not_measured": "the meta device runs no arithmetic"})
    report = StatusReport("toy", "toy", {"macs": Macs(18), "execution_time": time})
    assert [row.display for row in report.rows] == ["18", "not measured"]
    assert "Execution time: not measured: the meta device runs no arithmetic" in report.to_text()
    assert report.to_dict()["metrics"][1]["value"] is None
    assert report.to_dict()["metrics"][1]["details"]["not_measured"] == "the meta device runs no arithmetic"
    assert '""not_measured"":""the meta device runs no arithmetic""' in report.to_csv()
    assert "not measured" in report.to_markdown()
    assert "not measured" in report.to_html()


def test_a_count_missing_untracked_operators_is_marked_where_it_is_shown():
    macs = Macs(1000, {"untracked": {"quantized.linear_dynamic": 2}})
    report = StatusReport("toy", "toy", {"macs": macs})
    assert report.rows[0].display == ">= 1.000" and report.rows[0].display_unit == "kMACs"
    assert "misses 1 operator(s) that ran with no formula and were counted as 0: quantized.linear_dynamic x2" \
        in report.to_text()
    compared = CompareReport([("a", "toy", {"macs": macs}), ("b", "toy", {"macs": Macs(1000)})])
    assert [cell.display for cell in compared.rows[0].cells] == [">= 1.000", "1.000"]
    # a lower bound earns no verdict
    assert (compared.rows[0].changes[0].text, compared.rows[0].changes[0].verdict) == ("same (incomplete count)", "n/a")
    assert "Computational complexity of a: '>=' marks a count that misses operators that ran with no formula and " \
        "were counted as 0: quantized.linear_dynamic x2" in compared.to_text()


def test_a_noisy_timing_says_so_under_the_table():
    time = ExecutionTime(0.002, {"iqr": ExecutionTime(0.002), "spread_warning": "IQR/median is 100 %: time with 1 thread"})
    report = StatusReport("toy", "toy", {"execution_time": time})
    assert "- Execution time: IQR/median is 100 %: time with 1 thread" in report.to_text()


def test_values_measured_with_different_options_earn_no_verdict():
    # a Keras model on TensorFlow keeps its own thread count: 2 threads against 1 is not like for like
    fast = ExecutionTime(0.0010, {"q1": ExecutionTime(0.00099), "q3": ExecutionTime(0.00101)})
    slow = ExecutionTime(0.0030, {"q1": ExecutionTime(0.00299), "q3": ExecutionTime(0.00301)})
    fast.options, slow.options = {"num_threads": 1, "device": "cpu"}, {"num_threads": 2, "device": "cpu"}
    report = CompareReport([("torch", "torch", {"execution_time": fast}), ("keras", "keras", {"execution_time": slow})])
    change = report.rows[0].changes[0]
    assert (change.text, change.verdict) == ("3.00x slower (not like for like)", "n/a")
    assert report.options == {"device": "cpu"} and report.differing == {"num_threads"}
    assert "num_threads=2]" in report.to_text()
