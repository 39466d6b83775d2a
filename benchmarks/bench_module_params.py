"""Per-module parameter counts of ``get_model_profile``: one bottom-up pass against one count per module.

    python benchmarks/bench_module_params.py          # the figures in docs/benchmarks.rst

*before* is what ``get_model_profile`` did until this change, ``parameter_stats(module)`` for
every module (each walks its whole subtree and its ``state_dict``); *after* is
``module_param_counts(model)``. Both run in this process, interleaved, ``--rounds`` times each;
the table shows the medians and checks that both give the same counts.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable

import torch
from prettytable import PrettyTable
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.decoder import LLAMA_7B, Decoder  # noqa: E402
from benchmarks.resnet50 import ResNet50  # noqa: E402
from deeplite_like.backends.torch.params import module_param_counts, parameter_stats  # noqa: E402


def nested(depth: int) -> nn.Module:
    """``depth`` levels of Sequential(Linear(8, 8), next level): a deep, narrow tree."""
    model: nn.Module = nn.Linear(8, 8)
    for _ in range(depth):
        model = nn.Sequential(nn.Linear(8, 8), model)
    return model


def llama_7b_meta() -> nn.Module:
    with torch.device("meta"):
        return Decoder(LLAMA_7B)


MODELS: dict[str, Callable[[], nn.Module]] = {
    "resnet50": ResNet50,
    "llama_7b (meta)": llama_7b_meta,
    "nested depth 300": lambda: nested(300),
}


def before(model: nn.Module) -> dict[str, int]:
    return {name: parameter_stats(module).total_params for name, module in model.named_modules()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each, interleaved (default 5)")
    rounds = parser.parse_args().rounds
    table = PrettyTable(["model", "modules", "before", "after", "speed-up", "same counts"])
    for name, build in MODELS.items():
        model = build()
        times: dict[str, list[float]] = {"before": [], "after": []}
        results = {}
        for _ in range(rounds):
            for label, run in (("before", before), ("after", module_param_counts)):
                start = time.perf_counter()
                results[label] = run(model)
                times[label].append(time.perf_counter() - start)
        old, new = statistics.median(times["before"]), statistics.median(times["after"])
        table.add_row([name, len(results["after"]), f"{old * 1e3:.1f} ms", f"{new * 1e3:.2f} ms",
                       f"{old / new:.0f}x", results["before"] == results["after"]])
    print(table)


if __name__ == "__main__":
    main()
