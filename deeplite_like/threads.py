"""``num_threads``, the intra-op thread count used while timing, for both backends: default and checks.

The default is **1 thread** (``DEFAULT_NUM_THREADS``), chosen for stability, as
``torch.utils.benchmark.Timer`` chooses it: on this project's reference machine the median of
repeated measurements moved by a few percent at 1 thread and by far more at all threads as soon
as another process ran (``benchmarks/bench_latency_stability.py``, figures in docs/benchmarks.rst).
A figure at 1 thread is also comparable between machines with different core counts.

``num_threads=None`` keeps the thread count the framework has; ``num_threads="auto"`` lets the
timing pick (PyTorch: all threads unless contention is seen, then 1; see
``backends/torch/timing.py``).
"""
from __future__ import annotations

import os

__all__ = ["AUTO", "DEFAULT_NUM_THREADS", "MAX_THREADS_PER_CPU", "available_cpus", "check_num_threads",
           "max_threads"]

#: Threads used while timing when ``num_threads`` is not given.
DEFAULT_NUM_THREADS = 1

#: ``num_threads=AUTO``: the timing picks the stabler setting (see the module docstring).
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
    """``num_threads`` as an int in ``1..max_threads()``, ``'auto'`` or ``None``; else ``ValueError``/``TypeError``."""
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
