"""Model profiles of PyTorch models: where the framework-free core finds the torch side.

``deeplite_like.profiling.backends`` imports this module for a torch model and uses
``build_model_profile`` (``get_model_profile``) and ``FLOPS_PROFILER`` (``FlopsProfiler``).
The code lives in ``deeplite_like.backends.torch.profiling`` (one concept per module); see
its docstrings for what is counted and timed how.
"""
from __future__ import annotations

from .profiling.flops_profiler import FLOPS_PROFILER, TorchFlopsProfiler
from .profiling.model_profile import build_model_profile
from .profiling.phases import PhaseCountingMode

__all__ = ["FLOPS_PROFILER", "PhaseCountingMode", "TorchFlopsProfiler", "build_model_profile"]
