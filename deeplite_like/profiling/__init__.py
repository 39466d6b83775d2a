"""Model profiles, DeepSpeed-style: a per-module tree, aggregated top-k per depth, a training-step profiler.

Framework-free: the result objects (``ModelProfile``, ``ModuleNode``, ``PhaseStats``) and their
views (detailed tree text, aggregated table, summary, dict/JSON, HTML, ``save``). The backends
measure (``deeplite_like.backends.torch.profile``, ``deeplite_like.backends.keras.profile``):

* ``get_model_profile(model, ...)`` profiles one call of a model (``forward``, ``generate``...);
* ``FlopsProfiler(model)`` profiles what runs between ``start_profile()`` and ``stop_profile()``
  in a training loop: forward, backward and optimizer step, each measured.
"""
from deeplite_like.lazy import NotProvidedError
from deeplite_like.profiling.aggregate import aggregate, aggregated_report
from deeplite_like.profiling.api import get_model_profile
from deeplite_like.profiling.build import ModuleRecord, build_profile
from deeplite_like.profiling.flops_profiler import FlopsProfiler
from deeplite_like.profiling.result import PHASES, ModelProfile, ModuleNode, PhaseStats

__all__ = [
    "PHASES", "FlopsProfiler", "ModelProfile", "ModuleNode", "ModuleRecord", "PhaseStats", "aggregate",
    "aggregated_report", "build_profile", "get_model_profile",
]

# DeepSpeed's / cli99's module-level helpers deliberately not provided, and what to use instead.
NOT_PROVIDED = {
    **dict.fromkeys(("flops_to_string", "macs_to_string", "params_to_string", "duration_to_string",
                     "number_to_string"),
                    "figures are raw numbers here; ModelProfile.to_text() / summary_text() render them, and "
                    "deeplite_like.profiling.formatting.count(value, unit) / seconds(value) format one"),
    **dict.fromkeys(("get_module_flops", "get_module_macs", "get_module_duration"),
                    "nothing is stored on the modules; read a module's figures from the profile tree: "
                    "profile.root (ModuleNode .flops, .macs, .latency_s, .children) or profile.to_dict()"),
}


def __getattr__(name: str) -> object:
    if name in NOT_PROVIDED:
        raise NotProvidedError(f"deeplite_like.profiling.{name} (DeepSpeed / cli99 name) is not provided: "
                               f"{NOT_PROVIDED[name]} (see docs/migration.rst)", name=name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
