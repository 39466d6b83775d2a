"""When a latency is flagged as noise: load average above the CPUs, IQR/median above 20 %."""
from __future__ import annotations

import os
import warnings

import pytest

import deeplite_like.timing as noise
from deeplite_like.timing import (SPREAD_THRESHOLD, NoisyTimingWarning, busy_note, noise_note, spread_note,
                                        warn_noisy)


@pytest.fixture()
def two_cpus(monkeypatch):
    monkeypatch.setattr(noise, "available_cpus", lambda: 2)


def test_busy_when_the_load_average_is_above_the_cpus(monkeypatch, two_cpus):
    monkeypatch.setattr(os, "getloadavg", lambda: (3.5, 1.0, 1.0))
    assert busy_note() == "the machine was busy (1-minute load average 3.5 on 2 CPUs)"
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 9.0, 9.0))  # equal to the CPUs, 1-minute figure only
    assert busy_note() == ""


def test_no_load_average_is_not_busy(monkeypatch, two_cpus):
    def unavailable():
        raise OSError("no load average here")
    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert busy_note() == ""


def test_spread_threshold_is_twenty_percent():
    assert SPREAD_THRESHOLD == 0.20
    assert spread_note(0.010, 0.002, 1) == ""  # 20 %: not above
    assert spread_note(0.010, 0.0021, 1) == ("the spread is large (IQR 21% of the median, above 20%, at 1 thread)")
    assert spread_note(0.0, 0.0, 1) == ""


def test_advice_names_one_thread_only_when_more_were_used():
    note = noise_note(["", "the machine was busy (x)"], num_threads=4)
    assert note == ("latency may be noise: the machine was busy (x). To trust it, time with 1 thread "
                    "(num_threads=1, --num-threads 1), give it a longer min_run_time (--min-run-time), or time it "
                    "on a quieter machine")
    assert "1 thread" not in noise_note(["a", "b"], num_threads=1) and "a; b." in noise_note(["a", "b"], 1)
    assert noise_note(["", ""], num_threads=2) == ""


def test_warning_only_when_there_is_a_note():
    with pytest.warns(NoisyTimingWarning, match="^execution time of net: latency may be noise"):
        warn_noisy("latency may be noise: x", "execution time of net")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_noisy("", "execution time of net")
