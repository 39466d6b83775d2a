"""Model profiles, DeepSpeed-style: a per-module tree, aggregated top-k per depth, a training-step profiler.

Framework-free: the result objects (``ModelProfile``, ``ModuleNode``, ``PhaseStats``) and their
views (detailed tree text, aggregated table, summary, dict/JSON, HTML, ``save``). The backends
measure (``deeplite_like.backends.torch.model_profile``, ``deeplite_like.backends.keras.model_profile``):

* ``get_model_profile(model, ...)`` profiles one call of a model (``forward``, ``generate``...);
* ``FlopsProfiler(model)`` profiles what runs between ``start_profile()`` and ``stop_profile()``
  in a training loop: forward, backward and optimizer step, each measured.
"""
from deeplite_like.profiling.flops_profiler import FlopsProfiler, get_model_profile, not_provided
from deeplite_like.profiling.result import PHASES, ModelProfile, ModuleNode, ModuleRecord, PhaseStats, build_profile
from deeplite_like.profiling.views import aggregate, aggregated_report

__all__ = [
    "PHASES", "FlopsProfiler", "ModelProfile", "ModuleNode", "ModuleRecord", "PhaseStats", "aggregate",
    "aggregated_report", "build_profile", "get_model_profile",
]


def __getattr__(name: str) -> object:
    return not_provided(__name__, name)
