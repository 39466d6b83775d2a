"""Validating ``num_threads`` (the intra-op thread count asked for while timing), for both backends."""
from __future__ import annotations

import os

__all__ = ["MAX_THREADS_PER_CPU", "check_num_threads", "max_threads"]

#: More threads than this many per CPU only oversubscribe the cores (timings get slower and
#: noisier, never faster); frameworks create one OS thread per requested thread, and a request
#: of thousands exhausts the process (torch crashed at exit with ``num_threads=100000``).
MAX_THREADS_PER_CPU = 4


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def max_threads() -> int:
    """The largest accepted ``num_threads``: ``MAX_THREADS_PER_CPU`` x the CPUs this process may use."""
    return MAX_THREADS_PER_CPU * _cpus()


def check_num_threads(num_threads: object, argument: str = "num_threads") -> int | None:
    """``num_threads`` as an int in ``1..max_threads()``, or ``None``; else ``ValueError``/``TypeError`` saying why."""
    if num_threads is None:
        return None
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"{argument} must be an int (threads used while timing), got "
                        f"{type(num_threads).__name__} {num_threads!r}")
    cpus, limit = _cpus(), max_threads()
    if num_threads < 1:
        raise ValueError(f"{argument} must be >= 1, got {num_threads} (this process may use {cpus} CPUs); "
                         f"leave it out to keep the current thread count")
    if num_threads > limit:
        raise ValueError(f"{argument}={num_threads} is more than {MAX_THREADS_PER_CPU} threads per CPU: this process "
                         f"may use {cpus} CPUs, so at most {limit} threads are accepted (more only oversubscribe the "
                         f"cores, and each thread is an OS thread). Pass {argument}={cpus} or less, or leave it out")
    return num_threads
