"""ONNX backend: ``OnnxProfiler``, its ``Compute*`` functions, and ``count_ops`` for ``.onnx`` files.

Names are resolved lazily: importing this package imports neither onnx nor onnxruntime; the
first use of a name does, and says which extra to install (``pip install 'deeplite-like[onnx]'``)
when they are missing.
"""
from __future__ import annotations

from deeplite_like._moved import lazy_exports

_EXPORTS = {
    "get_accuracy": "deeplite_like.backends.onnx.compute",
    "get_missclass": "deeplite_like.backends.onnx.compute",
    "get_topk": "deeplite_like.backends.onnx.compute",
    "ComputeEvalMetric": "deeplite_like.functions",
    "OnnxSession": "deeplite_like.backends.onnx.graph",
    "count_ops": "deeplite_like.backends.onnx.formulas",
    "UntrackedOnnxOpWarning": "deeplite_like.backends.onnx.formulas",
    "SeededShapesWarning": "deeplite_like.backends.onnx.formulas",
    "FORMULAS": "deeplite_like.backends.onnx.formulas",
    "FREE": "deeplite_like.backends.onnx.formulas",
    "formula": "deeplite_like.backends.onnx.formulas",
    "OnnxProfiler": "deeplite_like.backends.onnx.compute",
    "ComputeComplexity": "deeplite_like.backends.onnx.compute",
    "ComputeFlops": "deeplite_like.backends.onnx.compute",
    "ComputeParams": "deeplite_like.backends.onnx.compute",
    "ComputeSize": "deeplite_like.backends.onnx.compute",
    "ComputeMemory": "deeplite_like.backends.onnx.compute",
    "tensor_lifetimes": "deeplite_like.backends.onnx.graph",
    "ComputeExecutionTime": "deeplite_like.backends.onnx.compute",
    "node_times": "deeplite_like.backends.onnx.compute",
    "NodeTimes": "deeplite_like.backends.onnx.compute",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
