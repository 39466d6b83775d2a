"""Time a model's forward, for every backend (no framework imports): the loop, threads, noise, values.

* **Noise** (``NoisyTimingWarning``): a large spread, or a machine visibly busy.

The loop (``time_blocks``), the thread count (``check_num_threads``) and the values
(``timing_values``) have their rules in their docstrings.
"""
from __future__ import annotations

import gc
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from deeplite_like.errors import check_seconds
from deeplite_like.metrics import ExecutionTime, Throughput
from deeplite_like.metrics.status_keys import Detailed
from deeplite_like.results import TimingStats, percentile

__all__ = ["AUTO", "BlockTimes", "DEFAULT_NUM_THREADS", "MAX_BLOCKS_PER_MIN", "MAX_THREADS_PER_CPU", "META_NOT_TIMED",
           "NoisyTimingWarning", "SPREAD_THRESHOLD", "available_cpus", "busy_note", "check_budget", "check_num_threads",
           "max_threads", "noise_note", "not_measured", "percentile", "spread_note", "summarise", "time_blocks",
           "timing_values", "warn_noisy"]


#: Threads used while timing when ``num_threads`` is not given.
DEFAULT_NUM_THREADS = 1

#: ``num_threads=AUTO``: the timing picks the stabler setting (see ``check_num_threads``).
AUTO = "auto"

#: More threads than this many per CPU only oversubscribe the cores (timings get slower and
#: noisier, never faster); frameworks create one OS thread per requested thread, and a request
#: of thousands exhausts the process (torch crashed at exit with ``num_threads=100000``).
MAX_THREADS_PER_CPU = 4


def available_cpus() -> int:
    """CPUs this process may run on (its affinity where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def max_threads() -> int:
    """The largest accepted ``num_threads``: ``MAX_THREADS_PER_CPU`` x the CPUs this process may use."""
    return MAX_THREADS_PER_CPU * available_cpus()


def check_num_threads(num_threads: object, argument: str = "num_threads") -> int | str | None:
    """``num_threads`` as an int in ``1..max_threads()``, ``'auto'`` or ``None``; else ``ValueError``/``TypeError``.

    **Threads** (``num_threads``, the intra-op thread count while timing). The default is
    **1 thread** (``DEFAULT_NUM_THREADS``), chosen for stability, as ``torch.utils.benchmark.Timer``
    chooses it: on this project's reference machine the median of repeated measurements moved by a
    few percent at 1 thread and by far more at all threads as soon as another process ran
    (``benchmarks/bench_latency_stability.py``, figures in docs/benchmarks.rst). A figure at 1
    thread is also comparable between machines with different core counts. ``num_threads=None``
    keeps the thread count the framework has; ``num_threads="auto"`` lets the timing pick
    (PyTorch: all threads unless contention is seen, then 1).
    """
    if num_threads is None or num_threads == AUTO:
        return num_threads
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"{argument} must be an int (threads used while timing) or 'auto', got "
                        f"{type(num_threads).__name__} {num_threads!r}")
    cpus, limit = available_cpus(), max_threads()
    if num_threads < 1:
        raise ValueError(f"{argument} must be >= 1, got {num_threads} (this process may use {cpus} CPUs); "
                         f"leave it out to time with {DEFAULT_NUM_THREADS} thread, or pass 'auto'")
    if num_threads > limit:
        raise ValueError(f"{argument}={num_threads} is more than {MAX_THREADS_PER_CPU} threads per CPU: this process "
                         f"may use {cpus} CPUs, so at most {limit} threads are accepted (more only oversubscribe the "
                         f"cores, and each thread is an OS thread). Pass {argument}={cpus} or less, or leave it out")
    return num_threads


#: IQR / median above which a latency is reported as noisy.
SPREAD_THRESHOLD = 0.20

ADVICE = "give it a longer min_run_time (--min-run-time), or time it on a quieter machine"


class NoisyTimingWarning(UserWarning):
    """A measured latency is not trustworthy: its spread is large or the machine was busy.

    Both checks are reported the same way: this warning, and a note that a status value keeps in
    its details as ``spread_warning``, so reports can show it next to the time.

    * *spread*: the interquartile range of the measurements is more than ``SPREAD_THRESHOLD``
      (20 %) of their median. On a quiet machine a forward's IQR/median stays within a few percent
      (1-thread ResNet-18 and LeNet-5: see docs/benchmarks.rst); one competing process took a
      2-thread measurement to 65-116 %.
    * *load*: the 1-minute load average (``os.getloadavg``, where the system has one) is above
      the number of CPUs this process may use, read just before timing: other processes want more
      cores than there are, so some of the timed forwards waited for a core.

    The advice is the same for both: time with 1 thread (``num_threads=1``; said only when more
    were used), a longer ``min_run_time``, or on a quieter machine.
    """


def load_average() -> float | None:
    """The 1-minute load average, or ``None`` where the system has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def busy_note() -> str:
    """Why the machine counts as busy now (load average above the CPUs), or ``''`` when it does not."""
    load, cpus = load_average(), available_cpus()
    if load is None or load <= cpus:
        return ""
    return f"the machine was busy (1-minute load average {load:.1f} on {cpus} CPU{'s' if cpus != 1 else ''})"


def spread_note(median_s: float, iqr_s: float, num_threads: int) -> str:
    """Why the spread counts as large (IQR/median above ``SPREAD_THRESHOLD``), or ``''``."""
    if median_s <= 0 or iqr_s / median_s <= SPREAD_THRESHOLD:
        return ""
    return (f"the spread is large (IQR {iqr_s / median_s:.0%} of the median, above {SPREAD_THRESHOLD:.0%}, "
            f"at {num_threads} thread{'s' if num_threads != 1 else ''})")


def noise_note(notes: list[str], num_threads: int) -> str:
    """One sentence from the non-empty ``notes`` and what to do; ``''`` when there are none.

    The advice names fewer threads only when more than one was used.
    """
    notes = [note for note in notes if note]
    if not notes:
        return ""
    fewer = "time with 1 thread (num_threads=1, --num-threads 1), " if num_threads > 1 else ""
    return f"latency may be noise: {'; '.join(notes)}. To trust it, {fewer}{ADVICE}"


def warn_noisy(note: str, what: str, stacklevel: int = 3) -> None:
    """Warn ``NoisyTimingWarning`` with ``note`` (from ``noise_note``) about ``what`` was timed; nothing if empty."""
    if note:
        warnings.warn(f"{what}: {note}", NoisyTimingWarning, stacklevel=stacklevel)


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


def check_budget(warmup: int, min_run_time: float, min_blocks: int) -> None:
    """Refuse a timing budget that cannot work, naming the option (before any model is moved or run)."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if min_blocks < 1:
        raise ValueError(f"min_measurements must be >= 1, got {min_blocks}")
    check_seconds(min_run_time, "min_run_time")  # nan, inf and '1' too: each would time wrong or forever


def time_blocks(call: Callable[[], Any], sync: Callable[[], None], *, warmup: int, min_run_time: float,
                min_blocks: int) -> BlockTimes:
    """Time ``call`` in blocks to the budget; ``sync`` waits for the device (a no-op on CPU).

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

    ``min_run_time`` is in seconds. The clock is ``time.perf_counter``, looked up at each read.
    The garbage collector is off while timing (as in ``timeit``), and back on afterwards.

    **The loop** (``time_blocks``): warm up once, size the blocks once, time blocks to the budget;
    a *block* is ``number`` back-to-back forwards between two clock reads (and one device
    synchronisation), and gives one measurement, its time divided by ``number``.
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

    ``busy`` is ``busy_note()`` read before timing; the spread is checked here.
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


META_NOT_TIMED = ("the meta device runs no arithmetic, so there is no time to measure; time the model on "
                  "a real device (device='cpu' or 'cuda')")


def timing_values(timing: TimingStats, **extra: Any) -> dict[str, Detailed]:
    """``{execution_time, throughput}`` of ``timing``; ``extra`` details go with the execution time.

    **Values** (``timing_values``): ``execution_time`` is the median of the timed measurements,
    with its spread in the details (``iqr``, quartiles ``q1`` and ``q3``, ``min``) so that every
    report can show it and a compare can tell a difference from noise; ``throughput`` carries the
    matching ``interval`` (samples per second at ``q3`` and ``q1``). On the meta device nothing
    runs, so both are *not measured*, with the reason, instead of a number that means nothing.
    """
    q1, q3 = timing.quartiles_s
    details = {"batch_size": timing.batch_size, "iqr": ExecutionTime(timing.iqr_s), "q1": ExecutionTime(q1),
               "q3": ExecutionTime(q3), "min": ExecutionTime(timing.min_s),
               "per_sample": ExecutionTime(timing.per_sample_s), "measurements": timing.times,
               "num_threads": timing.num_threads, "device": timing.device, "forwards": timing.forwards,
               "warmup_forwards": timing.warmup_forwards, "number_per_run": timing.number_per_run,
               "threads_reason": timing.threads_reason, "spread_warning": timing.spread_warning, **extra}
    return {ExecutionTime.NAME: Detailed(timing.median_s, details),
            Throughput.NAME: Detailed(timing.throughput, {"batch_size": timing.batch_size,
                                                          "interval": timing.throughput_interval(),
                                                          "num_threads": timing.num_threads,
                                                          "device": timing.device})}


def not_measured(reason: str, **details: Any) -> dict[str, Detailed]:
    """``{execution_time, throughput}`` left unmeasured, saying why (reports show "not measured")."""
    return {ExecutionTime.NAME: Detailed(None, {"not_measured": reason, **details}),
            Throughput.NAME: Detailed(None, {"not_measured": reason, **details})}
