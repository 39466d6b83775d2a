"""``TorchFlopsProfiler``: the core ``FlopsProfiler`` (DeepSpeed's API) around a PyTorch training step.

Between ``start_profile()`` and ``stop_profile()`` a ``PhaseCountingMode`` is active on the
calling thread; the forward, the backward and the optimizer step are counted operator by
operator and timed (``latency.ModuleTimer``, ``latency.StepTimer``). Nothing stays attached: the
global module hooks that attribute operators to modules, the global timing hooks, the optimizer
hooks and the dispatch mode are removed by ``stop_profile()``. Nothing is stored on the model's
modules meanwhile, so a copy (``copy.deepcopy``: an EMA, a best-model snapshot) or a
``torch.save`` made inside the window is a plain copy of the user's model.

Threads: a dispatch mode belongs to the thread that entered it, and only that thread can exit
it. ``stop_profile()`` (and ``end_profile()``) from another thread is therefore refused with an
error that names both threads, and the profile keeps running, whole, until it is stopped from
the thread that started it; if that thread has ended, its dispatch mode ended with it, and any
thread may stop the profile (everything else is removed, the figures stay readable).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

from deeplite_like.backends.torch.counting.engine import warn_if_untracked
from deeplite_like.backends.torch.latency import ModuleTimer, PhaseCountingMode, StepTimer, device_name, synchronizer
from deeplite_like.backends.torch.model_profile import ignored_names, module_params, module_records, phase_totals
from deeplite_like.backends.torch.params import parameter_stats
from deeplite_like.profiling.build import build_profile
from deeplite_like.profiling.flops_profiler import FlopsProfiler
from deeplite_like.profiling.result import ModelProfile

__all__ = ["FLOPS_PROFILER", "TorchFlopsProfiler"]


class TorchFlopsProfiler(FlopsProfiler):
    """``FlopsProfiler`` of a ``torch.nn.Module``: counts and times what runs between start and stop.

    Between ``start_profile()`` and ``stop_profile()`` a counting dispatch mode is active on the
    calling thread: the forward, ``loss.backward()`` (on autograd's threads too) and
    ``optimizer.step()`` are counted operator by operator. Latencies are measured while
    counting, so they include the mode's per-operator overhead (a few microseconds of Python
    per operator); time un-profiled steps for clean numbers.
    """

    def __init__(self, model: nn.Module, ds_engine: Any = None, recompute_fwd_factor: float = 0.0, *,
                 model_parallel_size: int | None = None, process_group: Any = None,
                 module_latency: bool = True, ignore_modules: Iterable[Any] | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"TorchFlopsProfiler expects a torch.nn.Module, got {type(model).__name__}")
        super().__init__(model, ds_engine, recompute_fwd_factor, model_parallel_size=model_parallel_size,
                         process_group=process_group,
                         module_latency=module_latency, ignore_modules=ignore_modules)
        self._window: _Window | None = None

    def _parallel(self) -> tuple[int, int | None]:
        dist = torch.distributed
        initialized = dist.is_available() and dist.is_initialized()
        mp = self._model_parallel_size()
        if mp is None and self.process_group is not None:
            if not initialized:
                raise RuntimeError("FlopsProfiler got a process_group but torch.distributed is not initialized; "
                                   "call torch.distributed.init_process_group first or pass model_parallel_size=")
            mp = dist.get_world_size(self.process_group)
        return mp or 1, (dist.get_world_size() if initialized else None)

    def _start(self, ignore: list[Any]) -> None:
        model = self.model
        named = list(model.named_modules())
        sync = synchronizer(model)
        mp, world = self._parallel()
        mode = PhaseCountingMode(sync)
        stats = parameter_stats(model)
        window = _Window(named=named, mode=mode, timer=ModuleTimer(named, self.module_latency, sync),
                         steps=StepTimer(mode, sync), sync=sync, ignored=ignored_names(named, ignore),
                         params=module_params(named), total_params=stats.total_params,
                         trainable_params=stats.trainable_params, model_parallel_size=mp, world_size=world,
                         device=device_name(model), thread=threading.current_thread())
        try:
            mode.attach(named)
            window.timer.attach()
            window.steps.attach()
            sync()
            window.start = time.perf_counter()
            mode.__enter__()
        except BaseException:
            window.detach()
            raise
        self._window = window

    def _stop(self) -> None:
        window = self._window
        here, owner = threading.current_thread(), window.thread
        in_owner = here is owner
        if not in_owner and owner.is_alive():
            raise RuntimeError(f"stop_profile() was called in thread {here.name!r}, but start_profile() ran in thread "
                               f"{owner.name!r}, which is still running: the counting dispatch mode is per thread and "
                               f"only {owner.name!r} can exit it. Call stop_profile() (or end_profile()) in "
                               f"{owner.name!r}; the profile keeps running until then.")
        if in_owner and _get_current_dispatch_mode() is not window.mode:
            raise RuntimeError("stop_profile(): another TorchDispatchMode was entered after start_profile() and is "
                               "still active; exit it first, then call stop_profile()")
        try:
            if in_owner:  # (a thread that has ended took its dispatch modes with it)
                window.mode.__exit__(None, None, None)
            window.sync()
            window.end = time.perf_counter()
        finally:
            window.detach()
        window.mode.flush()
        warn_if_untracked(window.mode.result.untracked, stacklevel=2)

    def _discard(self) -> None:
        self._window = None

    def _build(self, step: int | None) -> ModelProfile:
        window = self._window
        mode = window.mode
        mode.flush()  # (while still running: brings the figures up to now)
        end = window.end if window.end is not None else time.perf_counter()
        duration = end - window.start
        phases = phase_totals(mode)
        latencies = {"forward": window.timer.seconds.get(""), "backward": mode.backward_s,
                     "optimizer": window.steps.seconds}
        for name, seconds in latencies.items():
            if name in phases:
                phases[name].latency_s = seconds
        if "other" in phases:
            phases["other"].latency_s = max(0.0, duration - sum(phases[name].latency_s or 0.0
                                                                for name in latencies if name in phases))
        notes = ["Latencies were measured while counting: every operator also passes through the counting "
                 "dispatch mode, which adds CPU time; 'other' latency is the rest of the window."]
        return build_profile(
            type(self.model).__name__, "torch",
            module_records(window.named, window.params, mode, window.timer.seconds if self.module_latency else None),
            phases=phases, by_operator=mode.result.by_operator, outside=mode.outside, excluded_names=window.ignored,
            params=window.total_params, trainable_params=window.trainable_params, duration_s=duration,
            batch_size=window.timer.batch_size, untracked=mode.result.untracked, module_latency=self.module_latency,
            device=window.device, model_parallel_size=window.model_parallel_size, world_size=window.world_size,
            step=step, notes=notes, communication=mode.communication())


@dataclass
class _Window:
    """One profile of a ``TorchFlopsProfiler``: what is attached, and the facts taken at start."""

    named: list[tuple[str, nn.Module]]
    mode: PhaseCountingMode
    timer: ModuleTimer
    steps: StepTimer
    sync: Callable[[], None]
    ignored: set[str]
    params: dict[str, int]
    total_params: int
    trainable_params: int
    model_parallel_size: int
    world_size: int | None
    device: str
    thread: threading.Thread
    start: float = 0.0
    end: float | None = None

    def detach(self) -> None:
        """Remove the module hooks, the timing hooks and the optimizer hooks (safe to call twice)."""
        try:
            self.mode.detach()
        finally:
            self.timer.detach()
            self.steps.detach()


FLOPS_PROFILER = TorchFlopsProfiler
