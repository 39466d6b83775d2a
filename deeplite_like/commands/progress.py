"""A progress bar on a terminal, and nothing at all when the output goes to a pipe or a file.

Drawn on standard error, one line rewritten in place (``\\r``), cleared when done, so the
report on standard output is never mixed with it. Written here rather than taken from
``tqdm`` or ``rich`` because it is a few lines and the package depends on ``prettytable``
alone.
"""
from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")


def is_terminal(stream: IO[str]) -> bool:
    """True when ``stream`` is an interactive terminal that can redraw a line."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


class Progress:
    """``total`` steps, drawn as ``[#####-----] 3/6  label  1.2 s`` while on a terminal.

    Args:
        total: the number of steps (``None``: unknown, only the count is shown).
        stream: where to draw (default: standard error).
        enabled: ``None`` (default) draws only when ``stream`` is a terminal.
        width: characters of the bar.
    """

    def __init__(self, total: int | None, stream: IO[str] | None = None, enabled: bool | None = None,
                 width: int = 24) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self.width = width
        self.done = 0
        self.label = ""
        self._start = time.perf_counter()
        self._drawn = False

    def start(self, label: str) -> None:
        """Show ``label`` as the step now running (the count is of steps finished)."""
        self.label = label
        self._draw()

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more as finished."""
        self.done += steps
        self._draw()

    def line(self) -> str:
        """The text drawn for the current state (without control characters)."""
        elapsed = time.perf_counter() - self._start
        if self.total:
            filled = min(self.width, self.width * self.done // self.total)
            bar = "[" + "#" * filled + "-" * (self.width - filled) + f"] {self.done}/{self.total}"
        else:
            bar = f"[{self.done}]"
        return f"{bar}  {self.label}  {elapsed:.1f} s"

    def _draw(self) -> None:
        if not self.enabled:
            return
        self.stream.write("\r\x1b[K" + self.line()[:_columns(self.stream) - 1])
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Erase the bar (the line is left empty for what is printed next)."""
        if self.enabled and self._drawn:
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
