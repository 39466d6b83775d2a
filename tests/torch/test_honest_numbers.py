"""Issue scenarios on real torch profilers: compare never mixes batch sizes, meta is not timed, untracked is marked.

LeNet-5 (deeplite_like.zoo): 416,520 MACs per sample (docs/zoo.rst), so 3,332,160 at batch 8.
"""
from __future__ import annotations

import csv
import io
import json
import warnings

import torch
from torch import nn

from deeplite_like.backends.torch import TorchProfiler
from deeplite_like.zoo import get

from .engine_fixtures import mystery

FAST = {"min_run_time": 0.01}


def lenet_profiler(name: str) -> TorchProfiler:
    entry = get("lenet5")
    x = entry.example_input(batch_size=8)
    return TorchProfiler(entry.build(), {"test": [(x, torch.zeros(8, dtype=torch.long))]}, name=name)


def test_student_at_batch_8_then_compare_is_not_8x():
    teacher, student = lenet_profiler("teacher"), lenet_profiler("student")
    student.compute_network_status(batch_size=8, **FAST)
    assert student.status_get("macs") == 3_332_160  # 8 * 416,520
    report = teacher.compare(student, **FAST)
    rows = {row.key: row for row in report.rows}
    for key in ("macs", "flops", "peak_activation_memory", "memory_footprint"):
        assert rows[key].cells[0].value == rows[key].cells[1].value, key
        assert rows[key].changes[0].text == "same", key
    assert rows["macs"].cells[1].value == 416_520
    assert report.options["batch_size"] == 1 and not report.differing
    assert report.to_text().startswith("Measured with: batch_size=1, ")


def test_meta_device_is_not_timed_and_says_so_in_every_format():
    profiler = lenet_profiler("meta")
    report = profiler.compute_network_status(device="meta", meta=True)
    assert report["execution_time"] is None and report["throughput"] is None
    reason = "the meta device runs no arithmetic"
    assert "Execution time, Throughput: not measured: " + reason in report.to_text()
    assert [row.display for row in report.rows if row.key in ("execution_time", "throughput")] == \
        ["not measured", "not measured"]
    metrics = {m["key"]: m for m in json.loads(report.to_json())["metrics"]}
    assert metrics["execution_time"]["value"] is None and reason in metrics["execution_time"]["details"]["not_measured"]
    rows = {row["key"]: row for row in csv.DictReader(io.StringIO(report.to_csv()))}
    assert rows["throughput"]["value"] == "" and reason in rows["throughput"]["details"]
    assert "not measured" in report.to_markdown() and "not measured" in report.to_html()
    assert report["macs"] == 416_520  # counting on meta still counts


class WithMystery(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return mystery(self.fc(x))


def test_untracked_work_is_marked_beside_the_count():
    # Linear(4, 4) at batch 2: 2*4*4 = 32 MACs; dltest.mystery has no formula (counted 0)
    profiler = TorchProfiler(WithMystery(), {"test": [(torch.randn(2, 4), torch.zeros(2))]}, name="m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = profiler.compute_network_status(batch_size=2, **FAST)
    assert report["macs"] == 32
    row = next(row for row in report.rows if row.key == "macs")
    assert row.display == ">= 32"
    assert "'>=' marks a count that misses 1 operator(s) that ran with no formula and were counted as 0: " \
           "dltest.mystery x1" in report.to_text()
    assert json.loads(report.to_json())["metrics"][0]["details"]["untracked"] == {"dltest.mystery": 1}


def test_per_module_times_reconcile_with_their_parents():
    from deeplite_like.backends.torch.latency import module_forward_times

    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(64, 64), nn.ReLU()) for _ in range(3)])
            self.head = nn.Linear(64, 8)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    model = Stack()
    times = module_forward_times(model, (torch.randn(16, 64),), repeats=7, warmup=1)
    # every module's time comes from the same forward: a parent is never less than its children
    assert times[""] >= times["blocks"] + times["head"]
    for i in range(3):
        assert times[f"blocks.{i}"] >= times[f"blocks.{i}.0"] + times[f"blocks.{i}.1"]
    # the ModuleList is never called itself: its time is its children's sum
    assert times["blocks"] == times["blocks.0"] + times["blocks.1"] + times["blocks.2"]


def test_model_profile_summary_marks_counts_missing_untracked_operators():
    import deeplite_like

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        profile = deeplite_like.get_model_profile(WithMystery(), input_shape=(2, 4), print_profile=False, warm_up=0)
    text = profile.to_text()
    assert "fwd MACs per device:" in text
    line = next(line for line in text.splitlines() if line.startswith("fwd MACs per device:"))
    assert line.split(":", 1)[1].strip() == ">= 32 MACs"  # Linear(4, 4) at batch 2; dltest.mystery counted 0
    assert "dltest.mystery x1" in text
