"""Measuring safely: Ctrl-C never leaves a model half restored, and one model is measured by one thread at a time.

Interrupts
    ``interrupt_guard()`` wraps a whole measurement (in the main thread, where Python runs signal
    handlers, and only while SIGINT has Python's default handler). Inside it Ctrl-C still raises
    ``KeyboardInterrupt`` at once, so a long forward stays interruptible, except inside
    ``uninterruptible()`` blocks: the code that puts the model back. There the interrupt is held
    and raised when the outermost such block ends, after every restore step ran. An interrupt
    that was raised but never reached the guard (Python swallows exceptions raised inside weakref
    callbacks and ``__del__``: "Exception ignored in ...") is raised again when the guard exits.
    The previous handler is put back on exit.

Restore steps
    ``restore_each(items, fn)`` applies ``fn`` to every item even when one raises, then raises the
    first error: one failing step never skips the steps after it.

Threads
    ``model_lock(modules)`` lets one thread at a time measure a model (re-entrant in that thread):
    another thread is refused at once with ``ConcurrentMeasurementError`` naming the thread that
    holds it. Measuring snapshots and restores a model's mutable state (training flags, buffers,
    gradients): two threads doing it at once would restore each other's snapshots, and waiting
    could deadlock a forward that itself waits for such a thread. Different models are measured
    in parallel; threads sharing one ``Profiler`` take turns.
"""
from __future__ import annotations

import signal
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["ConcurrentMeasurementError", "interrupt_guard", "model_lock", "restore_all", "restore_each",
           "uninterruptible"]


class _Sigint:
    """The process's SIGINT state while guards are active (main thread only)."""

    depth = 0  # nested interrupt_guard()s
    masked = 0  # nested uninterruptible() blocks
    pending = False  # an interrupt held by a masked block
    received = False  # an interrupt delivered and not yet seen propagating out of the guard


def _handler(signum: int, frame: Any) -> None:
    _Sigint.received = True
    if _Sigint.masked:
        _Sigint.pending = True
        return
    raise KeyboardInterrupt


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class interrupt_guard:  # noqa: N801  (used as a context manager, like contextlib's)
    """Hold Ctrl-C inside ``uninterruptible()`` blocks, and never lose it (see the module docstring)."""

    def __enter__(self) -> "interrupt_guard":
        self._active = False
        if not _in_main_thread():
            return self
        if _Sigint.depth == 0:
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                return self  # the user's own handler (or none): theirs to keep
            signal.signal(signal.SIGINT, _handler)
            _Sigint.received = _Sigint.pending = False
        _Sigint.depth += 1
        self._active = True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self._active:
            return None
        _Sigint.depth -= 1
        if _Sigint.depth:
            return None
        signal.signal(signal.SIGINT, signal.default_int_handler)
        swallowed = _Sigint.received and not (exc_type is not None and issubclass(exc_type, KeyboardInterrupt))
        _Sigint.received = _Sigint.pending = False
        if swallowed:
            raise KeyboardInterrupt
        return None


@contextmanager
def uninterruptible() -> Iterator[None]:
    """Hold Ctrl-C for the block (restore code); raise it after the outermost block (see the module docstring)."""
    if not _in_main_thread():
        yield
        return
    _Sigint.masked += 1
    try:
        yield
    finally:
        _Sigint.masked -= 1
        if _Sigint.masked == 0 and _Sigint.pending:
            _Sigint.pending = False
            raise KeyboardInterrupt


def restore_each(items: Iterable[Any], fn: Callable[[Any], Any]) -> None:
    """``fn(item)`` for every item; an error in one does not skip the others; the first is raised at the end."""
    first: BaseException | None = None
    for item in items:
        try:
            fn(item)
        except BaseException as error:  # noqa: B036  (an interrupt too: the rest must still be restored)
            if first is None:
                first = error
    if first is not None:
        raise first


class ConcurrentMeasurementError(RuntimeError):
    """The model is being measured by another thread (``model_lock``)."""


def restore_all(*steps: Callable[[], Any]) -> None:
    """Run every step (``restore_each`` of the calls): one that raises does not skip those after it."""
    restore_each(steps, lambda step: step())


_locks: "weakref.WeakKeyDictionary[Any, threading.RLock]" = weakref.WeakKeyDictionary()
_owners: dict[int, str] = {}  # id(lock) -> the name of the thread measuring with it
_locks_lock = threading.Lock()


@contextmanager
def model_lock(modules: Iterable[Any]) -> Iterator[None]:
    """Measure ``modules`` (a model's modules or layers) in one thread at a time (module docstring).

    Re-entrant in one thread (a measurement inside another). A thread that finds any of them being
    measured by another thread is refused at once with ``ConcurrentMeasurementError`` naming that
    thread: waiting could deadlock (a forward that waits for a thread measuring the same model),
    and measuring at the same time would restore each other's snapshots. One ``Profiler`` shared by
    threads makes them take turns itself (``Profiler._exclusive``).
    """
    modules = list(modules)
    with uninterruptible(), _locks_lock:  # (a lock taken is always one to release)
        locks = []
        for module in sorted(set(modules), key=id):
            try:
                lock = _locks.get(module)
                if lock is None:
                    lock = _locks[module] = threading.RLock()
            except TypeError:  # (an object that cannot be weakly referenced: not locked)
                continue
            locks.append((module, lock))
        taken = []
        try:
            for module, lock in locks:
                if not lock.acquire(blocking=False):
                    other = _owners.get(id(lock), "another thread")
                    root = type(modules[0]).__name__ if modules else "the model"
                    raise ConcurrentMeasurementError(
                        f"{root} is being measured by {other} (its {type(module).__name__} is in use): measure one "
                        "model from one thread at a time, share one profiler between threads (they take turns), "
                        "or measure a copy (copy.deepcopy(model)) in the other thread")
                taken.append(lock)
                _owners.setdefault(id(lock), threading.current_thread().name)
        except BaseException:
            _release(taken)
            raise
    try:
        yield
    finally:
        with uninterruptible(), _locks_lock:
            _release(taken)


def _release(taken: list) -> None:
    for lock in reversed(taken):
        lock.release()
        if not lock._is_owned():  # (the outermost release of this thread: no owner any more)
            _owners.pop(id(lock), None)
