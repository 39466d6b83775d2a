"""Which phase of a training step is running: backward, optimizer step, forward (a layer call), other.

``Phases`` is one profile's view, in the thread that profiles: how deep it is inside a
gradient computation, an optimizer step and a layer call of the model, and how long the
outermost gradient computations and optimizer steps took (seconds, with the device
synchronised around them on a GPU).

Keras has no hook for "a gradient is being computed" or "the optimizer applies an update",
so two methods are wrapped on their classes: ``Optimizer.apply`` (on the base class that
defines it; ``apply_gradients`` calls it) and, on TensorFlow, ``tf.GradientTape.gradient``.
A class attribute is process-wide, so:

* the wrappers are a ``SharedChange``: installed when the first profile in the process
  starts, removed when the last one stops, whatever the order (see ``shared.py``);
* a wrapper looks up the profiles running *in the calling thread* (thread-local) and does
  nothing else: other threads' gradients and optimizer steps run untouched and uncounted.

Layer depth is kept by the profile's layer recorder (``session.py``), which records only its
own thread and its own model.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Any, Callable, Iterator

from .._tf import import_keras
from .shared import SharedChange

__all__ = ["PhaseHooks", "Phases"]


class Phases:
    """Where the profiled thread is: inside a gradient computation, an optimizer step, a layer call."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self.gradient = 0
        self.optimizer = 0
        self.layers = 0
        self.seconds = {"backward": 0.0, "optimizer": 0.0}
        self._sync = sync

    def current(self) -> str | None:
        """The phase of an op running now; ``None`` for the forward (priced per layer)."""
        if self.gradient:
            return "backward"
        if self.optimizer:
            return "optimizer"
        return None if self.layers else "other"

    @contextlib.contextmanager
    def inside(self, what: str) -> Iterator[None]:
        """Count the body as inside ``what`` (``'gradient'`` or ``'optimizer'``), timing the outermost."""
        outermost = getattr(self, what) == 0
        if outermost:
            self._sync()
        start = time.perf_counter()
        setattr(self, what, getattr(self, what) + 1)
        try:
            yield
        finally:
            setattr(self, what, getattr(self, what) - 1)
            if outermost:
                self._sync()
                self.seconds["backward" if what == "gradient" else what] += time.perf_counter() - start


# -- the class-level hooks, shared by every profile of the process ---------------------------
_THREAD = threading.local()  # .active: the Phases of the profiles running in this thread


def _active() -> list[Phases]:
    active = getattr(_THREAD, "active", None)
    if active is None:
        active = _THREAD.active = []
    return active


def _optimizer_class() -> type:
    """The class that defines ``apply`` for Keras optimizers (``BaseOptimizer``)."""
    keras = import_keras()
    for klass in keras.optimizers.Optimizer.__mro__:
        if "apply" in klass.__dict__:
            return klass
    raise RuntimeError("cannot find Optimizer.apply in this Keras version; the optimizer phase cannot be told apart")


def _wrapped(original: Callable, what: str) -> Callable:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        active = getattr(_THREAD, "active", None)
        if not active:  # no profile in this thread: as if not wrapped
            return original(*args, **kwargs)
        with contextlib.ExitStack() as stack:
            for phases in list(active):
                stack.enter_context(phases.inside(what))
            return original(*args, **kwargs)

    return wrapper


def _replace(owner: type, name: str, what: str) -> Callable[[], None]:
    """Wrap ``owner.name``; return the undo (which leaves alone a wrapper someone put on top of ours)."""
    had = name in owner.__dict__
    original = owner.__dict__.get(name)
    wrapper = _wrapped(getattr(owner, name), what)
    setattr(owner, name, wrapper)

    def undo() -> None:
        if owner.__dict__.get(name) is not wrapper:
            return  # replaced again since; ours, underneath, does nothing outside a profile
        if had:
            setattr(owner, name, original)
        else:
            delattr(owner, name)

    return undo


def _install() -> Callable[[], None]:
    undos: list[Callable[[], None]] = []

    def undo_all() -> None:
        while undos:
            undos.pop()()

    try:
        undos.append(_replace(_optimizer_class(), "apply", "optimizer"))
        if import_keras().config.backend() == "tensorflow":
            from tensorflow.python.eager import backprop
            undos.append(_replace(backprop.GradientTape, "gradient", "gradient"))
    except BaseException:
        undo_all()
        raise
    return undo_all


_HOOKS = SharedChange("the phase hooks (Optimizer.apply, GradientTape.gradient)", _install)


class PhaseHooks:
    """Feed ``phases`` from the class-level hooks while attached, in the thread that attached.

    Also a context manager. ``detach`` must run in the thread that called ``attach``.
    """

    def __init__(self, phases: Phases) -> None:
        self.phases = phases
        self._attached = False

    def attach(self) -> None:
        _HOOKS.acquire()
        _active().append(self.phases)
        self._attached = True

    def detach(self) -> None:
        if not self._attached:
            return
        active = _active()
        if not any(p is self.phases for p in active):
            raise RuntimeError("PhaseHooks.detach() called in another thread than attach(); detach in the "
                               "thread that profiles")
        del active[next(i for i, p in enumerate(active) if p is self.phases)]
        self._attached = False
        _HOOKS.release()

    def __enter__(self) -> "PhaseHooks":
        self.attach()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.detach()
