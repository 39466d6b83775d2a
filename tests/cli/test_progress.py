"""The progress bar: a live elapsed time and an ETA, redrawn while a step runs; silent off a terminal."""
from __future__ import annotations

import io
import time

import pytest

from deeplite_like.cli.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _wait_for(stream: io.StringIO, text: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in stream.getvalue():
            return True
        time.sleep(0.01)
    return False


def test_eta_is_the_mean_step_time_times_the_steps_left(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    clock = _Clock()
    with Progress(4, stream=_Terminal(), clock=clock, refresh_s=3600, use_tqdm=False) as progress:
        progress.start("resnet: macs")
        assert progress.eta() is None and progress.line() == "[------------------------] 0/4  resnet: macs  0.0 s"
        clock.now += 2.0
        progress.advance()
        # 2 s for 1 step; 3 steps left: 6 s
        assert progress.eta() == 6.0
        assert progress.line() == "[######------------------] 1/4  resnet: macs  2.0 s  ETA 6 s"
        clock.now += 4.0
        progress.advance(2)  # 6 s for 3 steps: 2 s each, 1 left
        assert progress.line().endswith("3/4  resnet: macs  6.0 s  ETA 2 s")


def test_the_elapsed_time_moves_while_a_step_runs(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    clock, stream = _Clock(), _Terminal()
    progress = Progress(3, stream=stream, clock=clock, refresh_s=0.01, use_tqdm=False)
    progress.start("resnet: time")
    clock.now += 4.2  # no start() or advance(): only the ticker can draw the new time
    assert _wait_for(stream, "0/3  resnet: time  4.2 s")
    clock.now += 5.0
    assert _wait_for(stream, "0/3  resnet: time  9.2 s")
    ticker = progress._ticker
    progress.close()
    assert ticker is not None and not ticker.is_alive()
    assert stream.getvalue().endswith("\r\x1b[K")  # the line is erased
    size = len(stream.getvalue())
    time.sleep(0.05)
    assert len(stream.getvalue()) == size  # nothing drawn after close


def test_silent_and_threadless_when_not_a_terminal():
    stream = io.StringIO()
    with Progress(2, stream=stream, refresh_s=0.01) as progress:
        progress.start("x")
        progress.advance(2)
        assert progress._ticker is None
    assert stream.getvalue() == ""


def test_total_known_later():
    clock = _Clock()
    progress = Progress(None, stream=io.StringIO(), clock=clock)
    progress.start("x")
    assert progress.line() == "[0]  x  0.0 s" and progress.eta() is None
    progress.total = 2
    clock.now += 1.0
    progress.advance()
    assert progress.line() == "[############------------] 1/2  x  1.0 s  ETA 1 s"


def test_tqdm_draws_the_bar_with_elapsed_and_remaining(monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.delenv("TERM", raising=False)
    stream = _Terminal()
    progress = Progress(2, stream=stream, refresh_s=0.01)
    progress.start("resnet: macs")
    assert _wait_for(stream, "0/2  resnet: macs  00:00 < ?")  # no step finished: no estimate yet
    progress.advance()
    progress.start("resnet: time")
    assert _wait_for(stream, "] 1/2  resnet: time  00:00 < 00:0")
    redraws = stream.getvalue().count("\r")
    time.sleep(0.1)  # no call: the ticker redraws (tqdm alone would not)
    assert stream.getvalue().count("\r") > redraws
    progress.total = 3  # a sweep learns its total after the first point
    progress.advance()
    assert _wait_for(stream, "] 2/3  resnet: time")
    progress.close()
    assert progress._bar is None and stream.getvalue().endswith("\r")  # tqdm erased its line
