"""A progress bar on a terminal, with a live elapsed time and an ETA; nothing at all when the
output goes to a pipe or a file.

Drawn on standard error, one line rewritten in place, cleared when done, so the report on
standard output is never mixed with it. The bar is ``tqdm``'s (``elapsed < remaining``); a
ticker thread redraws it every ``refresh_s`` seconds, because a profiling step (timing runs,
per-layer timing) can take many seconds and neither tqdm nor a plain bar redraws between
updates on its own. Where tqdm is not installed (it is a dependency, but a partial install
should still work), the same line is drawn by hand: ``[#####-----] 3/6  label  1.2 s  ETA 2 s``.
Nothing is imported, and no thread started, unless the bar is drawn.
"""
from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeVar

T = TypeVar("T")


def is_terminal(stream: IO[str]) -> bool:
    """True when ``stream`` is an interactive terminal that can redraw a line."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


class Progress:
    """``total`` steps, drawn live while on a terminal (see the module docstring).

    Args:
        total: the number of steps (``None``: unknown until set; only the count is shown).
        stream: where to draw (default: standard error).
        enabled: ``None`` (default) draws only when ``stream`` is a terminal.
        width: characters of the bar.
        refresh_s: seconds between redraws while a step runs.
        clock: seconds since some fixed point (``time.perf_counter``); tests pass their own.
        use_tqdm: draw with tqdm when it is installed (``False``: always by hand).
    """

    def __init__(self, total: int | None, stream: IO[str] | None = None, enabled: bool | None = None,
                 width: int = 24, refresh_s: float = 0.5, clock: Callable[[], float] = time.perf_counter,
                 use_tqdm: bool = True) -> None:
        self._total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self.width = width
        self.refresh_s = refresh_s
        self.clock = clock
        self.use_tqdm = use_tqdm
        self.done = 0
        self.label = ""
        self._start = clock()
        self._drawn = False
        self._bar: Any = None  # the tqdm bar, once drawn with tqdm
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # ------------------------------------------------------------------ state
    @property
    def total(self) -> int | None:
        return self._total

    @total.setter
    def total(self, value: int | None) -> None:
        with self._lock:
            self._total = value
            if self._bar is not None:
                self._bar.total = value

    def start(self, label: str) -> None:
        """Show ``label`` as the step now running (the count is of steps finished)."""
        with self._lock:
            self.label = label
            if self._bar is not None:
                self._bar.set_description_str(label, refresh=False)
        self._draw()

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more as finished."""
        with self._lock:
            self.done += steps
            if self._bar is not None:
                self._bar.update(steps)
        self._draw()

    def elapsed(self) -> float:
        """Seconds since the bar was made."""
        return self.clock() - self._start

    def eta(self) -> float | None:
        """Seconds left at the mean time per finished step (``None`` before the first one, or without a total)."""
        if not self._total or self.done <= 0:
            return None
        return self.elapsed() / self.done * max(0, self._total - self.done)

    def line(self) -> str:
        """The line drawn by hand for the current state (without control characters)."""
        if self._total:
            filled = min(self.width, self.width * self.done // self._total)
            bar = "[" + "#" * filled + "-" * (self.width - filled) + f"] {self.done}/{self._total}"
        else:
            bar = f"[{self.done}]"
        eta = self.eta()
        return f"{bar}  {self.label}  {self.elapsed():.1f} s" + (f"  ETA {eta:.0f} s" if eta is not None else "")

    # ------------------------------------------------------------------ drawing
    def _draw(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self._bar is None and not self._drawn and self.use_tqdm:
                self._open_tqdm()
            self._draw_now()
            self._drawn = True
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="deeplite-like progress", daemon=True)
            self._ticker.start()

    def _open_tqdm(self) -> None:
        try:
            from tqdm import tqdm
        except ImportError:  # a partial install: the line is drawn by hand
            return
        self._bar = tqdm(total=self._total, file=self.stream, leave=False, desc=self.label, initial=self.done,
                         ncols=_columns(self.stream) - 1, mininterval=0, ascii=" #",
                         bar_format="[{bar:" + str(self.width) + "}] {n_fmt}/{total_fmt}  {desc}  "
                                    "{elapsed} < {remaining}")

    def _tick(self) -> None:
        while not self._stop.wait(self.refresh_s):
            with self._lock:
                if self._stop.is_set():
                    return
                self._draw_now()

    def _draw_now(self) -> None:
        if self._bar is not None:
            self._bar.refresh()
        else:
            self.stream.write("\r\x1b[K" + self.line()[:_columns(self.stream) - 1])
            self.stream.flush()

    def close(self) -> None:
        """Stop redrawing and erase the bar (the line is left empty for what is printed next)."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        with self._lock:
            if self._bar is not None:
                self._bar.close()  # leave=False: tqdm erases its line
                self._bar = None
            elif self.enabled and self._drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            self._drawn = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def track(items: Iterable[T], label: str, total: int | None = None, stream: IO[str] | None = None,
          enabled: bool | None = None) -> Iterator[T]:
    """Yield ``items`` while drawing a bar (e.g. over the batches of an evaluation)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Progress(total, stream=stream, enabled=enabled) as progress:
        progress.start(label)
        for item in items:
            yield item
            progress.advance()


def _columns(stream: IO[str]) -> int:
    """The terminal's width; 100 when it is unknown (not a real terminal, or one reporting 0)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return 100
    return columns if columns >= 20 else 100
