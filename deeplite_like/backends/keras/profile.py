"""Model profiles of Keras 3 models: where the framework-free core finds the Keras side.

``deeplite_like.profiling.backends`` imports this module for a Keras model and uses
``build_model_profile`` (``get_model_profile``) and ``FLOPS_PROFILER`` (``FlopsProfiler``).
The code lives in ``deeplite_like.backends.keras.profiling`` (one concept per module) and the
per-TensorFlow-op costs in ``counting/formulas/tf_ops.py``; see their docstrings for what is
counted how and what is touched outside the model while a profile runs.
"""
from __future__ import annotations

from .counting.formulas.tf_ops import TF_COSTS, TF_FREE, tf_op_cost
from .profiling.flops_profiler import FLOPS_PROFILER, KerasFlopsProfiler
from .profiling.model_profile import build_model_profile

__all__ = ["FLOPS_PROFILER", "KerasFlopsProfiler", "TF_COSTS", "TF_FREE", "build_model_profile", "tf_op_cost"]
