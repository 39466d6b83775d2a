"""Keras 3 backend: ``KerasProfiler``, its ``Compute*`` functions, and ``count_ops``.

Names are resolved lazily: ``import deeplite_like.backends.keras`` imports neither Keras nor
TensorFlow; the first name used imports Keras (quietly, see ``_tf.py``), and with it the
framework Keras runs on (``keras.config.backend()``; never set here).
"""
from __future__ import annotations

from deeplite_like._moved import lazy_exports

_EXPORTS = {
    "count_ops": "deeplite_like.backends.keras.counting",
    "register_layer_formula": "deeplite_like.backends.keras.counting",
    "register_free_layer": "deeplite_like.backends.keras.counting",
    "Cost": "deeplite_like.backends.keras.counting",
    "LayerCall": "deeplite_like.backends.keras.counting",
    "KerasProfiler": "deeplite_like.backends.keras.compute",
    "ComputeComplexity": "deeplite_like.backends.keras.compute",
    "ComputeParams": "deeplite_like.backends.keras.compute",
    "ComputeSize": "deeplite_like.backends.keras.compute",
    "ComputeMemory": "deeplite_like.backends.keras.compute",
    "ComputeExecutionTime": "deeplite_like.backends.keras.compute",
    "ComputeLayerwiseSummary": "deeplite_like.backends.keras.compute",
    "accuracy": "deeplite_like.backends.keras.compute",
    "topk_accuracy": "deeplite_like.backends.keras.compute",
    "ArraySplit": "deeplite_like.backends.keras.tensors",
    # deeplite-profiler's names (code written for it runs with its import lines changed)
    "ComputeFlops": "deeplite_like.backends.keras.compute",
    "get_accuracy": "deeplite_like.backends.keras.compute",
    "get_missclass": "deeplite_like.backends.keras.compute",
    "get_topk": "deeplite_like.backends.keras.compute",
    "EvalLossFunction": "deeplite_like.backends.keras.compute",
    "EvaluationFunction": "deeplite_like.functions",
    "TFProfiler": "deeplite_like.backends.keras.compute",
    "TFDataLoader": "deeplite_like.backends.keras.inputs",
    "TFForwardPass": "deeplite_like.backends.keras.inputs",
    "TFTensorSampler": "deeplite_like.backends.keras.inputs",
    "Device": "deeplite_like.device",
    "ComputeEvalMetric": "deeplite_like.functions",
}

# deeplite-profiler's TensorFlow names deliberately not provided, and what to use instead (docs/migration.rst).
NOT_PROVIDED = {
    "get_temp_model": "deeplite saved and reloaded a copy of the model to count it; the counting here reads the "
                      "model itself, unchanged, so no temporary copy exists (ComputeFlops counts directly)",
    "set_device": "Keras places the computation; pass device= (a Device or its name) to the profiler or the "
                  "evaluation helpers",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), NOT_PROVIDED)
