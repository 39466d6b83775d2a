"""Time on PyTorch: a model's forward latency, per-module forward times, and the timed phases of profiles.

``measure_execution_time``: wall-clock time of a model's forward pass, in seconds per batch, on
``deeplite_like.timing``'s loop (shared with the Keras backend), with the thread count pinned
and the CUDA devices that hold the model synchronised (``synchronizer``) around each block.

Every timer leaves the model as found (``state.preserved_model_state``: mode, buffer values, the
random generators, ...), its hooks removed in ``finally``.

``module_forward_times`` (per-module times, ``ModuleTimer``) and ``PhaseCountingMode`` (the
phases of DeepSpeed-style profiles) describe themselves.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import time
from collections.abc import Mapping
from typing import Any, Callable

import torch
from torch import nn

from deeplite_like.backends.torch.counting import formulas as _formulas  # noqa: F401  (fills the formula table)
from deeplite_like.backends.torch.counting.recorder import CountingMode, _Context
from deeplite_like.backends.torch.counting.registry import CountOptions
from deeplite_like.backends.torch.inputs import checked_device, inference_mode_of, moved
from deeplite_like.backends.torch.state import (add_global_module_hooks, model_device, preserved_model_state,
                                                remove_global_module_hooks)
from deeplite_like.backends.torch.tensors import batch_size_of, input_shapes, required_batch_size
from deeplite_like.errors import check_batch_agrees, check_batch_size
from deeplite_like.results import OpStats, TimingStats, parent_names, roll_up
from deeplite_like.timing import (AUTO, BlockTimes, DEFAULT_NUM_THREADS, busy_note, check_budget, check_num_threads,
                                  percentile, spread_note, summarise, time_blocks, warn_noisy)

__all__ = ["ModuleTimer", "PhaseCountingMode", "StepTimer", "TimingStats", "current_autograd_node",
           "device_name", "measure_execution_time", "module_forward_times", "no_sync", "synchronizer"]


def _normalise(device: torch.device) -> torch.device:
    """``cuda`` without an index means the current CUDA device; give it that index."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def measure_execution_time(
    model: nn.Module,
    args: Any,
    kwargs: Mapping[str, Any] | None = None,
    device: str | torch.device | None = None,
    warmup: int = 2,
    min_run_time: float = 0.5,
    num_threads: int | str | None = DEFAULT_NUM_THREADS,
    batch_size: int | None = None,
    train: bool | None = None,
    min_measurements: int = 5,
) -> TimingStats:
    """Time ``model(*args, **kwargs)`` under ``torch.no_grad()``, in seconds per batch.

    ``args`` is a tuple of positional inputs (a single tensor is accepted as one input).
    ``warmup`` untimed forwards run first (the last one, timed alone, sizes the blocks), then
    blocks of forwards are timed until they have taken ``min_run_time`` seconds and there are
    at least ``min_measurements`` of them, so the median and spread rest on several blocks
    (``deeplite_like.timing``; ``TimingStats.forwards`` says how many forwards ran).
    ``num_threads`` is the intra-op thread count used while timing (default 1; ``None``: the
    current ``torch.get_num_threads()``; ``"auto"``: below); the previous value is restored
    afterwards. ``train=True`` / ``False`` sets the module mode for the timed
    forwards; ``None`` (default) leaves every module's mode as found. Mode, buffer values
    written by the forwards (in any mode), the random generators and everything else are
    restored (``state.preserved_model_state``). ``device`` defaults to the
    model's device (the device rule below says what happens when another one is asked for).

    The loop is ``deeplite_like.timing`` (shared with the Keras backend): warm-up once, blocks
    sized once from one forward, blocks timed until the budget (``min_run_time``) and the number of
    measurements are reached, with a CUDA synchronisation around each block. It replaces
    ``torch.utils.benchmark.Timer``, whose ``timeit`` warms up again on every call and whose
    ``blocked_autorange`` sizes blocks from the clock's read overhead (``deeplite_like.timing``'s
    ``time_blocks`` is the loop used instead). The thread count is pinned while timing, as the Timer
    did.

    Threads: ``num_threads`` defaults to ``DEFAULT_NUM_THREADS`` (1, for stability: see
    ``deeplite_like/threads.py``); ``None`` keeps ``torch.get_num_threads()``. ``"auto"``:

    1. 1 thread if torch has only one, or if the machine is busy before timing (1-minute load
       average above the CPUs this process may use);
    2. otherwise all of torch's threads (``torch.get_num_threads()``); if that measurement's spread
       is large (IQR/median above ``timing_noise.SPREAD_THRESHOLD``), it is measured again at 1
       thread and that one is reported (the run then costs two budgets).

    The choice and its reason are reported (``TimingStats.threads_reason``). A large spread or a
    busy machine is warned about (``NoisyTimingWarning``) and noted in ``spread_warning``.

    Device rule: the model is never moved. If ``device`` is the model's own device (the default),
    the model itself is timed; if another device is asked for, a deep copy of the model is moved
    there and timed (costs one copy of the model on that device). Inputs on another device are
    copied to the timed device; the caller's tensors are never changed. ``synchronizer`` waits for
    the CUDA devices that hold a model (``no_sync`` on CPU and meta), at both ends of every timed
    interval.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"measure_execution_time expects a torch.nn.Module, got {type(model).__name__}")
    num_threads = check_num_threads(num_threads)
    requested = None if device is None else checked_device(device)
    check_budget(warmup, min_run_time, min_measurements)
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})
    if batch_size is None:
        batch_size = required_batch_size(args, kwargs)
    else:  # it divides the time into throughput: it must be the batch that runs
        batch_size = check_batch_size(batch_size, "batch_size", "measure_execution_time", allow_none=False)
        check_batch_agrees(batch_size, input_shapes(args, kwargs), "measure_execution_time")
    previous_threads = torch.get_num_threads()

    home = model_device(model)
    if home.type == "meta":
        raise ValueError(
            f"{type(model).__name__} is on the meta device and cannot be timed; "
            "load real weights (e.g. model.to_empty(device='cpu')) first"
        )
    if requested is not None and requested.type == "meta":
        raise ValueError("device='meta': the meta device runs no arithmetic, so nothing can be timed; pass "
                         "device='cpu' or 'cuda', or leave device out to time the model where it is")
    target = home if requested is None else _normalise(requested)
    runner = model if target == home else copy.deepcopy(model).to(target)
    args, kwargs = moved(args, kwargs, target)

    def forward() -> None:
        runner(*args, **kwargs)

    def sync() -> None:
        if target.type == "cuda":
            torch.cuda.synchronize(target)

    def measure(threads: int) -> BlockTimes:
        torch.set_num_threads(threads)
        return time_blocks(forward, sync, warmup=warmup, min_run_time=min_run_time, min_blocks=min_measurements)

    busy = busy_note()
    with preserved_model_state(model):
        if train is not None:
            runner.train(train)
        try:
            with torch.no_grad():
                if num_threads == AUTO:
                    threads, blocks, reason, busy = _auto_threads(measure, previous_threads, busy)
                else:
                    threads = previous_threads if num_threads is None else num_threads
                    blocks, reason = measure(threads), ""
        finally:
            torch.set_num_threads(previous_threads)

    stats = summarise(blocks, batch_size=batch_size, num_threads=threads, device=str(target),
                      threads_reason=reason, busy=busy)
    warn_noisy(stats.spread_warning, f"execution time of {type(model).__name__}")
    return stats


def _auto_threads(measure: Callable[[int], BlockTimes], all_threads: int,
                  busy: str) -> tuple[int, BlockTimes, str, str]:
    """``num_threads='auto'``: ``(threads, measurement, reason, busy note still worth reporting)``."""
    if all_threads == 1:
        return 1, measure(1), "num_threads='auto': torch has 1 thread", busy
    if busy:
        # The busy machine is why 1 thread was chosen; the note stays (1 thread is still disturbed).
        return 1, measure(1), f"num_threads='auto': 1 thread because {busy}", busy
    first = measure(all_threads)
    times = list(first.times)
    median = percentile(times, 50)
    noisy = spread_note(median, percentile(times, 75) - percentile(times, 25), all_threads)
    if not noisy:
        return all_threads, first, f"num_threads='auto': all {all_threads} threads (no contention seen)", ""
    second = measure(1)
    # every forward is reported: the discarded all-thread measurement counts as untimed ones
    second = dataclasses.replace(second, warmup_forwards=second.warmup_forwards + first.forwards)
    return 1, second, f"num_threads='auto': 1 thread because {noisy}", busy_note()


# -- time per module ------------------------------------------------------------------------------
def module_forward_times(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, repeats: int = 5,
                         warmup: int = 1, num_threads: int | None = None) -> dict[str, float]:
    """Qualified module name -> forward seconds in the median forward (children included).

    Each module's forward is timed by ``ModuleTimer``, the one per-module timer of the backend
    (``get_model_profile`` and ``FlopsProfiler`` use it too): torch's global module hooks, two clock
    reads per module call (with a CUDA synchronisation at both ends when the model is on a GPU),
    outside any counting mode, so the times are those of a plain forward. A module's time includes
    its children's and, when it is called several times in one forward, every call. Of ``repeats``
    forwards (after ``warmup`` untimed ones), every module's time is read from the same one, the
    forward whose total is the median, in seconds: a parent's time is then its children's plus its
    own work, never less (a container that is never called itself, such as an ``nn.ModuleList``,
    gets its children's sum). The hooks add a few microseconds per module call, so the times of very
    small modules are upper bounds; the model's own median latency is measured apart, without hooks
    (``execution_time``).

    ``num_threads``: the intra-op thread count to time at (restored after; ``None``: torch's
    current one), so that a report times every figure at the thread count it states.

    ``module_forward_times``: forward wall time per module, for the per-layer table's time column,
    by ``ModuleTimer``, the one per-module timer of the backend (``get_model_profile`` and
    ``FlopsProfiler`` use it too). ``ModuleTimer`` and ``StepTimer`` (optimizer-step time) use torch's
    *global* hooks (``register_module_forward_hook``, ``register_optimizer_step_*``), not hooks on the
    model: nothing is stored on the modules, so a copy or pickle of the model made while timing (an
    EMA, a checkpoint) is a plain copy. The module hooks time only the model's own modules (by
    identity).
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
    result = dict(times)
    roll_up(result, parent_names(names), sum)
    return result


# -- waiting for the devices ----------------------------------------------------------------------
def no_sync() -> None:
    """Nothing to wait for: the synchronizer of a model on the CPU or meta."""


def synchronizer(model: nn.Module) -> Callable[[], None]:
    """A function that waits for every CUDA device holding the model; ``no_sync`` on CPU and meta."""
    devices = sorted({t.device.index or 0 for t in itertools.chain(model.parameters(), model.buffers())
                      if t.device.type == "cuda"})
    if not devices:
        return no_sync

    def sync() -> None:
        for index in devices:
            torch.cuda.synchronize(index)

    return sync


def device_name(model: nn.Module) -> str:
    devices = {str(t.device) for t in itertools.chain(model.parameters(), model.buffers())}
    if not devices:
        return "cpu"
    return devices.pop() if len(devices) == 1 else "several: " + ", ".join(sorted(devices))


# -- the phases of a profile ----------------------------------------------------------------------
current_autograd_node = getattr(torch._C, "_current_autograd_node", lambda: None)


class PhaseCountingMode(CountingMode):
    """``CountingMode`` that files every operator under its phase and keeps per-module phase figures.

    The phase is decided when the operator runs (``_current_phase``): ``backward`` when autograd
    is executing a node (``torch._C._current_autograd_node()``), ``forward`` inside a call of the
    model or one of its modules, ``optimizer`` inside ``Optimizer.step()`` (``StepTimer`` raises
    ``in_step``), ``other`` otherwise (the loss, gradient clipping). At each change of phase the base
    mode's pending sums are flushed (``set_phase``) and the growth of every module's figures
    since the previous change is filed under the phase that just ended
    (``module_phases[name][phase]``: MACs and FLOPs; module calls are in ``by_module``).

    Operators run outside any module call go to a context of their own (``outside``) instead
    of the root module's: the mode's root context is replaced by one whose figures are the
    outside operators plus the model's (``_outside_stats``), so the model's root module
    (``by_module[""]``) holds only what ran in the model.

    ``track_backward=False`` (a profile with no backward pass) keeps the base mode's fast path
    for module calls. ``in_step`` is raised by the optimizer hooks. ``backward_s`` sums the wall time of the
    backward passes (first operator to the autograd engine's end-of-backward callback),
    synchronising with ``sync`` when given.

    ``PhaseCountingMode``: the counting engine's ``CountingMode`` for the DeepSpeed-style profiles,
    filing every operator under its phase (forward, backward, optimizer, other) and timing the
    phases.
    """

    def __init__(self, sync: Callable[[], None] | None = None, time_backward: bool = True, meta: bool = False,
                 track_backward: bool = True):
        super().__init__(CountOptions(), track_backward=track_backward, meta=meta)
        self.in_step = 0
        self.phase_name: str | None = None
        self.module_phases: dict[str, dict[str, OpStats]] = {}
        self.outside: dict[str, OpStats] = {}
        self.backward_s = 0.0
        self._outside_stats = OpStats()
        outside = _Context(("<outside>",), (self._outside_stats,), self.outside)
        self._seq_ctxs = [outside if ctx is self._root else ctx for ctx in self._seq_ctxs]
        self._root = self._ctx = outside
        self._snapshot: dict[str, tuple[int, int]] = {}
        self._sync = sync or no_sync
        self._time_backward = time_backward
        self._backward_start: float | None = None

    def _current_phase(self) -> str:
        if current_autograd_node() is not None:
            return "backward"
        if self._ctx is not self._root:
            return "forward"
        return "optimizer" if self.in_step else "other"

    def _refresh_phase(self) -> None:
        phase = self._current_phase()
        if phase != self.phase_name:
            self.set_phase(phase)  # flushes what the ended phase counted
            self._close_segment()
            self.phase_name = phase
            if phase == "backward":
                self._begin_backward()

    def _close_segment(self) -> None:
        """File each module's growth since the last phase change under the phase that ran."""
        phase = self.phase_name
        snapshot = self._snapshot
        for name, stats in self.result.by_module.items():
            before = snapshot.get(name, (0, 0))
            macs, flops = stats.macs - before[0], stats.flops - before[1]
            if phase is not None and (macs or flops):
                self.module_phases.setdefault(name, {}).setdefault(phase, OpStats()).add(macs, flops, 0)
            snapshot[name] = (stats.macs, stats.flops)

    def flush(self) -> None:
        """Bring every figure up to date (call before reading them while counting goes on)."""
        if self.phase_name is not None:
            self.set_phase(self.phase_name)
            self._close_segment()

    def _begin_backward(self) -> None:
        # The end-of-backward callback also ends the phase: the next module call must not be
        # mistaken for a forward re-run inside backward.
        torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
        if self._time_backward:
            self._sync()
            self._backward_start = time.perf_counter()

    def _end_backward(self) -> None:
        if self._backward_start is not None:
            self._sync()
            self.backward_s += time.perf_counter() - self._backward_start
            self._backward_start = None
        self._refresh_phase()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._refresh_phase()
        return super().__torch_dispatch__(func, types, args, kwargs)


# -- timers by global hooks -----------------------------------------------------------------------
class ModuleTimer:
    """Forward wall time per module (or of the root only), and the batch size of the first call."""

    def __init__(self, named_modules: list[tuple[str, nn.Module]], per_module: bool,
                 sync: Callable[[], None]) -> None:
        self._modules = named_modules if per_module else named_modules[:1]
        self._sync = sync
        self._stack: list[tuple[nn.Module, float]] = []
        self._handles: list = []
        self.seconds: dict[str, float] = {}
        self.batch_size: int | None = None
        self._names: dict[int, str] = {}

    def attach(self) -> None:
        for name, module in self._modules:
            if not isinstance(module, torch.jit.ScriptModule):
                self._names[id(module)] = name
        self._handles += add_global_module_hooks(self._pre, self._post)

    def detach(self) -> None:
        remove_global_module_hooks(self._handles)
        self._stack.clear()

    def _pre(self, module: nn.Module, args: tuple) -> None:
        if id(module) not in self._names:  # not one of the model's modules (another model, a copy)
            return None
        if current_autograd_node() is not None:  # a forward re-run by checkpointing, inside backward
            return None
        self._sync()
        self._stack.append((module, time.perf_counter()))
        return None

    def _post(self, module: nn.Module, args: tuple, *kwargs_output: Any) -> None:
        """``(module, args, kwargs, output)``; ``(module, args, None)`` when the forward raised."""
        if not self._stack or self._stack[-1][0] is not module:
            return None
        self._sync()
        _, start = self._stack.pop()
        name = self._names[id(module)]
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        if self.batch_size is None and not self._stack and len(kwargs_output) == 2:
            self.batch_size = batch_size_of(args, kwargs_output[0])  # of the first outermost call
        return None


class StepTimer:
    """Marks optimizer steps for the mode (``in_step``) and times them, via torch.optim's global step hooks."""

    def __init__(self, mode: PhaseCountingMode | None, sync: Callable[[], None]) -> None:
        self._mode = mode
        self._sync = sync
        self._starts: list[float] = []
        self._handles: list = []
        self.seconds = 0.0

    def attach(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        self._handles = [register_optimizer_step_pre_hook(self._pre), register_optimizer_step_post_hook(self._post)]

    def detach(self) -> None:
        while self._handles:
            self._handles.pop().remove()
        if self._mode is not None:
            self._mode.in_step = 0

    def _pre(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        self._sync()
        self._starts.append(time.perf_counter())
        if self._mode is not None:
            self._mode.in_step += 1

    def _post(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        if not self._starts:
            return
        self._sync()
        self.seconds += time.perf_counter() - self._starts.pop()
        if self._mode is not None:
            self._mode.in_step = max(0, self._mode.in_step - 1)
