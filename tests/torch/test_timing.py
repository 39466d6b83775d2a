"""measure_execution_time: structural truths only (no assertion depends on this machine's speed)."""
from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.latency import TimingStats, measure_execution_time
from deeplite_like.timing import NoisyTimingWarning

FAST = {"warmup": 1, "min_run_time": 0.05}


class Sleeper(nn.Module):
    """Forward that sleeps 10 ms, so any honest timer reads at least 0.01 s."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        time.sleep(0.01)
        return self.lin(x)


def test_sleeping_forward_reads_at_least_the_sleep():
    model = Sleeper()
    stats = measure_execution_time(model, (torch.randn(5, 4),), warmup=2, min_run_time=0.05)
    assert stats.median_s >= 0.01 and stats.min_s >= 0.01
    assert stats.batch_size == 5
    # the warm-up forwards (1: a 10 ms forward fills a block's share, 0.05 / 5 = 10 ms, alone) plus
    # one timed forward per measurement
    assert model.calls == stats.warmup_forwards + stats.times * stats.number_per_run
    assert stats.warmup_forwards == 1


def test_derived_fields_are_consistent():
    stats = measure_execution_time(nn.Linear(16, 8), (torch.randn(32, 16),), **FAST)
    assert isinstance(stats, TimingStats)
    assert stats.median_s > 0 and stats.mean_s > 0 and stats.iqr_s >= 0
    assert stats.min_s <= stats.median_s
    assert stats.per_sample_s == stats.median_s / 32
    assert stats.throughput == 32 / stats.median_s
    assert stats.times == len(stats.raw_s) >= 1 and stats.number_per_run >= 1
    assert stats.device == "cpu"


def test_threads_reported_and_restored():
    before = torch.get_num_threads()
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(torch.get_num_threads())
            return x + 1

    stats = measure_execution_time(Probe(), (torch.randn(2, 2),), num_threads=None, **FAST)
    assert stats.num_threads == before and set(seen) == {before}  # None keeps torch's count
    seen.clear()
    stats = measure_execution_time(Probe(), (torch.randn(2, 2),), **FAST)
    assert stats.num_threads == 1 and set(seen) == {1}  # the default: 1 thread (DEFAULT_NUM_THREADS)
    seen.clear()
    stats = measure_execution_time(Probe(), (torch.randn(2, 2),), num_threads=1, **FAST)
    assert stats.num_threads == 1 and set(seen) == {1}  # warm-up and timed runs alike
    assert torch.get_num_threads() == before


def test_threads_restored_when_forward_raises():
    before = torch.get_num_threads()

    class Fails(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        measure_execution_time(Fails(), (torch.randn(2, 2),), num_threads=1, **FAST)
    assert torch.get_num_threads() == before


def test_runs_under_no_grad_and_leaves_model_as_found():
    grads_enabled = []

    class Probe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(3)

        def forward(self, x):
            grads_enabled.append(torch.is_grad_enabled())
            return self.bn(x)

    model = Probe().train()
    running = model.bn.running_mean.clone()
    measure_execution_time(model, (torch.randn(4, 3) + 3.0,), **FAST)
    assert grads_enabled and not any(grads_enabled)
    assert model.training and model.bn.training  # mode left as found (train=None)
    assert torch.equal(model.bn.running_mean, running)  # training-mode BN updates undone
    assert int(model.bn.num_batches_tracked) == 0

    modes = []
    model.bn.register_forward_hook(lambda m, i, o: modes.append(m.training))
    measure_execution_time(model, (torch.randn(4, 3),), train=False, **FAST)
    assert modes and not any(modes) and model.training


def test_own_device_times_the_model_in_place_and_meta_is_refused():
    model = nn.Linear(3, 3)
    weight, ptr = model.weight, model.weight.data_ptr()
    stats = measure_execution_time(model, (torch.randn(2, 3),), device="cpu", **FAST)
    assert stats.device == "cpu" and model.weight is weight and weight.data_ptr() == ptr
    with torch.device("meta"):
        meta_model = nn.Linear(3, 3)
    with pytest.raises(ValueError, match="meta device and cannot be timed"):
        measure_execution_time(meta_model, (torch.randn(2, 3),), **FAST)


def test_argument_errors():
    with pytest.raises(ValueError, match="min_run_time must be > 0"):
        measure_execution_time(nn.Identity(), (torch.randn(2),), min_run_time=0)
    with pytest.raises(ValueError, match="num_threads must be >= 1"):
        measure_execution_time(nn.Identity(), (torch.randn(2),), num_threads=0)
    with pytest.raises(ValueError, match="pass batch_size"):
        measure_execution_time(nn.Identity(), (torch.tensor(1.0),), **FAST)
    assert measure_execution_time(nn.Identity(), (torch.tensor(1.0),), batch_size=1, **FAST).batch_size == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_copy_leaves_cpu_model_in_place():
    model = nn.Linear(64, 64)
    stats = measure_execution_time(model, (torch.randn(8, 64),), device="cuda", **FAST)
    assert stats.device.startswith("cuda") and model.weight.device.type == "cpu"


def test_the_median_rests_on_several_blocks_even_for_a_slow_model():
    class Slow(torch.nn.Module):
        def forward(self, x):
            time.sleep(0.02)
            return x

    # one forward (20 ms) fills min_run_time (10 ms) on its own; 3 blocks are still timed
    stats = measure_execution_time(Slow(), (torch.zeros(1),), warmup=0, min_run_time=0.01, min_measurements=3)
    assert stats.times >= 3 and stats.median_s >= 0.02


# -- the forwards a measurement runs (issue 17) ---------------------------------------------------
class Sleeps20ms(nn.Module):
    def forward(self, x):
        time.sleep(0.02)
        return x + 1


def hook_counter(model: nn.Module) -> list:
    calls: list = []
    model.register_forward_hook(lambda module, args, output: calls.append(1))
    return calls


def test_a_slow_model_runs_warmup_plus_the_measurements_it_needs_and_reports_them():
    model = Sleeps20ms()
    calls = hook_counter(model)
    stats = measure_execution_time(model, (torch.zeros(1),), warmup=1, min_run_time=0.05, min_measurements=3)
    # the warm-up forward (>= 20 ms) sizes blocks: 0.05 s / 3 / 0.02 s < 1 -> 1 forward a block; 3 blocks
    # (>= 60 ms) pass the 50 ms budget -> 1 + 3 forwards; the old loop ran 3 + 1 + 3 x (2 + 1) = 13
    assert len(calls) == stats.forwards == 4
    assert (stats.warmup_forwards, stats.times, stats.number_per_run) == (1, 3, 1)


def test_the_default_budget_of_a_slow_model_is_one_warmup_and_five_measurements():
    model = Sleeps20ms()
    calls = hook_counter(model)
    stats = measure_execution_time(model, (torch.zeros(1),), min_run_time=0.05)
    # defaults: warmup=2, min_measurements=5; the first warm-up forward (20 ms) fills a block's share
    # of the budget (0.05 / 5 = 10 ms) alone, which ends the warm-up; 5 blocks of one forward pass 0.05 s
    assert len(calls) == stats.forwards == 1 + 5 and stats.times == 5


def test_a_slow_clock_read_keeps_the_forwards_bounded(monkeypatch):
    real = time.perf_counter

    def slow_perf_counter() -> float:  # what importing DeepSpeed did to the timer's reads, made worse: 1 ms
        time.sleep(0.001)
        return real()

    model = nn.Linear(4, 4)
    calls = hook_counter(model)
    monkeypatch.setattr(time, "perf_counter", slow_perf_counter)
    stats = measure_execution_time(model, (torch.randn(2, 4),), warmup=2, min_run_time=0.05, min_measurements=5)
    monkeypatch.undo()
    # the calibrating forward reads >= 1 ms with the clock, so a block holds at most 0.05 / 5 / 0.001 = 10
    # forwards, and at most 3 x 5 blocks run: 2 + 150 forwards at most (blocked_autorange grew its blocks)
    assert len(calls) == stats.forwards <= 2 + 150
    assert stats.number_per_run <= 10 and 5 <= stats.times <= 15


def test_execution_time_details_report_the_forwards_counted_by_a_user_hook():
    from deeplite_like.backends.torch import ComputeExecutionTime, TorchProfiler

    model = Sleeps20ms()
    calls = hook_counter(model)
    profiler = TorchProfiler.from_inputs(model, torch.zeros(1), register_defaults=False)
    profiler.register_default_function(ComputeExecutionTime())
    profiler.compute_network_status(min_run_time=0.05)
    details = profiler.get_status("execution_time").details
    # 1 warm-up forward (20 ms fills a block's share, 10 ms, alone), then 5 one-forward blocks
    # (each >= 20 ms, so 5 pass 0.05 s)
    assert details["forwards"] == len(calls) == 6 and details["warmup_forwards"] == 1
    assert details["measurements"] == 5 and details["num_threads"] == 1  # the default: 1 thread
    assert details["q1"].value <= profiler.get_status("execution_time").value <= details["q3"].value
    assert details["iqr"].value == pytest.approx(details["q3"].value - details["q1"].value)


# -- threads: 'auto' and the noise warning -------------------------------------------------------
@pytest.fixture()
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


class ThreadProbe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def forward(self, x):
        self.seen.append(torch.get_num_threads())
        return x + 1


def test_auto_uses_one_thread_on_a_busy_machine_and_says_why(monkeypatch, two_threads):
    import deeplite_like.timing as noise

    monkeypatch.setattr(noise, "load_average", lambda: 99.0)
    model = ThreadProbe()
    with pytest.warns(NoisyTimingWarning, match="the machine was busy"):
        stats = measure_execution_time(model, (torch.zeros(2),), num_threads="auto", **FAST)
    assert stats.num_threads == 1 and set(model.seen) == {1} and len(model.seen) == stats.forwards
    assert stats.threads_reason.startswith("num_threads='auto': 1 thread because the machine was busy")
    assert "1-minute load average 99.0" in stats.spread_warning and torch.get_num_threads() == 2


def test_auto_keeps_all_threads_when_no_contention_is_seen(monkeypatch, two_threads):
    import deeplite_like.backends.torch.latency as timing
    import deeplite_like.timing as noise

    monkeypatch.setattr(noise, "load_average", lambda: 0.0)
    monkeypatch.setattr(timing, "spread_note", lambda median, iqr, threads: "")
    model = ThreadProbe()
    stats = measure_execution_time(model, (torch.zeros(2),), num_threads="auto", **FAST)
    assert stats.num_threads == 2 and set(model.seen) == {2}
    assert stats.threads_reason == "num_threads='auto': all 2 threads (no contention seen)"


def test_auto_measures_again_at_one_thread_when_all_threads_are_noisy(monkeypatch, two_threads):
    import deeplite_like.backends.torch.latency as timing
    import deeplite_like.timing as noise

    monkeypatch.setattr(noise, "load_average", lambda: 0.0)
    monkeypatch.setattr(timing, "spread_note", lambda median, iqr, threads: f"the spread is large (at {threads})")
    model = ThreadProbe()
    stats = measure_execution_time(model, (torch.zeros(2),), num_threads="auto", **FAST)
    switch = model.seen.index(1)
    # first a whole measurement at 2 threads, then one at 1 thread; every forward is counted
    assert set(model.seen[:switch]) == {2} and set(model.seen[switch:]) == {1}
    assert stats.num_threads == 1 and stats.forwards == len(model.seen)
    assert stats.warmup_forwards == switch + 1  # the discarded 2-thread run + the 1-thread warm-up (FAST: 1)
    assert stats.threads_reason == "num_threads='auto': 1 thread because the spread is large (at 2)"


def test_a_large_spread_is_warned_with_what_to_do(monkeypatch, two_threads):
    import deeplite_like.timing as noise

    monkeypatch.setattr(noise, "load_average", lambda: 0.0)
    # 2 warm-ups, then 5 blocks; 1 ms against 20 ms, so that a loaded machine (a 1 ms sleep taking a few ms)
    # still shows the spread
    durations = iter([0.02] * 2 + [0.001, 0.001, 0.02, 0.02, 0.02])

    class Erratic(nn.Module):
        def forward(self, x):
            time.sleep(next(durations))
            return x

    with pytest.warns(NoisyTimingWarning, match=r"execution time of Erratic: latency may be noise: the spread is "
                                                r"large \(IQR \d+% of the median, above 20%, at 2 threads\)"):
        stats = measure_execution_time(Erratic(), (torch.zeros(1),), num_threads=2, warmup=2, min_run_time=0.001,
                                       min_measurements=5)
    assert "time with 1 thread (num_threads=1, --num-threads 1)" in stats.spread_warning
    assert stats.times == 5  # 1 ms .. 20 ms blocks: q1 = 1 ms, q3 = 20 ms, median 20 ms -> IQR 95 %
