"""TFLite / LiteRT backend: ``TFLiteProfiler``, its ``Compute*`` functions, and ``count_ops`` for ``.tflite`` files.

Names are resolved lazily: importing this package imports no ai-edge-litert; the first use of a
name does, and says which extra to install (``pip install 'deeplite-like[tflite]'``) when it is missing.
"""
from __future__ import annotations

from deeplite_like._moved import lazy_exports

_EXPORTS = {
    "get_accuracy": "deeplite_like.backends.tflite.compute",
    "get_missclass": "deeplite_like.backends.tflite.compute",
    "get_topk": "deeplite_like.backends.tflite.compute",
    "count_ops": "deeplite_like.backends.tflite.formulas",
    "UntrackedTFLiteOpWarning": "deeplite_like.backends.tflite.formulas",
    "FORMULAS": "deeplite_like.backends.tflite.formulas",
    "FREE": "deeplite_like.backends.tflite.formulas",
    "formula": "deeplite_like.backends.tflite.formulas",
    "load_model": "deeplite_like.backends.tflite.graph",
    "predict": "deeplite_like.backends.tflite.graph",
    "resize_inputs": "deeplite_like.backends.tflite.graph",
    "TFLiteModel": "deeplite_like.backends.tflite.graph",
    "TFLiteProfiler": "deeplite_like.backends.tflite.compute",
    "ComputeComplexity": "deeplite_like.backends.tflite.compute",
    "ComputeFlops": "deeplite_like.backends.tflite.compute",
    "ComputeParams": "deeplite_like.backends.tflite.compute",
    "ComputeSize": "deeplite_like.backends.tflite.compute",
    "ComputeMemory": "deeplite_like.backends.tflite.compute",
    "ComputeExecutionTime": "deeplite_like.backends.tflite.compute",
    "ComputeEvalMetric": "deeplite_like.functions",
    "tensor_lifetimes": "deeplite_like.backends.tflite.graph",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
