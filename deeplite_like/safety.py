"""Measuring safely: Ctrl-C never leaves a model half restored, and one model is measured by one thread at a time.

Interrupts: ``interrupt_guard`` and ``uninterruptible``; restore steps: ``restore_each``; threads:
``model_lock``. Each docstring holds its rules.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["ConcurrentMeasurementError", "checkpoint", "interrupt_guard", "model_lock", "protected", "restore_all", "restore_each",
           "uninterruptible"]


class _Sigint:
    """The process's SIGINT state while guards are active (main thread only)."""

    depth = 0  # nested interrupt_guard()s
    masked = 0  # nested uninterruptible() blocks
    pending = False  # an interrupt held by a masked block
    received = False  # an interrupt delivered and not yet seen propagating out of the guard


#: Code of the functions that set up and restore (``protected``): an interrupt handled while one of
#: them is the running frame is held, as inside ``uninterruptible()``. This closes the gap between a
#: function's entry and its first ``with uninterruptible()`` (a ``with`` statement's ``__exit__`` can
#: be interrupted before its first line, and then none of it runs).
_PROTECTED: set[Any] = {contextlib._GeneratorContextManager.__exit__.__code__,
                        contextlib._GeneratorContextManager.__enter__.__code__,
                        contextlib.ExitStack.__exit__.__code__}


def protected(fn: Callable) -> Callable:
    """Mark ``fn`` (a restore or set-up function, or a context manager's generator) as run whole."""
    _PROTECTED.add(fn.__code__)
    return fn


def checkpoint() -> None:
    """Raise an interrupt held while a ``protected`` function ran, now that it is safe (call it at the
    end of a set-up, before handing control back to the measured code)."""
    if _Sigint.pending and not _Sigint.masked and _in_main_thread():
        _Sigint.pending = False
        raise KeyboardInterrupt


def _handler(signum: int, frame: Any) -> None:
    _Sigint.received = True
    if _Sigint.masked or (frame is not None and frame.f_code in _PROTECTED):
        _Sigint.pending = True
        return
    raise KeyboardInterrupt


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def interrupt_guard() -> Iterator[None]:  # (protected below, once defined)
    """Hold Ctrl-C inside ``uninterruptible()`` blocks, and never lose it (the rules are below).

    A generator, so that an interrupt landing between the setting up and the ``with`` body (where
    a class's ``__exit__`` would never run) still restores the handler: dropping the suspended
    generator runs its ``finally``. A handler of ours left by such an instant counts as Python's.

    Interrupts
        ``interrupt_guard()`` wraps a whole measurement (in the main thread, where Python runs signal
        handlers, and only while SIGINT has Python's default handler). Inside it Ctrl-C still raises
        ``KeyboardInterrupt`` at once, so a long forward stays interruptible, except inside
        ``uninterruptible()`` blocks: the code that puts the model back. There the interrupt is held
        and raised when the outermost such block ends, after every restore step ran. An interrupt
        that was raised but never reached the guard (Python swallows exceptions raised inside weakref
        callbacks and ``__del__``: "Exception ignored in ...") is raised again when the guard exits.
        The previous handler is put back on exit.
    """
    if not _in_main_thread() or (_Sigint.depth == 0 and
                                 signal.getsignal(signal.SIGINT) not in (signal.default_int_handler, _handler)):
        yield  # the user's own handler (or none, or another thread): theirs to keep
        return
    propagated = counted = False
    try:
        _Sigint.depth += 1
        counted = True  # (no signal is handled between these two statements: no call, no jump)
        if _Sigint.depth == 1:
            _Sigint.received = _Sigint.pending = False
            signal.signal(signal.SIGINT, _handler)
        try:
            checkpoint()
            yield
        except KeyboardInterrupt:
            propagated = True
            raise
    finally:
        if counted:
            _Sigint.depth -= 1
        if _Sigint.depth == 0:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            swallowed = _Sigint.received and not propagated
            _Sigint.received = _Sigint.pending = False
            if swallowed:
                raise KeyboardInterrupt


@contextmanager
@protected
def uninterruptible() -> Iterator[None]:
    """Hold Ctrl-C for the block (restore code); raise it after the outermost block (see ``interrupt_guard``)."""
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


@protected
def restore_each(items: Iterable[Any], fn: Callable[[Any], Any]) -> None:
    """``fn(item)`` for every item; an error in one does not skip the others; the first is raised at the end.

    Restore steps
        ``restore_each(items, fn)`` applies ``fn`` to every item even when one raises, then raises the
        first error: one failing step never skips the steps after it.
    """
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


@protected
def restore_all(*steps: Callable[[], Any]) -> None:
    """Run every step (``restore_each`` of the calls): one that raises does not skip those after it."""
    restore_each(steps, lambda step: step())


_locks: "weakref.WeakKeyDictionary[Any, threading.RLock]" = weakref.WeakKeyDictionary()
_owners: dict[int, str] = {}  # id(lock) -> the name of the thread measuring with it
_locks_lock = threading.Lock()


@contextmanager
@protected
def model_lock(modules: Iterable[Any]) -> Iterator[None]:
    """Measure ``modules`` (a model's modules or layers) in one thread at a time (why: below).

    Re-entrant in one thread (a measurement inside another). A thread that finds any of them being
    measured by another thread is refused at once with ``ConcurrentMeasurementError`` naming that
    thread: waiting could deadlock (a forward that waits for a thread measuring the same model),
    and measuring at the same time would restore each other's snapshots. One ``Profiler`` shared by
    threads makes them take turns itself (``Profiler._exclusive``).

    Threads
        ``model_lock(modules)`` lets one thread at a time measure a model (re-entrant in that thread):
        another thread is refused at once with ``ConcurrentMeasurementError`` naming the thread that
        holds it. Measuring snapshots and restores a model's mutable state (training flags, buffers,
        gradients): two threads doing it at once would restore each other's snapshots, and waiting
        could deadlock a forward that itself waits for such a thread. Different models are measured
        in parallel; threads sharing one ``Profiler`` take turns.
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
        checkpoint()
        yield
    finally:
        with uninterruptible(), _locks_lock:
            _release(taken)


def _release(taken: list) -> None:
    for lock in reversed(taken):
        lock.release()
        if not lock._is_owned():  # (the outermost release of this thread: no owner any more)
            _owners.pop(id(lock), None)


_PROTECTED.add(interrupt_guard.__wrapped__.__code__)
