"""The cost of module attribution: counting time over plain forward time, on models of many modules.

Counting follows module calls through torch's global module hooks (``counting/recorder.py``),
which send every module call of the process through ``nn.Module.__call__``'s slow path for the
duration of a count. This measures what that costs where it matters most: models with many small
modules, counted on the meta device (no arithmetic, so the per-call overhead is all there is),
and on real tensors. Each figure is a ratio to the plain forward timed in the same round.

``--baseline PATH`` runs the same measurement, in a fresh process each round and alternating with
this checkout, with the package at PATH first on the path (a git worktree of an earlier commit:
``git worktree add /tmp/before <commit>``), so two attribution mechanisms are compared on one
machine under the same load.

    python benchmarks/bench_attribution.py
    python benchmarks/bench_attribution.py --baseline /tmp/before --rounds 5
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _models():
    import torch
    from torch import nn

    sys.path.insert(0, ROOT)
    from benchmarks.resnet18 import ResNet18

    deep_mlp = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.ReLU()) for _ in range(200)])
    return {
        "mlp_400_modules": (deep_mlp, torch.randn(4, 16)),
        "resnet18": (ResNet18().eval(), torch.randn(1, 3, 224, 224)),
    }


def measure(package_root: str, repeats: int) -> dict:
    """{case: (count seconds, forward seconds)} with the package at ``package_root``, best of ``repeats``."""
    sys.path.insert(0, package_root)
    import torch

    torch.set_num_threads(1)
    from deeplite_like.backends.torch import count_ops

    out = {}
    for name, (model, x) in _models().items():
        for meta in (True, False):
            count_ops(model, x, meta=meta)  # warm
            counts, forwards = [], []
            for _ in range(repeats):
                start = time.perf_counter()
                count_ops(model, x, meta=meta)
                counts.append(time.perf_counter() - start)
                with torch.no_grad():
                    start = time.perf_counter()
                    model(x)
                    forwards.append(time.perf_counter() - start)
            out[f"{name} {'meta' if meta else 'real'}"] = (min(counts), min(forwards))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", help="a checkout of an earlier commit to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeats)))
        return
    trees = {"this checkout": ROOT}
    if args.baseline:
        trees["baseline"] = os.path.abspath(args.baseline)
    results: dict[str, dict[str, list[float]]] = {tree: {} for tree in trees}
    for _ in range(args.rounds):
        for tree, path in trees.items():  # alternating: load drifts alike for both
            run = subprocess.run([sys.executable, __file__, "--child", path, "--repeats", str(args.repeats)],
                                 check=True, capture_output=True, text=True)
            for case, (count_s, forward_s) in json.loads(run.stdout.splitlines()[-1]).items():
                results[tree].setdefault(case, []).append(count_s / forward_s)
    cases = list(next(iter(results.values())))
    header = f"{'case':22s}" + "".join(f"{tree + ' (count/forward)':>34s}" for tree in trees)
    print(header)
    for case in cases:
        cells = []
        for tree in trees:
            ratios = results[tree][case]
            cells.append(f"{statistics.median(ratios):8.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        print(f"{case:22s}" + "".join(f"{cell:>34s}" for cell in cells))


if __name__ == "__main__":
    main()
