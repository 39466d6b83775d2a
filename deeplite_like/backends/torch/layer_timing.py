"""Forward wall time per module of a PyTorch model, for the per-layer table's time column.

Each module's forward is timed by ``profiling.timers.ModuleTimer``, the one per-module timer of
the backend (``get_model_profile`` and ``FlopsProfiler`` use it too): torch's global module
hooks, two clock reads per module call (with a CUDA synchronisation at both ends when the model
is on a GPU), outside any counting mode, so the times are those of a plain forward. A module's
time includes its children's and, when it is called several times in one forward, every call.
Of ``repeats`` forwards (after ``warmup`` untimed ones), every module's time is read from the
same one, the forward whose total is the median, in seconds: a parent's time is then its
children's plus its own work, never less (a container that is never called itself, such as an
``nn.ModuleList``, gets its children's sum).

The hooks add a few microseconds per module call, so the times of very small modules are
upper bounds; the model's own median latency is measured apart, without hooks
(``execution_time``). The hooks time only the model's own modules (by identity): nothing is
stored on the modules, so a copy made by the forward is plain. The model is left as found
(``state.preserved_model_state``: mode, buffer values, the random generators, ...), the hooks
removed in ``finally``.
"""
from __future__ import annotations

import torch

from deeplite_like.threads import check_num_threads

from .inputs import inference_mode_of
from .profiling.devices import synchronizer
from .profiling.timers import ModuleTimer
from .state import preserved_model_state

__all__ = ["module_forward_times"]


def module_forward_times(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, repeats: int = 5,
                         warmup: int = 1, num_threads: int | None = None) -> dict[str, float]:
    """Qualified module name -> forward seconds in the median forward (children included).

    ``num_threads``: the intra-op thread count to time at (restored after; ``None``: torch's
    current one), so that a report times every figure at the thread count it states.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    if num_threads is not None:
        previous = torch.get_num_threads()
        torch.set_num_threads(check_num_threads(num_threads))
        try:
            return module_forward_times(model, args, kwargs, repeats, warmup)
        finally:
            torch.set_num_threads(previous)
    kwargs = kwargs or {}
    named = list(model.named_modules())
    timer = ModuleTimer(named, True, synchronizer(model))
    runs: list[dict[str, float]] = []
    timer.attach()
    try:
        with preserved_model_state(model), inference_mode_of(model, "eval"), torch.no_grad():
            for index in range(warmup + repeats):
                timer.seconds = {}
                model(*args, **kwargs)
                if index >= warmup:
                    runs.append(timer.seconds)
    finally:
        timer.detach()
    # Every module's time from the same forward (the one whose total is the median), so that a
    # parent's time is its children's plus its own work, never less: medians taken module by
    # module come from different forwards and need not add up.
    totals = [run.get("", sum(run.values())) for run in runs]
    chosen = runs[sorted(range(len(runs)), key=totals.__getitem__)[(len(runs) - 1) // 2]]
    return _with_containers(chosen, [name for name, _ in named])


def _with_containers(times: dict[str, float], names: list[str]) -> dict[str, float]:
    """Give a module never called itself (``nn.ModuleList``) the sum of its children's times."""
    from deeplite_like.opcount import parent_names, roll_up

    result = dict(times)
    roll_up(result, parent_names(names), sum)
    return result
