"""The timing loop both backends use: warm up once, size the blocks once, time blocks to the budget.

A *block* is ``number`` back-to-back forwards between two clock reads (and one device
synchronisation); one block gives one measurement, its time divided by ``number``.

1. Up to ``warmup`` untimed forwards run first, each timed on its own (one clock read before,
   one after); the last sizes the blocks: ``number = min_run_time / min_blocks / that time``
   (at least 1), so ``min_blocks`` blocks fill the budget. A warm-up forward that alone takes a
   block's share of the budget (``min_run_time / min_blocks``) ends the warm-up: blocks hold one
   forward whatever a second warm-up would measure, and a forward that long amortises whatever
   the first call set up (on ResNet-50 at 1 thread this saves one forward of seven). With
   ``warmup=0`` the first block is that single forward, and it is kept as a measurement.
2. Blocks are timed until there are at least ``min_blocks`` of them *and* they have taken
   ``min_run_time`` seconds, or there are ``MAX_BLOCKS_PER_MIN`` x ``min_blocks`` of them.

So a run costs its budget: at most ``warmup + max(min_blocks, min_run_time / forward time)``
forwards, never more than ``warmup + MAX_BLOCKS_PER_MIN * min_blocks * number``.

Why not ``torch.utils.benchmark``: ``Timer.timeit`` runs warm-up forwards of its own on every
call (2 per call), so topping up the measurements one call at a time tripled the cost, and
``Timer.blocked_autorange`` sizes its blocks from the timer's own read overhead: when another
library slows the clock reads (importing DeepSpeed took them from about 2 us to 40 us), its
blocks grew until a 0.2 s budget ran 96 ResNet-50 forwards. Here the clock is read twice per
block and the block size comes from the model's forward alone; a slow read only adds its own
time to the block it ends (see ``tests/core/test_timing_loop.py``).
"""
from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

from deeplite_like.errors import check_seconds
from deeplite_like.measurements import TimingStats
from deeplite_like.timing_noise import noise_note, spread_note

__all__ = ["MAX_BLOCKS_PER_MIN", "BlockTimes", "check_budget", "percentile", "summarise", "time_blocks"]

#: Blocks are timed until the budget is spent, but never more than this many times ``min_blocks``
#: (the first forward after warm-up can be slower than the steady state and size blocks short).
MAX_BLOCKS_PER_MIN = 3

#: The shortest forward assumed when sizing blocks (seconds): a Python call costs more than this.
_SHORTEST_FORWARD_S = 1e-6


@dataclass(frozen=True)
class BlockTimes:
    """Measurements of one timing run, in seconds per forward, and the forwards it ran.

    ``times`` holds one entry per block (the block's time / ``number_per_run``);
    ``warmup_forwards`` untimed forwards ran first; ``timed_forwards`` = blocks x
    ``number_per_run``; ``forwards`` is their sum, every forward this run made.
    """

    times: tuple[float, ...]
    number_per_run: int
    warmup_forwards: int
    timed_forwards: int

    @property
    def forwards(self) -> int:
        return self.warmup_forwards + self.timed_forwards


def percentile(values: list[float] | tuple[float, ...], q: float) -> float:
    """Linear-interpolated percentile (NumPy's default method), ``q`` in [0, 100]."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def check_budget(warmup: int, min_run_time: float, min_blocks: int) -> None:
    """Refuse a timing budget that cannot work, naming the option (before any model is moved or run)."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if min_blocks < 1:
        raise ValueError(f"min_measurements must be >= 1, got {min_blocks}")
    check_seconds(min_run_time, "min_run_time")  # nan, inf and '1' too: each would time wrong or forever


def time_blocks(call: Callable[[], Any], sync: Callable[[], None], *, warmup: int, min_run_time: float,
                min_blocks: int) -> BlockTimes:
    """Time ``call`` as described in the module docstring; ``sync`` waits for the device (a no-op on CPU).

    ``min_run_time`` is in seconds. The clock is ``time.perf_counter``, looked up at each read.
    The garbage collector is off while timing (as in ``timeit``), and back on afterwards.
    """
    check_budget(warmup, min_run_time, min_blocks)
    share = min_run_time / min_blocks  # a block's share of the budget
    collecting = gc.isenabled()
    gc.disable()  # as timeit does: a collection inside a block is not the model's time
    try:
        warmed = 0
        while True:  # the warm-up (with warmup=0: the first measurement)
            start = time.perf_counter()
            call()
            sync()
            single = time.perf_counter() - start
            warmed += 1
            if warmed >= warmup or single >= share:
                break
        warmed = warmed if warmup else 0
        times = [] if warmup else [single]
        spent = 0.0 if warmup else single
        number = max(1, int(share / max(single, _SHORTEST_FORWARD_S)))
        timed = 0 if warmup else 1
        while len(times) < min_blocks or (spent < min_run_time and len(times) < MAX_BLOCKS_PER_MIN * min_blocks):
            start = time.perf_counter()
            for _ in range(number):
                call()
            sync()
            elapsed = time.perf_counter() - start
            times.append(elapsed / number)
            spent += elapsed
            timed += number
    finally:
        if collecting:
            gc.enable()
    return BlockTimes(times=tuple(times), number_per_run=number, warmup_forwards=warmed, timed_forwards=timed)


def summarise(blocks: BlockTimes, *, batch_size: int, num_threads: int, device: str, compiled: str = "",
              threads_reason: str = "", busy: str = "") -> TimingStats:
    """The statistics of ``blocks`` (seconds per batch of ``batch_size``), with the noise note if any.

    ``busy`` is ``timing_noise.busy_note()`` read before timing; the spread is checked here.
    """
    times = list(blocks.times)
    median, q1, q3 = percentile(times, 50), percentile(times, 25), percentile(times, 75)
    note = noise_note([spread_note(median, q3 - q1, num_threads), busy], num_threads)
    return TimingStats(median_s=median, iqr_s=q3 - q1, mean_s=sum(times) / len(times), min_s=min(times),
                       times=len(times), number_per_run=blocks.number_per_run, batch_size=batch_size,
                       per_sample_s=median / batch_size, throughput=batch_size / median, num_threads=num_threads,
                       device=device, raw_s=tuple(times), compiled=compiled, q1_s=q1, q3_s=q3,
                       forwards=blocks.forwards, warmup_forwards=blocks.warmup_forwards,
                       threads_reason=threads_reason, spread_warning=note)
