"""Counting speed and agreement, Keras backend: analytic count vs TensorFlow's graph profiler.

Runs in one process, on the same Keras models (TensorFlow backend): the plain eager forward,
our ``count_ops`` (``method='analytic'``: one recorded forward + layer formulas), our
``count_ops(method='graph')`` (trace a concrete function at the fixed batch + TF profiler),
and the TF profiler alone on an already traced graph. Prints each tool's counts side by side
and its time, as a ratio to the forward and to the analytic count; then, in a fresh process,
the first analytic count of ResNet-50 (imports, model build and first-call set-up included).

    python benchmarks/bench_keras_count.py            # the figures in docs/benchmarks.rst
    python benchmarks/bench_keras_count.py --rounds 9 --models resnet50

Timing: every model is run in rounds; in each round every tool runs once, one after the other.
A tool's time is the median over rounds; its ratio is the median over rounds of (its time /
the reference's time in the same round), so load from other processes that drifts during the
run affects every tool alike. ResNet-50 and MobileNetV2 are built with ``weights=None`` (no
download).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from prettytable import PrettyTable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from deeplite_like.backends.keras._tf import import_keras, import_tensorflow  # noqa: E402
from deeplite_like.backends.keras.counting import count_ops  # noqa: E402
from deeplite_like.backends.keras.counting.tf_ops import _profile  # noqa: E402
from deeplite_like.backends.keras.tensors import prepare_inputs  # noqa: E402

keras = import_keras()
L = keras.layers


@dataclass
class Case:
    name: str
    shape: tuple
    build: Callable[[], Any]
    note: str


def _small_cnn() -> Any:
    return keras.Sequential([keras.Input((32, 32, 3)), L.Conv2D(32, 3, padding="same", activation="relu"),
                             L.MaxPooling2D(), L.Conv2D(64, 3, padding="same", activation="relu"), L.MaxPooling2D(),
                             L.Flatten(), L.Dense(128, activation="relu"), L.Dense(10)], name="small_cnn")


def _encoder() -> Any:
    x = keras.Input((128, 256))
    h = L.LayerNormalization()(x + L.MultiHeadAttention(8, 32)(x, x))
    f = L.Dense(256)(L.Dense(1024, activation="gelu")(h))
    return keras.Model(x, L.LayerNormalization()(h + f), name="encoder")


def _lstm() -> Any:
    return keras.Sequential([keras.Input((64,), dtype="int32"), L.Embedding(5000, 128), L.LSTM(256),
                             L.Dense(10)], name="lstm_classifier")


CASES = {case.name: case for case in (
    Case("resnet50", (1, 224, 224, 3), lambda: keras.applications.ResNet50(weights=None),
         "keras.applications.ResNet50(weights=None), 224x224x3"),
    Case("mobilenet_v2", (1, 224, 224, 3), lambda: keras.applications.MobileNetV2(weights=None),
         "keras.applications.MobileNetV2(weights=None), 224x224x3"),
    Case("small_cnn", (8, 32, 32, 3), _small_cnn, "2 conv + 2 dense, 32x32x3"),
    Case("encoder", (2, 128, 256), _encoder, "one transformer encoder block, d=256, 8 heads, 128 tokens"),
    Case("lstm", (8, 64), _lstm, "Embedding + LSTM(256) + Dense, 64 tokens"),
)}


def tools(model: Any, shape: tuple) -> dict[str, Callable[[], Any]]:
    tf = import_tensorflow()
    x, _ = prepare_inputs(model, shape, None, keras)  # the inputs count_ops makes from the shape
    forward = tf.function(lambda t: model(t, training=False), autograph=False)
    graph = forward.get_concrete_function(tf.TensorSpec(tuple(x.shape), x.dtype)).graph
    return {
        "forward (eager)": lambda: model(x, training=False),
        "count_ops analytic": lambda: count_ops(model, x, warn_untracked=False),
        "count_ops graph": lambda: count_ops(model, x, method="graph", warn_untracked=False),
        "TF profiler only": lambda: _profile(tf, graph),
    }


def time_tools(found: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    for run in found.values():  # warm-up: first-call set-up, tracing caches
        run()
    seconds: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(rounds):
        for name, run in found.items():
            start = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def _ratio(times: list[float], reference: list[float]) -> float:
    return statistics.median(t / r for t, r in zip(times, reference))


def compare_models(names: list[str], rounds: int) -> PrettyTable:
    table = PrettyTable(["model", "batch", "tool", "MACs", "FLOPs", "time (ms)", "/ forward", "/ analytic",
                         "TF untracked op types"])
    table.align = "r"
    for name in names:
        case = CASES[name]
        model = case.build()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = tools(model, case.shape)
            seconds = time_tools(found, rounds)
            analytic = found["count_ops analytic"]()
            graph = found["count_ops graph"]()
        results = {"count_ops analytic": analytic, "count_ops graph": graph}
        for tool, times in seconds.items():
            result = results.get(tool)
            table.add_row([
                name, case.shape[0], tool,
                f"{result.macs:,}" if result is not None else "-",
                f"{result.flops:,}" if result is not None else "-",
                f"{statistics.median(times) * 1e3:.1f}",
                f"{_ratio(times, seconds['forward (eager)']):.2f}x",
                f"{_ratio(times, seconds['count_ops analytic']):.2f}x",
                ", ".join(sorted(graph.untracked)) if tool == "count_ops graph" and graph.untracked else "",
            ])
        table.add_divider()
    return table


_COLD = """
import sys, time
sys.path.insert(0, {root!r})
start = time.perf_counter()
from deeplite_like.backends.keras.counting import count_ops
from deeplite_like.backends.keras._tf import import_keras
keras = import_keras()
imported = time.perf_counter()
model = keras.applications.ResNet50(weights=None)
built = time.perf_counter()
result = count_ops(model, (1, 224, 224, 3))
done = time.perf_counter()
print(f"{{imported - start:.2f}} {{built - imported:.2f}} {{done - built:.2f}} {{result.macs}}")
"""


def cold_start() -> str:
    out = subprocess.run([sys.executable, "-c", _COLD.format(root=ROOT)], capture_output=True, text=True, check=True)
    imported, built, first, macs = out.stdout.split()
    return (f"ResNet-50 in a fresh process: import Keras/TensorFlow {imported} s, build {built} s, "
            f"first analytic count {first} s ({int(macs):,} MACs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds per model (default 5)")
    parser.add_argument("--models", nargs="*", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    tf = import_tensorflow()
    print(f"keras {keras.__version__} ({keras.config.backend()} backend), tensorflow {tf.__version__}, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    for case in CASES.values():
        if case.name in args.models:
            print(f"  {case.name}: {case.note}")
    print(compare_models(args.models, args.rounds))
    print(cold_start())


if __name__ == "__main__":
    main()
