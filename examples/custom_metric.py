"""Register your own metrics next to the built-in ones: weight sparsity and an energy estimate.

Run it from the repository root (needs torch)::

    python examples/custom_metric.py [--output compare.md]

Two user metrics, two ways of registering them:

* ``Sparsity`` (percent of weight-matrix entries that are exactly zero), a plain function of the
  model wrapped in ``ExternalProfilerFunction``;
* ``EnergyEstimate`` (joules per batch), a ``ProfilerFunction`` subclass that runs the model on
  its data split to count MACs per layer. Its option ``skip_zeros`` is piped by name from
  ``compare(..., skip_zeros=True)`` like any built-in option.

The energy model is the classic 45 nm estimate (Horowitz, ISSCC 2014): a 32-bit float
multiply-accumulate costs 3.7 pJ + 0.9 pJ = 4.6 pJ, and reading one 32-bit weight from DRAM
640 pJ; every weight is read once per batch. Dense hardware does every MAC; hardware that skips
zero weights does only those with a non-zero weight (per layer: MACs x its weight density).

A dense MLP and the same MLP with half of each weight matrix pruned are compared. By hand, for
Linear(64, 32) -> ReLU -> Linear(32, 10) on one sample:

* MACs 64*32 + 32*10 = 2,368; parameters 2,048 + 32 + 320 + 10 = 2,410;
* dense energy 2,368 * 4.6 + 2,410 * 640 = 10,892.8 + 1,542,400 = 1,553,292.8 pJ = 1.553 uJ,
  the same for both models (pruning does not help dense hardware);
* pruned, zero-skipping: 1,184 MACs and 1,184 + 42 = 1,226 weights read:
  1,184 * 4.6 + 1,226 * 640 = 5,446.4 + 784,640 = 790,086.4 pJ = 0.7901 uJ, 1.97x less;
* sparsity 0 % and 50 % (1,184 of 2,368 weight entries are zero): +50.00 pts.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Mapping

import torch
from torch import nn

from deeplite_like import Comparative, ExternalProfilerFunction, ForwardPass, Metric, ProfilerFunction, compare
from deeplite_like.backends.torch import TorchProfiler, count_ops

PJ_PER_MAC = 4.6  # fp32 multiply (3.7 pJ) + add (0.9 pJ), 45 nm
PJ_PER_WEIGHT_READ = 640.0  # one 32-bit DRAM read, 45 nm
DENSE_PJ = 2_368 * PJ_PER_MAC + 2_410 * PJ_PER_WEIGHT_READ  # 1,553,292.8 pJ, derived in the docstring
SKIPPING_PJ = 1_184 * PJ_PER_MAC + 1_226 * PJ_PER_WEIGHT_READ  # 790,086.4 pJ


class Sparsity(Metric):
    NAME = "sparsity"
    FRIENDLY_NAME = "Weight sparsity"
    DESCRIPTION = "Percent of the entries of weight matrices and kernels (dim >= 2) that are exactly zero."
    BASE_UNIT = "%"
    COMPARATIVE = Comparative.DIFFERENCE  # compared in points, higher is better


class EnergyEstimate(Metric):
    NAME = "energy"
    FRIENDLY_NAME = "Energy estimate"
    DESCRIPTION = ("4.6 pJ per fp32 MAC + 640 pJ per weight read from DRAM (45 nm, Horowitz 2014), "
                   "for one batch.")
    BASE_UNIT = "J"
    UNIT_KIND = "seconds"  # the SI sub-unit ladder (m, u, n) that seconds use suits joules too: 1.553 uJ
    COMPARATIVE = Comparative.LOWER_IS_BETTER
    DECREASE_WORD, INCREASE_WORD = "less", "more"


def sparsity(model: nn.Module) -> float:
    """Percent of weight entries (parameters with 2 or more dimensions) equal to zero."""
    weights = [p for p in model.parameters() if p.dim() >= 2]
    zeros = sum(int((w == 0).sum()) for w in weights)
    return 100.0 * zeros / sum(w.numel() for w in weights)


class ComputeEnergy(ProfilerFunction):
    """Joules of one batch: MACs (per layer, times its weight density when skipping zeros) and weight reads."""

    def get_bounded_status_keys(self):
        return (EnergyEstimate,)

    def __call__(self, model: nn.Module, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, skip_zeros: bool = False) -> float:
        args, kwargs = forward_pass.inputs_for(data_splits, "test", batch_size=batch_size)
        with torch.no_grad():
            counted = count_ops(model, *args, kwargs=kwargs)
        macs = 0.0
        for name, module in model.named_modules():
            weight = getattr(module, "weight", None)
            if isinstance(weight, torch.Tensor) and not any(True for _ in module.children()):
                density = float((weight != 0).float().mean()) if skip_zeros else 1.0
                macs += counted.by_module[name].macs * density
        reads = sum(int((p != 0).sum()) if skip_zeros else p.numel() for p in model.parameters())
        return (macs * PJ_PER_MAC + reads * PJ_PER_WEIGHT_READ) * 1e-12


def prune_half(model: nn.Module) -> nn.Module:
    """Zero the smaller half (by magnitude) of every weight matrix, in place."""
    with torch.no_grad():
        for weight in (p for p in model.parameters() if p.dim() >= 2):
            threshold = weight.abs().flatten().kthvalue(weight.numel() // 2).values
            weight[weight.abs() <= threshold] = 0.0
    return model


def build(seed: int = 0) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="also save the report (.md, .html, .json, .csv, .txt)")
    parser.add_argument("--min-run-time", type=float, default=0.2, help="seconds of timed runs per model")
    args = parser.parse_args(argv)

    data = {"test": [torch.randn(1, 64, generator=torch.Generator().manual_seed(0))]}
    profilers = []
    for name, model in (("dense", build()), ("pruned", prune_half(build()))):
        profiler = TorchProfiler(model, data, name=name)
        profiler.register_profiler_function(ExternalProfilerFunction(sparsity, Sparsity))
        profiler.register_profiler_function(ComputeEnergy())
        profilers.append(profiler)

    options = dict(batch_size=1, min_run_time=args.min_run_time)
    dense_hw = compare(profilers, **options)
    print("On dense hardware:", dense_hw, sep="\n")
    skipping_hw = compare(profilers, **options, skip_zeros=True)  # only the energy is recomputed
    print("\nOn hardware that skips zero weights:", skipping_hw, sep="\n")

    energy = {name: profiler.get_status("energy").value for name, profiler in zip(("dense", "pruned"), profilers)}
    assert abs(energy["dense"] - DENSE_PJ * 1e-12) < 1e-18, energy  # the dense model reads every weight anyway
    assert abs(energy["pruned"] - SKIPPING_PJ * 1e-12) < 1e-18, energy
    assert profilers[1].get_status("sparsity").value == 50.0
    if args.output:
        print(f"saved {skipping_hw.save(args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
