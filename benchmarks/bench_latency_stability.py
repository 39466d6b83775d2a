"""How stable the reported latency is: the coefficient of variation of ``execution_time``'s median.

    python benchmarks/bench_latency_stability.py             # the figures in docs/benchmarks.rst
    python benchmarks/bench_latency_stability.py --repeats 20 --models lenet5
    python benchmarks/bench_latency_stability.py --status --models resnet18   # the status's shared warm-up

For each model, ``execution_time`` is measured ``--repeats`` times (10) for each thread setting:
1 thread, all of torch's threads (``torch.get_num_threads()`` at start) and ``'auto'``, the
settings taking turns (1, all, auto, 1, all, auto, ...) so that load from other processes that
drifts during the run weighs on each alike. Each measurement is what ``compute_network_status``
runs for ``execution_time`` (``measure_execution_time`` with ``min_run_time=0.2``, 2 warm-up
forwards, at least 5 measurements). Per setting the table gives the median of the 10 reported
medians, their coefficient of variation (standard deviation / mean: how much the reported
figure moves from one profile to the next), the median within-run spread (IQR / median), how
many of the 10 carried a noise warning, and the forwards each ran. The 1-minute load average is
printed before and after.

``--status``: the execution time as ``compute_network_status()`` reports it at the defaults, where
the instrumented forward is the timing's warm-up, against the same status with the timing's own
warm-up (as when ``torch._dynamo`` is loaded), taking turns: the median and CV of each.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

import torch
from prettytable import PrettyTable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.resnet18 import ResNet18  # noqa: E402
from deeplite_like.backends.torch.latency import measure_execution_time  # noqa: E402


def _resnet18() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return ResNet18().eval(), torch.randn(1, 3, 224, 224)


def _lenet5() -> tuple[torch.nn.Module, torch.Tensor]:
    from deeplite_like.zoo import get

    entry = get("lenet5")
    return entry.build().eval(), entry.example_input(batch_size=1)


MODELS = {"resnet18": _resnet18, "lenet5": _lenet5}


def status_warmup(models: list[str], repeats: int) -> None:
    from deeplite_like.backends.torch import TorchProfiler, compute as functions

    table = PrettyTable(["model", "timing warm-up", "median", "CV of the median", "warm-up forwards"])
    for name in models:
        model, x = MODELS[name]()
        results: dict[str, list] = {"the status's forward": [], "its own": []}
        original = functions.compiled_code_possible
        try:
            for _ in range(repeats):
                for setting, compiled in (("the status's forward", False), ("its own", True)):
                    functions.compiled_code_possible = lambda compiled=compiled: compiled
                    profiler = TorchProfiler.from_inputs(model, x)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        profiler.compute_network_status()
                    results[setting].append(profiler.get_status("execution_time"))
        finally:
            functions.compiled_code_possible = original
        for setting, runs in results.items():
            values = [run.value for run in runs]
            table.add_row([name, setting, f"{statistics.median(values) * 1e3:.2f} ms",
                           f"{statistics.stdev(values) / statistics.mean(values):.1%}",
                           int(statistics.median(run.details["warmup_forwards"] for run in runs))])
    print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="measurements per model and setting (default 10)")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--min-run-time", type=float, default=0.2, help="budget of each measurement (default 0.2 s)")
    parser.add_argument("--status", action="store_true", help="compare the status's shared warm-up with its own")
    options = parser.parse_args()
    if options.status:
        status_warmup(options.models, options.repeats)
        return
    all_threads = torch.get_num_threads()
    settings: list[int | str] = [1, all_threads, "auto"] if all_threads > 1 else [1, "auto"]
    print(f"torch {torch.__version__}, {all_threads} threads, {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.1f}")
    table = PrettyTable(["model", "threads", "median", "CV of the median", "IQR/median (median)", "noise warnings",
                         "threads used", "forwards"])
    for name in options.models:
        model, x = MODELS[name]()
        results: dict[int | str, list] = {setting: [] for setting in settings}
        for _ in range(options.repeats):
            for setting in settings:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    results[setting].append(measure_execution_time(model, (x,), min_run_time=options.min_run_time,
                                                                   num_threads=setting))
        for setting, runs in results.items():
            medians = [run.median_s for run in runs]
            cv = statistics.stdev(medians) / statistics.mean(medians)
            spread = statistics.median(run.iqr_s / run.median_s for run in runs)
            used = sorted({run.num_threads for run in runs})
            table.add_row([name, setting, f"{statistics.median(medians) * 1e3:.3f} ms", f"{cv:.1%}", f"{spread:.1%}",
                           f"{sum(bool(run.spread_warning) for run in runs)}/{len(runs)}",
                           ",".join(map(str, used)), int(statistics.median(run.forwards for run in runs))])
    print(table)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
