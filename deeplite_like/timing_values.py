"""The status values of a timing, the same for every backend (no framework imports).

``execution_time`` is the median of the timed measurements, with its spread in the details
(``iqr``, quartiles ``q1`` and ``q3``, ``min``) so that every report can show it and a compare
can tell a difference from noise; ``throughput`` carries the matching ``interval`` (samples per
second at ``q3`` and ``q1``). On the meta device nothing runs, so both are *not measured*,
with the reason, instead of a number that means nothing.
"""
from __future__ import annotations

from typing import Any

from deeplite_like.measurements import TimingStats
from deeplite_like.metrics import ExecutionTime, Throughput
from deeplite_like.status import Detailed

__all__ = ["META_NOT_TIMED", "not_measured", "timing_values"]

META_NOT_TIMED = ("the meta device runs no arithmetic, so there is no time to measure; time the model on "
                  "a real device (device='cpu' or 'cuda')")


def timing_values(timing: TimingStats, **extra: Any) -> dict[str, Detailed]:
    """``{execution_time, throughput}`` of ``timing``; ``extra`` details go with the execution time."""
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
