"""What ``compute_network_status()`` with the default metrics costs, as a multiple of the plain forward.

    python benchmarks/bench_status_cost.py                      # ResNet-50 and ResNet-18, batch 1
    python benchmarks/bench_status_cost.py --package /path/to/other/checkout   # the same on another version
    python benchmarks/bench_status_cost.py --threads 1   # everything at 1 thread (a busy machine)
    python benchmarks/bench_status_cost.py --num-threads none   # time at torch's thread count, not 1
    python benchmarks/bench_status_cost.py --cold   # each metric first in a fresh process (imports excluded)

In each round, one after the other: the plain forward (eval, ``torch.no_grad()``) at torch's
thread count and at 1 thread (the median of 3 forwards each), then ``compute_network_status()``
on a fresh ``TorchProfiler`` (nothing cached), with every default function registered, at the
default options (batch 1, ``min_run_time`` 0.2 s). ``x forward`` is the median over rounds of
(status time / forward time in the same round), so load from other processes that drifts during
the run weighs on both. The script also prints the forwards ``execution_time`` ran; with
``--parts``, the time of each default function alone, and of every default function but the
timing together (they share one instrumented forward), as a multiple of the forward at torch's
thread count.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _median_forward(model, x, threads: int, repeats: int = 3) -> float:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            model(x)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                model(x)
                times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    return statistics.median(times)


_COLD = """
import sys, time, warnings
sys.path.insert(0, {root!r})
import torch
from torch import nn
import deeplite_like.backends.torch as backend
from deeplite_like.backends.torch import TorchProfiler
warnings.simplefilter("ignore")
model, x = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).eval(), torch.randn(4, 64)
start = time.perf_counter()
with torch.no_grad():
    model(x)
forward = time.perf_counter() - start
profiler = TorchProfiler.from_inputs(model, x, register_defaults=False)
profiler.register_default_function(getattr(backend, {function!r})())
start = time.perf_counter()
profiler.compute_network_status({options})
print(f"{{forward:.4f}} {{time.perf_counter() - start:.4f}}")
"""


def cold(functions: list[str]) -> None:
    """Each default function as the first measurement of a fresh process (after the imports and one
    plain forward): its own set-up costs (first-call caches, lazy imports) are in this figure."""
    import subprocess

    from prettytable import PrettyTable

    table = PrettyTable(["function, first in its process", "first forward (s)", "function (s)"])
    for function in functions:
        options = "min_run_time=0.01" if function == "ComputeExecutionTime" else ""
        code = _COLD.format(root=ROOT, function=function, options=options)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        forward, spent = out.stdout.split()
        table.add_row([function, forward, spent])
    print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per model (default 5)")
    parser.add_argument("--models", nargs="*", default=["resnet50", "resnet18"], choices=["resnet50", "resnet18"])
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads(N) first: every part then runs at N threads (default: torch's)")
    parser.add_argument("--parts", action="store_true", help="also time each default function alone")
    parser.add_argument("--cold", action="store_true",
                        help="only: each default function first in a fresh process, on a 2-layer MLP")
    parser.add_argument("--num-threads", default="1",
                        help="compute_network_status(num_threads=...): 1 (the default), auto, or none (torch's count)")
    parser.add_argument("--package", default=ROOT,
                        help="the checkout whose deeplite_like is measured (default: this one)")
    options = parser.parse_args()
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.abspath(options.package))
    if options.cold:
        cold(["ComputeComplexity", "ComputeParams", "ComputeSize", "ComputeMemory", "ComputeExecutionTime",
              "ComputeLayerwiseSummary"])
        return

    import torch
    from prettytable import PrettyTable

    import deeplite_like
    from benchmarks.resnet18 import ResNet18
    from benchmarks.resnet50 import ResNet50
    from deeplite_like.backends.torch import TorchProfiler

    if options.threads is not None:
        torch.set_num_threads(options.threads)
    num_threads = {"none": None, "auto": "auto"}.get(options.num_threads.lower()) if not options.num_threads.isdigit() \
        else int(options.num_threads)
    builders: dict[str, Callable[[], torch.nn.Module]] = {"resnet50": ResNet50, "resnet18": ResNet18}
    print(f"deeplite_like from {os.path.dirname(deeplite_like.__file__)}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; timing num_threads={num_threads!r}; "
          f"load average {os.getloadavg()[0]:.1f}")
    table = PrettyTable(["model", "forward", "forward 1 thread", "status", "x forward", "x forward (1 thread)",
                         "execution_time forwards"])
    parts_table = PrettyTable(["model", "function (alone)", "x forward"])
    for name in options.models:
        torch.manual_seed(0)
        model, x = builders[name]().eval(), torch.randn(1, 3, 224, 224)
        ratios, ratios_1, statuses, forwards, forwards_1, ran = [], [], [], [], [], []
        parts: dict[str, list[float]] = {}
        for _ in range(options.rounds):
            forward = _median_forward(model, x, torch.get_num_threads())
            forward_1 = _median_forward(model, x, 1)
            profiler = TorchProfiler.from_inputs(model, x, name=name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                profiler.compute_network_status(num_threads=num_threads)
                status = time.perf_counter() - start
                ran.append(profiler.get_status("execution_time").details.get("forwards", "n/a"))
                for function in TorchProfiler.from_inputs(model, x, name=name).functions if options.parts else ():
                    single = TorchProfiler.from_inputs(model, x, name=name, register_defaults=False)
                    single.register_default_function(type(function)())
                    start = time.perf_counter()
                    timed = type(function).__name__ == "ComputeExecutionTime"
                    single.compute_network_status(**({"num_threads": num_threads} if timed else {}))
                    parts.setdefault(type(function).__name__, []).append((time.perf_counter() - start) / forward)
                if options.parts:  # what the one instrumented forward costs, every function reading it
                    untimed = TorchProfiler.from_inputs(model, x, name=name, register_defaults=False)
                    for function in TorchProfiler.from_inputs(model, x, name=name).functions:
                        if type(function).__name__ != "ComputeExecutionTime":
                            untimed.register_default_function(type(function)())
                    start = time.perf_counter()
                    untimed.compute_network_status()
                    parts.setdefault("all but ComputeExecutionTime", []).append(
                        (time.perf_counter() - start) / forward)
            statuses.append(status)
            forwards.append(forward)
            forwards_1.append(forward_1)
            ratios.append(status / forward)
            ratios_1.append(status / forward_1)
        table.add_row([name, f"{statistics.median(forwards) * 1e3:.1f} ms",
                       f"{statistics.median(forwards_1) * 1e3:.1f} ms",
                       f"{statistics.median(statuses):.2f} s", f"{statistics.median(ratios):.1f}x",
                       f"{statistics.median(ratios_1):.1f}x", ", ".join(map(str, ran))])
        for function, values in parts.items():
            parts_table.add_row([name, function, f"{statistics.median(values):.2f}x"])
    print(table)
    if options.parts:
        print(parts_table)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
