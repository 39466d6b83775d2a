"""Forward wall time per module of a PyTorch model, for the per-layer table's time column.

Each module's forward is timed by a pre-hook and a hook (``time.perf_counter``, with a CUDA
synchronisation at both ends when the model is on a GPU), outside any counting mode, so the
times are those of a plain forward. A module's time includes its children's and, when it is
called several times in one forward, every call. Of ``repeats`` forwards (after ``warmup``
untimed ones), every module's time is read from the same one, the forward whose total is the
median, in seconds: a parent's time is then its children's plus its own work, never less (a
container that is never called itself, such as an ``nn.ModuleList``, gets its children's sum).

The hooks add a few microseconds per module call, so the times of very small modules are
upper bounds; the model's own median latency is measured apart, without hooks
(``execution_time``). The hooks are torch's global module hooks, which time only the model's
own modules (by identity): nothing is stored on the modules, so a copy made by the forward is
plain. The model is left as found (``state.preserved_model_state``: mode, buffer values, the
random generators, ...), the hooks removed in ``finally``.
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import torch
from torch.nn.modules import module as _module_globals

from .inputs import inference_mode_of
from .state import preserved_model_state

__all__ = ["module_forward_times"]


def module_forward_times(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, repeats: int = 5,
                         warmup: int = 1) -> dict[str, float]:
    """Qualified module name -> forward seconds in the median forward (children included)."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    kwargs = kwargs or {}
    names = {id(m): n for n, m in model.named_modules(remove_duplicate=True)}
    on_cuda = any(p.is_cuda for p in model.parameters())
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)
    open_calls: dict[int, list[float]] = defaultdict(list)
    this_run: dict[str, float] = defaultdict(float)

    def before(module: torch.nn.Module, _inputs: Any) -> None:
        if id(module) in names:
            sync()
            open_calls[id(module)].append(time.perf_counter())

    def after(module: torch.nn.Module, _inputs: Any, _output: Any) -> None:
        if open_calls.get(id(module)):
            sync()
            started = open_calls[id(module)].pop()
            this_run[names[id(module)]] += time.perf_counter() - started

    runs: list[dict[str, float]] = []
    handles = [_module_globals.register_module_forward_pre_hook(before)]
    try:
        handles.append(_module_globals.register_module_forward_hook(after))
        with preserved_model_state(model), inference_mode_of(model, "eval"), torch.no_grad():
            for index in range(warmup + repeats):
                this_run.clear()
                model(*args, **kwargs)
                if index >= warmup:
                    runs.append(dict(this_run))
    finally:
        for handle in handles:
            handle.remove()
    # Every module's time from the same forward (the one whose total is the median), so that a
    # parent's time is its children's plus its own work, never less: medians taken module by
    # module come from different forwards and need not add up.
    totals = [run.get("", sum(run.values())) for run in runs]
    chosen = runs[sorted(range(len(runs)), key=totals.__getitem__)[(len(runs) - 1) // 2]]
    return _with_containers(chosen, list(names.values()))


def _with_containers(times: dict[str, float], names: list[str]) -> dict[str, float]:
    """Give a module never called itself (``nn.ModuleList``) the sum of its children's times."""
    from deeplite_like.opcount import parent_names, roll_up

    result = dict(times)
    roll_up(result, parent_names(names), sum)
    return result
