"""One observation pass: MACs, peak memory and the per-layer table read from one instrumented forward.

The model is an MLP whose figures are derived by hand (batch 4, fp32):

* MACs: Linear(1000, 1000) is 4 * 1000 * 1000 = 4,000,000, Linear(1000, 10) is 4 * 1000 * 10 =
  40,000: 4,040,000 in all; FLOPs are 2 per MAC plus the bias adds and the ReLU
  (4 * 1000 + 4 * 1000 + 4 * 10 = 8,040): 8,088,040.
* peak memory (``test_memory.test_hand_derived_peak_no_grad``): the input 16,000 B, then h1
  (16,000) and h2 (16,000) alive together: 48,000 B, reached by the ReLU in module ``'1'``.
* layer table: module ``'0'`` takes 4x1000 and gives 4x1000 (16,000 B), ``'2'`` gives 4x10 (160 B).
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch import TorchProfiler
from deeplite_like.backends.torch.compute import (ComputeComplexity, ComputeLayerwiseSummary, ComputeMemory,
                                                  ComputeParams, ComputeSize)
from deeplite_like.backends.torch.counting import count_ops
from deeplite_like.backends.torch.counting.engine import observe
from deeplite_like.backends.torch.memory import peak_activation_memory
from deeplite_like.backends.torch.params import layerwise_summary

MACS = 4 * 1000 * 1000 + 4 * 1000 * 10
FLOPS = 2 * MACS + 4 * 1000 + 4 * 1000 + 4 * 10
PEAK = 48_000


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(1000, 1000), nn.ReLU(), nn.Linear(1000, 10)).eval()


class ForwardCounter:
    """The user's own hook on the root module: every forward the profiler runs, instrumented or not."""

    def __init__(self, model: nn.Module) -> None:
        self.calls = 0
        model.register_forward_pre_hook(self._count)

    def _count(self, module: nn.Module, args: tuple) -> None:
        self.calls += 1


def test_one_observation_gives_counts_memory_and_layers():
    x = torch.randn(4, 1000)
    with torch.no_grad():
        seen = observe(mlp(), (x,), {}, memory=True, layers=True)
    assert (seen.counts.macs, seen.counts.flops) == (MACS, FLOPS)
    assert seen.memory.peak_bytes == PEAK and seen.memory.peak_at == "aten.relu.default in '1'"
    assert seen.memory.input_bytes == 16_000 and seen.memory.output_bytes == 160
    facts = {name: (f.input_shapes, f.output_shapes, f.activation_bytes) for name, f in seen.layers.items()}
    assert facts["0"] == ("4x1000", "4x1000", 16_000)
    assert facts["2"] == ("4x1000", "4x10", 160)
    assert facts[""] == ("4x1000", "4x10", 160)


def test_the_views_agree_with_the_observation():
    model, x = mlp(), torch.randn(4, 1000)
    with torch.no_grad():
        counted = count_ops(model, x)
    assert (counted.macs, counted.flops) == (MACS, FLOPS)
    assert peak_activation_memory(model, (x,)).peak_bytes == PEAK
    rows = {row["module"]: row for row in layerwise_summary(model, (x,)).rows}
    assert (rows["0"]["output_shapes"], rows["0"]["activation_bytes"], rows["0"]["macs"]) == ("4x1000", 16_000,
                                                                                            4_000_000)
    assert rows[""]["params"] == 1000 * 1000 + 1000 + 1000 * 10 + 10


def test_default_status_runs_one_instrumented_forward_plus_the_timing():
    model = mlp()
    counter = ForwardCounter(model)
    profiler = TorchProfiler.from_inputs(model, torch.randn(4, 1000))
    profiler.compute_network_status(batch_size=4, min_run_time=0.01)
    timing = profiler.get_status("execution_time").details["forwards"]
    assert timing >= 5
    assert counter.calls == 1 + timing  # one instrumented forward feeds MACs, memory and the layer table
    assert profiler.get_status("macs").value == MACS
    assert profiler.get_status("peak_activation_memory").value == PEAK
    rows = {row["module"]: row for row in profiler.get_status("layerwise_summary").value.rows}
    assert rows["1"]["activation_bytes"] == 16_000


def untimed(model: nn.Module, x: torch.Tensor) -> TorchProfiler:
    """A profiler with every default function but the timing (MACs, params, size, memory, layers)."""
    profiler = TorchProfiler.from_inputs(model, x, register_defaults=False)
    for function in (ComputeComplexity, ComputeParams, ComputeSize, ComputeMemory, ComputeLayerwiseSummary):
        profiler.register_default_function(function())
    return profiler


def test_figures_shared_equal_figures_measured_alone():
    model, x = mlp(), torch.randn(4, 1000)
    together = untimed(model, x)
    together.compute_network_status(batch_size=4)
    for key in ("macs", "flops", "peak_activation_memory", "memory_footprint"):
        assert untimed(model, x).compute_status(key, batch_size=4) == together.get_status(key).value, key


def test_backward_complexity_is_its_own_pass():
    # backward=True counts a training step under autograd, not the no_grad observation: two
    # instrumented forwards (the counted step, and the observation that memory and layers read).
    model = mlp()
    counter = ForwardCounter(model)
    profiler = untimed(model, torch.randn(4, 1000))
    profiler.compute_network_status(batch_size=4, backward=True)
    assert counter.calls == 2
    phases = profiler.get_status("macs").details
    assert phases["forward MACs"].value == MACS and profiler.get_status("macs").value > MACS


@pytest.mark.parametrize("meta", [False, True])
def test_options_that_differ_get_their_own_observation(meta):
    model = mlp()
    counter = ForwardCounter(model)
    profiler = untimed(model, torch.randn(4, 1000))
    profiler.compute_network_status(batch_size=4, meta=meta)
    profiler.compute_network_status(batch_size=8, meta=meta)
    assert counter.calls == 2  # one observation per batch size (on meta too: functional_call runs the module)
    assert profiler.get_status("macs").value == 2 * MACS
    assert profiler.get_status("peak_activation_memory").value == 2 * PEAK


@pytest.mark.parametrize("warm_up, calls", [(1, 3), (0, 3), (3, 5)])
def test_get_model_profile_counts_once_then_times(warm_up, calls):
    import deeplite_like

    model = mlp()
    counter = ForwardCounter(model)
    profile = deeplite_like.get_model_profile(model, args=(torch.randn(4, 1000),), print_profile=False,
                                              warm_up=warm_up)
    # the counted call is the first warm-up call; then warm_up - 1 more, one timed call (no hook on it:
    # the module timers would add their cost to the latency), and one call timing each module:
    # 3 calls by default (4 before: a separate warm-up)
    assert counter.calls == calls
    assert (profile.macs, profile.flops) == (MACS, FLOPS)
    assert profile.phases["forward"].latency_s > 0 and profile.root.latency_s > 0
    assert sum(child.latency_s for child in profile.root.children) <= profile.root.latency_s


class MatmulBlock(nn.Module):
    """``x @ w`` on a 3-D ``x``: aten.mm on the flattened input, then ``_unsafe_view`` back to 3-D."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, x):
        return torch.matmul(x, self.w)


def test_meta_replay_keeps_views_without_an_alias_annotation():
    # _unsafe_view returns a view of its input although its schema declares no alias: replaying it as a
    # fresh tensor would add a storage the real run never allocates. Two identical blocks: the second's
    # ops are replayed. Real and meta peaks agree: input 2*4*8*4 = 256 B; block 1's mm output 256 B
    # (viewed as 2x4x8, no new storage); block 2's mm output 256 B while block 1's is alive -> 768 B.
    model, x = nn.Sequential(MatmulBlock(), MatmulBlock()), torch.randn(2, 4, 8)
    real, meta = peak_activation_memory(model, (x,)), peak_activation_memory(model, (x,), meta=True)
    assert real.peak_bytes == meta.peak_bytes == 768
    assert real.allocated_bytes == meta.allocated_bytes == 512
