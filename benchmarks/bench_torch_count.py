"""Counting speed and agreement, PyTorch backend.

Runs in one process, on the same models: the plain forward, our ``count_ops`` (real tensors and
meta), ``torch.utils.flop_counter.FlopCounterMode`` (and fvcore / ptflops when installed).
Prints each tool's counts side by side and its time as a ratio to the plain forward; then, each
in a fresh process, the first count of a process (imports and first-call set-up included) and
the count of a 7-billion-parameter decoder configuration on the meta device (time, peak RSS).

    python benchmarks/bench_torch_count.py            # the figures in docs/benchmarks.rst
    python benchmarks/bench_torch_count.py --rounds 30 --models resnet18 decoder_small

Timing: every model is run in rounds; in each round every tool runs the same number of times
(enough for the plain forward to take about 50 ms), one tool after the other. ``time / forward``
is the median over rounds of (the tool's time / the forward's time in the same round), so load
from other processes that drifts during the run affects every tool alike; ``best / best`` is the
tool's fastest round over the forward's fastest (the least disturbed), with the forward's time.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch
from prettytable import PrettyTable
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.decoder import DECODER_SMALL, LLAMA_7B, Decoder  # noqa: E402
from benchmarks.resnet18 import ResNet18  # noqa: E402
from deeplite_like.backends.torch import count_ops  # noqa: E402


@dataclass
class Case:
    name: str
    batch: int
    build: Callable[[], tuple[torch.nn.Module, torch.Tensor]]
    note: str


def _zoo(name: str, batch: int) -> Callable[[], tuple[torch.nn.Module, torch.Tensor]]:
    def build():
        from deeplite_like.zoo import get

        entry = get(name)
        return entry.build(), entry.example_input(batch_size=batch)
    return build


def _resnet18() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return ResNet18().eval(), torch.randn(1, 3, 224, 224)


def _resnet50() -> tuple[torch.nn.Module, torch.Tensor]:
    from benchmarks.resnet50 import ResNet50

    torch.manual_seed(0)
    return ResNet50().eval(), torch.randn(1, 3, 224, 224)


def _mobilenet_v3_large() -> tuple[torch.nn.Module, torch.Tensor]:
    from benchmarks.mobilenet_v3 import MobileNetV3Large

    torch.manual_seed(0)
    return MobileNetV3Large().eval(), torch.randn(1, 3, 224, 224)


def _decoder_small() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return Decoder(DECODER_SMALL).eval(), torch.randint(0, DECODER_SMALL.vocab_size, (1, 128))


CASES = {case.name: case for case in (
    Case("resnet18", 1, _resnet18, "ResNet-18, 3x224x224"),
    Case("resnet50", 1, _resnet50, "ResNet-50, 3x224x224"),
    Case("mobilenet_v3_large", 1, _mobilenet_v3_large, "MobileNetV3-Large (torchvision's layout), 3x224x224"),
    Case("decoder_small", 1, _decoder_small, "LLaMA-style decoder d=512, 8 layers, 128 tokens"),
    Case("resnet_small", 1, _zoo("resnet_small", 1), "zoo, 3x32x32"),
    Case("mobilenet_small", 1, _zoo("mobilenet_small", 1), "zoo, 3x32x32"),
    Case("transformer_encoder", 8, _zoo("transformer_encoder", 8), "zoo, 16 tokens"),
    Case("lstm_tagger", 8, _zoo("lstm_tagger", 8), "zoo, 16 tokens"),
)}


def flop_counter(model: torch.nn.Module, x: torch.Tensor) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as mode:
        model(x)
    return mode.get_total_flops()


class _RunEachOp(TorchDispatchMode):
    """The floor of any dispatch-level instrument: a mode that only runs each operator."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def floor(model: torch.nn.Module, x: torch.Tensor, tracked: bool = False) -> None:
    from torch.utils.module_tracker import ModuleTracker

    with ModuleTracker() if tracked else contextlib.nullcontext(), _RunEachOp():
        model(x)


def observe_all(model: torch.nn.Module, x: torch.Tensor) -> Any:
    """What ``compute_network_status`` instruments: counts, peak memory and layer facts in one pass."""
    from deeplite_like.backends.torch.counting.engine import observe

    return observe(model, (x,), {}, memory=True, layers=True, grad=False).counts


def profile(model: torch.nn.Module, x: torch.Tensor, module_latency: bool = True) -> Any:
    from deeplite_like import get_model_profile

    return get_model_profile(model, args=(x,), print_profile=False, module_latency=module_latency)


def tools(model: torch.nn.Module, x: torch.Tensor) -> dict[str, tuple[Callable[[], Any], Callable | None]]:
    """name -> (run once, result -> (macs or None, flops or None))."""
    found: dict[str, tuple[Callable[[], Any], Callable | None]] = {
        "forward": (lambda: model(x), None),
        "floor (a mode running each op)": (lambda: floor(model, x), None),
        "floor + ModuleTracker": (lambda: floor(model, x, tracked=True), None),
        "count_ops": (lambda: count_ops(model, x), lambda r: (r.macs, r.flops)),
        "observe (+ memory, layers)": (lambda: observe_all(model, x), lambda r: (r.macs, r.flops)),
        "count_ops meta": (lambda: count_ops(model, x, meta=True), lambda r: (r.macs, r.flops)),
        "count_ops, bytes_moved=True": (lambda: count_ops(model, x, bytes_moved=True), lambda r: (r.macs, r.flops)),
        "get_model_profile": (lambda: profile(model, x), lambda r: (r.macs, r.flops)),
        "get_model_profile, module_latency=False": (lambda: profile(model, x, False), lambda r: (r.macs, r.flops)),
        "FlopCounterMode": (lambda: flop_counter(model, x), lambda r: (None, r)),
    }
    try:
        from fvcore.nn import FlopCountAnalysis

        found["fvcore"] = (lambda: FlopCountAnalysis(model, x).unsupported_ops_warnings(False).total(),
                           lambda r: (r, None))
    except ImportError:
        pass
    try:
        from ptflops import get_model_complexity_info

        shape = tuple(x.shape[1:])
        found["ptflops"] = (lambda: get_model_complexity_info(model, shape, as_strings=False,
                                                              print_per_layer_stat=False, verbose=False)[0],
                            lambda r: (int(r), None))
    except ImportError:
        pass
    return found


def time_tools(found: dict, rounds: int, target_s: float = 0.05) -> tuple[float, dict[str, tuple[float, float]]]:
    """(forward's best seconds, tool -> (median over rounds of its time / the forward's in that round,
    its best time / the forward's best time))."""
    runs = {name: run for name, (run, _) in found.items()}
    for run in runs.values():  # warm-up: first-call set-up, allocator, caches
        run()
        run()
    start = time.perf_counter()
    runs["forward"]()
    inner = max(1, round(target_s / max(time.perf_counter() - start, 1e-6)))
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            for _ in range(inner):
                run()
            seconds[name].append((time.perf_counter() - start) / inner)
    forward = seconds["forward"]
    ratios = {name: (statistics.median(t / f for t, f in zip(times, forward)), min(times) / min(forward))
              for name, times in seconds.items()}
    return min(forward), ratios


def compare_models(names: list[str], rounds: int) -> PrettyTable:
    table = PrettyTable(["model", "batch", "tool", "MACs", "FLOPs", "time / forward", "best / best"])
    table.align = "r"
    for name in names:
        case = CASES[name]
        model, x = case.build()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = tools(model, x)
            forward_s, ratios = time_tools(found, rounds)
            for tool, (run, unpack) in found.items():
                macs, flops = unpack(run()) if unpack else (None, None)
                median, best = ratios[tool]
                table.add_row([name, case.batch, tool, f"{macs:,}" if macs is not None else "-",
                               f"{flops:,}" if flops is not None else "-", f"{median:.2f}x",
                               f"{best:.2f}x" + (f" ({forward_s * 1e3:.2f} ms)" if tool == "forward" else "")])
        table.add_divider()
    return table


# -- in fresh processes ------------------------------------------------------------------------
_COLD = """
import sys, time
sys.path.insert(0, {root!r})
start = time.perf_counter()
import torch
from torch import nn
{setup}
imported = time.perf_counter()
model, x = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).eval(), torch.randn(4, 64)
with torch.no_grad():
    {call}
done = time.perf_counter()
print(f"{{imported - start:.3f}} {{done - imported:.3f}}")
"""

_COLD_TOOLS = {
    "count_ops": ("from deeplite_like.backends.torch import count_ops", "count_ops(model, x)"),
    "FlopCounterMode": ("from torch.utils.flop_counter import FlopCounterMode",
                        "with FlopCounterMode(display=False):\n        model(x)"),
}


def cold_start() -> PrettyTable:
    """The first count in a fresh process: import, then one count of a 2-layer MLP."""
    table = PrettyTable(["tool", "import (s)", "first count (s)"])
    table.align = "r"
    for tool, (setup, call) in _COLD_TOOLS.items():
        code = _COLD.format(root=ROOT, setup=setup, call=call)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        imported, first = out.stdout.split()
        table.add_row([tool, imported, first])
    return table


def peak_rss_mib() -> float:
    """This process's peak resident memory, MiB (Linux: VmHWM, which, unlike ``ru_maxrss``, starts
    afresh at ``exec`` instead of keeping the forking parent's)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def meta_7b() -> str:
    """Build a LLaMA-7B-shaped decoder on meta and count one 2048-token sequence (run in a child)."""
    imported_rss_mib = peak_rss_mib()
    start = time.perf_counter()
    with torch.device("meta"):
        model = Decoder(LLAMA_7B)
    built = time.perf_counter()
    ids = torch.zeros(1, 2048, dtype=torch.long, device="meta")
    counted = count_ops(model, ids)
    done = time.perf_counter()
    peak_mib = peak_rss_mib()
    params = sum(p.numel() for p in model.parameters())
    return (f"7B decoder (d=4096, 32 layers, seq 2048, batch 1) on meta, in a fresh process: params {params:,} "
            f"(config says {LLAMA_7B.params:,}), {counted.macs / 1e12:.2f} TMACs, {counted.flops / 1e12:.2f} TFLOPs; "
            f"build {built - start:.2f} s, count {done - built:.2f} s; process peak RSS {peak_mib:.0f} MiB "
            f"({imported_rss_mib:.0f} MiB after the imports)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timing rounds per model (default 15)")
    parser.add_argument("--models", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--meta-7b-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.meta_7b_only:
        print(meta_7b())
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}")
    for case in CASES.values():
        if case.name in args.models:
            print(f"  {case.name}: {case.note}")
    print(compare_models(args.models, args.rounds))
    print("First count in a fresh process (2-layer MLP):")
    print(cold_start())
    child = subprocess.run([sys.executable, os.path.abspath(__file__), "--meta-7b-only"], capture_output=True,
                           text=True, check=True)
    print(child.stdout.strip())


if __name__ == "__main__":
    main()
