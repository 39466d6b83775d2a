"""The two kinds of command-line error, and the exit codes they map to.

Exit codes: 0 success; 2 a usage error (the command line asks for something that cannot be
done as written: an unknown model spec, a missing optional package, a bad shape, a file that
cannot be loaded safely), found before any model code runs; 1 a failure while the model is
built or profiled; 130 interrupted (Ctrl-C). Every error is one line plus a hint; ``--verbose``
adds the traceback.

Ctrl-C must end the command with 130, always. Python delivers SIGINT as a ``KeyboardInterrupt``
raised wherever the main thread happens to be, and some places swallow it: a ``__del__``, a
weakref or garbage-collector callback ("Exception ignored in ..."), or library code with a
broad ``except``. So while a command runs, ``watching_interrupts`` also *remembers* the signal:
the command then writes no report (``raise_if_interrupted`` before any output) and exits 130
whatever became of the exception.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_INTERRUPTED = threading.Event()


@contextlib.contextmanager
def watching_interrupts() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` as usual and is also remembered (``interrupted()``) for the block.

    Only the main thread can set a signal handler; elsewhere the block runs unwatched, and so it
    does where SIGINT is ignored (a background job). The previous handler is put back afterwards
    (and called on SIGINT when it is a function).
    """
    previous = signal.getsignal(signal.SIGINT)
    _INTERRUPTED.clear()
    if threading.current_thread() is not threading.main_thread() or previous in (signal.SIG_IGN, None):
        yield  # another thread cannot set handlers; an ignored SIGINT (a background job) stays ignored
        return

    def remember(signum: int, frame: Any) -> None:
        _INTERRUPTED.set()
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, frame)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, remember)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted() -> bool:
    """Whether SIGINT arrived in the current ``watching_interrupts`` block (even if its exception was swallowed)."""
    return _INTERRUPTED.is_set()


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` when SIGINT arrived and was swallowed: nothing is written after Ctrl-C."""
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


class CommandError(Exception):
    """An error the command line reports as one line plus a hint.

    Attributes:
        message: what was wrong, and where (which model spec, file or option).
        hint: what to do about it (may be empty).
        exit_code: ``EXIT_USAGE`` (2) or ``EXIT_FAILURE`` (1).
    """

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(CommandError):
    """The command line asks for something that cannot be done as written (exit code 2)."""

    exit_code = EXIT_USAGE


class ProfilingFailed(CommandError):
    """Building or profiling the model failed (exit code 1)."""
