"""Wall-clock execution time of a model's forward pass, in seconds per batch.

The loop is ``deeplite_like.timing_loop`` (shared with the Keras backend): warm-up once, blocks
sized once from one forward, blocks timed until the budget (``min_run_time``) and the number of
measurements are reached, with a CUDA synchronisation around each block. It replaces
``torch.utils.benchmark.Timer``, whose ``timeit`` warms up again on every call and whose
``blocked_autorange`` sizes blocks from the clock's read overhead (the module docstring of
``timing_loop`` says why that mattered). The thread count is pinned while timing, as the Timer did.

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
copied to the timed device; the caller's tensors are never changed.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Callable

import torch
from torch import nn

from deeplite_like.argument_checks import check_batch_agrees, check_batch_size
from deeplite_like.backends.torch.inputs import moved
from deeplite_like.backends.torch.placement import checked_device
from deeplite_like.backends.torch.state import model_device, preserved_model_state
from deeplite_like.backends.torch.run_tensors import input_shapes, required_batch_size
from deeplite_like.measurements import TimingStats
from deeplite_like.threads import AUTO, DEFAULT_NUM_THREADS, check_num_threads
from deeplite_like.timing_loop import BlockTimes, check_budget, percentile, summarise, time_blocks
from deeplite_like.timing_noise import busy_note, spread_note, warn_noisy

__all__ = ["TimingStats", "measure_execution_time"]


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
    (``deeplite_like.timing_loop``; ``TimingStats.forwards`` says how many forwards ran).
    ``num_threads`` is the intra-op thread count used while timing (default 1; ``None``: the
    current ``torch.get_num_threads()``; ``"auto"``: see the module docstring); the previous
    value is restored afterwards. ``train=True`` / ``False`` sets the module mode for the timed
    forwards; ``None`` (default) leaves every module's mode as found. Mode, buffer values
    written by the forwards (in any mode), the random generators and everything else are
    restored (``state.preserved_model_state``). ``device`` defaults to the
    model's device; see the module docstring for what happens when another one is asked for.
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
