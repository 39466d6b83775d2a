"""When a measured latency is noise: a large spread, or a machine visibly busy (no framework imports).

Two checks, both reported the same way (a ``NoisyTimingWarning`` and a note that a status value
keeps in its details as ``spread_warning``, so reports can show it next to the time):

* **spread**: the interquartile range of the measurements is more than ``SPREAD_THRESHOLD``
  (20 %) of their median. On a quiet machine a forward's IQR/median stays within a few percent
  (1-thread ResNet-18 and LeNet-5: see docs/benchmarks.rst); one competing process took a
  2-thread measurement to 65-116 %.
* **load**: the 1-minute load average (``os.getloadavg``, where the system has one) is above
  the number of CPUs this process may use, read just before timing: other processes want more
  cores than there are, so some of the timed forwards waited for a core.

The advice is the same for both: time with 1 thread (``num_threads=1``; said only when more
were used), a longer ``min_run_time``, or on a quieter machine.
"""
from __future__ import annotations

import os
import warnings

from deeplite_like.threads import available_cpus

__all__ = ["SPREAD_THRESHOLD", "NoisyTimingWarning", "busy_note", "noise_note", "spread_note",
           "warn_noisy"]

#: IQR / median above which a latency is reported as noisy.
SPREAD_THRESHOLD = 0.20

ADVICE = "give it a longer min_run_time (--min-run-time), or time it on a quieter machine"


class NoisyTimingWarning(UserWarning):
    """A measured latency is not trustworthy: its spread is large or the machine was busy."""


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
