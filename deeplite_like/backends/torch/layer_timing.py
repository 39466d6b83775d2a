"""Forward wall time per module of a PyTorch model, for the per-layer table's time column.

Each module's forward is timed by a pre-hook and a hook (``time.perf_counter``, with a CUDA
synchronisation at both ends when the model is on a GPU), outside any counting mode, so the
times are those of a plain forward. A module's time includes its children's and, when it is
called several times in one forward, every call. The median over ``repeats`` forwards (after
``warmup`` untimed ones) is reported, in seconds.

The hooks add a few microseconds per module call, so the times of very small modules are
upper bounds; the model's own median latency is measured apart, without hooks
(``execution_time``). The hooks are torch's global module hooks, which time only the model's
own modules (by identity): nothing is stored on the modules, so a copy made by the forward is
plain. The model is left as found (``state.preserved_model_state``: mode, buffer values, the
random generators, ...), the hooks removed in ``finally``.
"""
from __future__ import annotations

import statistics
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
    """Qualified module name -> median forward seconds per model forward (children included)."""
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

    runs: dict[str, list[float]] = defaultdict(list)
    handles = [_module_globals.register_module_forward_pre_hook(before)]
    try:
        handles.append(_module_globals.register_module_forward_hook(after))
        with preserved_model_state(model), inference_mode_of(model, "eval"), torch.no_grad():
            for index in range(warmup + repeats):
                this_run.clear()
                model(*args, **kwargs)
                if index >= warmup:
                    for name, seconds in this_run.items():
                        runs[name].append(seconds)
    finally:
        for handle in handles:
            handle.remove()
    return {name: statistics.median(values + [0.0] * (repeats - len(values))) for name, values in runs.items()}
