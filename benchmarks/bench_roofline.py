"""Predicted against measured time per operator: the roofline on this machine (or a GPU).

    python benchmarks/bench_roofline.py                 # CPU: calibrate, then ResNet-50, ViT-B/16, GPT-2
    python benchmarks/bench_roofline.py --device cuda   # the same on a GPU, timed with CUDA events
    python benchmarks/bench_roofline.py --models resnet50 --threads 1

For each model: ``count_ops(..., bytes_moved=True)`` gives one ``OpRecord`` per operator call;
``roofline.predict`` on the calibrated device (``roofline.calibrate``: a large matmul and a
streaming copy at the same thread count; on a GPU, ``--device-model`` names the registry's card)
gives each call's predicted time, ``max(FLOPs / peak, bytes / bandwidth)``. The measured time of
each call comes from a dispatch mode that times every operator of a plain forward (the same
operators, in the same order, as the records; median of ``--repeats`` forwards; on CUDA each op is
bracketed by CUDA events). Printed: Spearman's rank correlation of predicted and measured time over
the calls, the model-level error (sum of predicted / measured forward), and where the roofline is
most wrong. The figures in docs/roofline.rst come from this script.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.resnet50 import ResNet50  # noqa: E402
from deeplite_like.backends.torch import count_ops  # noqa: E402
from deeplite_like import roofline  # noqa: E402


class OpTimer(TorchDispatchMode):
    """Times every aten operator of a run: ``(name, seconds)`` in order (views included, as zero-cost ops)."""

    def __init__(self, cuda: bool = False) -> None:
        super().__init__()
        self.times: list[tuple[str, float]] = []
        self.cuda = cuda
        self._events: list[tuple[str, Any, Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = f"{func.namespace}.{func._opname}"
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = func(*args, **(kwargs or {}))
            end.record()
            self._events.append((name, start, end))
            return out
        begin = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        self.times.append((name, time.perf_counter() - begin))
        return out

    def finish(self) -> list[tuple[str, float]]:
        if self.cuda:
            torch.cuda.synchronize()
            self.times = [(name, start.elapsed_time(end) / 1e3) for name, start, end in self._events]
        return self.times


def measured_per_record(model: torch.nn.Module, x: Any, records: list, repeats: int, cuda: bool) -> list[float]:
    """The median measured time of each record's operator call (matched in order by name)."""
    runs: list[list[float]] = []
    with torch.no_grad():
        for _ in range(repeats + 1):
            timer = OpTimer(cuda)
            with timer:
                model(*x) if isinstance(x, tuple) else model(x)
            times = timer.finish()
            matched, j = [], 0
            for record in records:
                while j < len(times) and times[j][0] != record.op:
                    j += 1
                if j == len(times):
                    raise RuntimeError(f"could not match {record.op} to a timed operator")
                matched.append(times[j][1])
                j += 1
            runs.append(matched)
    runs = runs[1:]  # the first run warms caches and allocators
    return [statistics.median(column) for column in zip(*runs)]


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var if var else float("nan")


def vit_b16() -> tuple[torch.nn.Module, torch.Tensor]:
    import transformers

    model = transformers.ViTModel(transformers.ViTConfig(attn_implementation="eager"), add_pooling_layer=False)
    return model.eval(), torch.randn(1, 3, 224, 224)


def gpt2() -> tuple[torch.nn.Module, torch.Tensor]:
    import transformers

    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(attn_implementation="eager"))
    return model.eval(), torch.randint(0, 50257, (1, 128))


def resnet50() -> tuple[torch.nn.Module, torch.Tensor]:
    return ResNet50().eval(), torch.randn(1, 3, 224, 224)


MODELS: dict[str, Callable[[], tuple[torch.nn.Module, torch.Tensor]]] = {
    "resnet50": resnet50, "vit_b16": vit_b16, "gpt2": gpt2}


def run(name: str, device: Any, repeats: int, cuda: bool) -> dict:
    torch.manual_seed(0)
    model, x = MODELS[name]()
    if cuda:
        model, x = model.cuda(), x.cuda()
    with torch.no_grad():
        count = count_ops(model, x, bytes_moved=True, warn_untracked=False)
    records = [r for r in count.records if r.phase == "forward"]
    prediction = roofline.predict(records, device)
    predicted = [op.time_s for op in prediction.ops]
    measured = measured_per_record(model, x, records, repeats, cuda)
    with torch.no_grad():  # the plain forward, for the model-level error
        call = (lambda: model(x))
        call()
        walls = []
        for _ in range(repeats):
            if cuda:
                torch.cuda.synchronize()
            begin = time.perf_counter()
            call()
            if cuda:
                torch.cuda.synchronize()
            walls.append(time.perf_counter() - begin)
    forward = statistics.median(walls)
    by_op: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for record, p, m in zip(records, predicted, measured):
        by_op[record.op][0] += p
        by_op[record.op][1] += m
    return {"model": name, "calls": len(records), "rho": spearman(predicted, measured),
            "predicted_s": sum(predicted), "ops_measured_s": sum(measured), "forward_s": forward,
            "by_op": dict(by_op), "bound": prediction.total.bound}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--device-model", default=None, help="a registry device (default: calibrate this CPU)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    if args.device_model:
        device = roofline.device_model(args.device_model)
    else:
        device = roofline.calibrate(num_threads=args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads; device: {device.name}")
    print(f"  peak fp32 {device.peak('fp32') / 1e9:,.1f} GFLOP/s, bandwidth {device.memory_bandwidth / 1e9:,.1f} GB/s")
    for name in args.models:
        row = run(name, device, args.repeats, cuda)
        err = row["predicted_s"] / row["forward_s"] - 1
        print(f"\n{name}: {row['calls']} operator calls; Spearman rho (per call) {row['rho']:.2f}; "
              f"predicted {row['predicted_s'] * 1e3:.2f} ms, measured forward {row['forward_s'] * 1e3:.2f} ms "
              f"(sum of timed ops {row['ops_measured_s'] * 1e3:.2f} ms): error {err:+.0%}; bound: {row['bound']}")
        print(f"  {'operator':<34}{'predicted ms':>14}{'measured ms':>14}{'pred/meas':>11}")
        for op, (p, m) in sorted(row["by_op"].items(), key=lambda kv: -kv[1][1])[:10]:
            print(f"  {op:<34}{p * 1e3:>14.3f}{m * 1e3:>14.3f}{(p / m if m else float('nan')):>11.2f}")


if __name__ == "__main__":
    main()
