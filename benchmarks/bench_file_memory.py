"""Activation memory of the files that ship: live-tensor peak, our planned arena, and the runtime's own arena.

For each zoo model exported the way the tests export it (``torch.onnx.export`` at batch 2, the
TorchScript exporter; Keras -> ``TFLiteConverter``, float and full-int8, batch 1), prints:

* ``peak``: the live-tensor peak (``peak_activation_memory``: tensor lifetimes in graph order);
* ``planned``: the arena our planner lays the same tensors out in (``TensorLifetimes.plan``: largest
  first, best fit, 64-byte aligned);
* ``runtime``: the LiteRT interpreter's own read-write arena (``graph.interpreter_arena``) and the
  largest kernel scratch buffer in it; ONNX Runtime reports no arena size (docs/onnx.rst).

    python benchmarks/bench_file_memory.py            # the figures in docs/memory.rst
"""
from __future__ import annotations

import os
import sys

from prettytable import PrettyTable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # the converter's progress lines
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


ONNX_MODELS = ("lenet5", "resnet_small", "mobilenet_small", "transformer_encoder", "lstm_tagger")
KERAS_MODELS = ("lenet5", "small_cnn")


def onnx_rows(batch: int = 2) -> list[list]:
    from benchmarks.bench_onnx_tool import export  # the zoo export the onnx-tool comparison reads too
    from deeplite_like.backends.onnx.graph import prepare, tensor_lifetimes

    rows = []
    for name in ONNX_MODELS:
        stats = tensor_lifetimes(prepare(export(name, batch)))
        rows.append([f"{name}.onnx (batch {batch})", stats.peak_bytes, stats.arena_bytes, "", "", stats.peak_at])
    return rows


def tflite_rows() -> list[list]:
    from deeplite_like.backends.tflite.graph import interpreter_arena, load_model, tensor_lifetimes
    from deeplite_like.zoo import keras_models

    rows = []
    for name in KERAS_MODELS:
        model = getattr(keras_models, name)()
        for int8 in (False, True):
            data = keras_models.to_tflite(model, int8=int8)
            stats, arena = tensor_lifetimes(load_model(data)), interpreter_arena(data)
            rows.append([f"{name}{'_int8' if int8 else ''}.tflite", stats.peak_bytes, stats.arena_bytes, arena.span,
                         arena.scratch, stats.peak_at])
    return rows


def main() -> None:
    table = PrettyTable(["file", "peak B", "planned B", "runtime B", "scratch B", "peak at"])
    for row in onnx_rows() + tflite_rows():
        table.add_row([row[0], *(f"{v:,}" if isinstance(v, int) else v for v in row[1:5]), row[5]])
    table.align = "r"
    table.align["file"] = table.align["peak at"] = "l"
    print(table)


if __name__ == "__main__":
    main()
