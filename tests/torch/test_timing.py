"""measure_execution_time: structural truths only (no assertion depends on this machine's speed)."""
from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.timing import TimingStats, measure_execution_time

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
    # at least the 2 warm-up forwards plus one timed forward per measurement
    assert model.calls >= 2 + stats.times * stats.number_per_run


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

    stats = measure_execution_time(Probe(), (torch.randn(2, 2),), **FAST)
    assert stats.num_threads == before and set(seen) == {before}
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
