"""A profiling session: everything attached to a Keras model while a profile runs, and taken off at stop.

* ``TimedRecorder``: the counting engine's ``LayerRecorder`` (instance-level, this model and
  this thread only) that also times layer calls, keeps the layer depth for the phases, and
  reads the batch size and ``training`` flag of the model's outermost call;
* an operator counter for what runs outside the layers (``TFOpCounter``, ``TorchOpCounter``:
  the backward, the optimizer step and the rest - the loss, metrics - priced operator by
  operator, per phase; the forward is priced per layer from the recorder's records), and the
  phase hooks it needs (``Phases``, ``PhaseHooks``) - only when operators are counted.

A session is started and stopped in one thread (the op callback and dispatch mode it uses
are per thread); ``stop`` raises, changing nothing, when called from another. What must be
changed process-wide (two class methods wrapped, and on TensorFlow
``tf.config.run_functions_eagerly(True)``) is a ``SharedChange``: made by the first profile
that starts, undone by the last that stops, the user's previous setting put back. JAX has no
operator hook: only the forward is counted (the profile's notes say so).
"""
from __future__ import annotations

import contextlib
import functools
import threading
import time
from typing import Any, Callable, Iterator

from deeplite_like.results import OpStats

from ._tf import import_keras, import_tensorflow
from .counting.engine import OpTap, own_ops
from .counting.tf_ops import tf_op_cost
from .counting.recorder import LayerRecorder, SpecMaker, named_layers
from .latency import synchronizer
from .tensors import batch_size_of

__all__ = ["OpTotals", "PhaseHooks", "Phases", "Session", "SharedChange", "TFOpCounter", "TimedRecorder",
           "TorchOpCounter", "make_counter"]


# -- a process-wide change, shared by the running profiles -----------------------------------
class SharedChange:
    """A process-wide change shared by every profile that needs it, made once and undone once.

    Some of what a training-step profile needs cannot be scoped to one model or one thread: a
    method wrapped on a class (``Optimizer.apply``, ``GradientTape.gradient``), a global setting
    (``tf.config.run_functions_eagerly``). If each profile made and undid such a change itself,
    two profiles overlapping in two threads would undo in the wrong order - the second saves the
    first one's change as "the original" and puts it back last, leaving Keras patched for good.

    ``SharedChange`` counts its users under a lock: the first ``acquire`` makes the change, the
    last ``release`` undoes it, in whatever order profiles start and stop. What the change does
    while it is in place must then be harmless to threads that are not profiling (the phase
    hooks do nothing there).

    ``make()`` applies the change and returns the function that undoes it.
    """

    def __init__(self, name: str, make: Callable[[], Callable[[], None]]) -> None:
        self.name = name
        self._make = make
        self._undo: Callable[[], None] | None = None
        self._users = 0
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Hold the change (making it if no one holds it); raises, changing nothing, if making it fails."""
        with self._lock:
            if self._users == 0:
                self._undo = self._make()
            self._users += 1

    def release(self) -> None:
        """Stop holding the change; the last holder undoes it."""
        with self._lock:
            if self._users == 0:
                raise RuntimeError(f"{self.name}: released more often than acquired")
            self._users -= 1
            if self._users == 0:
                undo, self._undo = self._undo, None
                if undo is not None:
                    undo()


# -- the phases of a training step ---------------------------------------------------------------
class Phases:
    """Where the profiled thread is: inside a gradient computation, an optimizer step, a layer call.

    One profile's view, in the thread that profiles: how deep it is inside a gradient
    computation, an optimizer step and a layer call of the model, and how long the outermost
    gradient computations and optimizer steps took (seconds, with the device synchronised
    around them on a GPU). Keras has no hook for "a gradient is being computed" or "the
    optimizer applies an update", so two methods are wrapped on their classes (``PhaseHooks``):
    ``Optimizer.apply`` (on the base class that defines it; ``apply_gradients`` calls it) and,
    on TensorFlow, ``tf.GradientTape.gradient``. A class attribute is process-wide, so the
    wrappers are a ``SharedChange`` (installed when the first profile in the process starts,
    removed when the last one stops, whatever the order), and a wrapper looks up the profiles
    running *in the calling thread* (thread-local) and does nothing else: other threads'
    gradients and optimizer steps run untouched and uncounted. Layer depth is kept by the
    profile's layer recorder (``TimedRecorder``), which records only its own thread and its own
    model.
    """

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


# -- operator counters: what runs outside the layers ---------------------------------------------
class OpTotals:
    """Per-phase and per-operator totals of the operators counted one by one."""

    def __init__(self) -> None:
        self.phases: dict[str, OpStats] = {}
        self.by_operator: dict[str, OpStats] = {}
        self.untracked: dict[str, int] = {}

    def add(self, phase: str, name: str, macs: int, flops: int) -> None:
        self.phases.setdefault(phase, OpStats()).add(macs, flops)
        self.by_operator.setdefault(name, OpStats()).add(macs, flops)


def _run_functions_eagerly() -> Callable[[], None]:
    tf = import_tensorflow()
    previous = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    return lambda: tf.config.run_functions_eagerly(previous)


_EAGER_FUNCTIONS = SharedChange("tf.config.run_functions_eagerly(True)", _run_functions_eagerly)


class TFOpCounter:
    """TensorFlow op callback: prices every eager op outside the forward.

    An op callback (``tensorflow.python.framework.op_callbacks``, what
    ``tf.debugging.enable_check_numerics`` uses; thread-local: only the profiling thread's ops
    are seen) prices every eager op with ``counting.tf_ops.tf_op_cost``.

    **Global setting, unavoidable:** a ``tf.function`` that was traced already (a compiled
    ``train_on_batch``, a ``@tf.function`` step) runs its graph as one op, and the callback
    would see nothing of it. So while a profile runs, ``tf.function``s run eagerly
    (``tf.config.run_functions_eagerly(True)``), which is process-wide: other threads'
    ``tf.function``s run eagerly too (slower, same results). It is a ``SharedChange``: set
    when the first profile starts, and the user's previous setting (whatever it was) put back
    when the last one stops - also when the step raised, at ``stop_profile()``. Latencies
    measured then are eager ones; the profile's notes say so.
    """

    def __init__(self, phases: Phases) -> None:
        self.ops = OpTotals()
        self._phases = phases
        self._thread: int | None = None
        #: the forward's operators, per layer call (priced where a layer has no formula: ``counting.engine.own_ops``)
        self.forward_tap: OpTap | None = None

    def attach(self) -> None:
        from tensorflow.python.framework import op_callbacks

        _EAGER_FUNCTIONS.acquire()
        try:
            op_callbacks.add_op_callback(self._on_op)
        except BaseException:
            _EAGER_FUNCTIONS.release()
            raise
        self._thread = threading.get_ident()

    def detach(self) -> None:
        """Remove the callback (in the attaching thread: callbacks are thread-local) and release eager mode."""
        from tensorflow.python.framework import op_callbacks

        if self._thread is None:
            return
        if threading.get_ident() != self._thread:
            raise RuntimeError("stop_profile() must run in the thread that called start_profile(): TensorFlow's "
                               "op callbacks are per thread")
        with contextlib.suppress(KeyError, ValueError):  # already removed (op_callbacks.clear_op_callbacks())
            op_callbacks.remove_op_callback(self._on_op)
        self._thread = None
        _EAGER_FUNCTIONS.release()

    def _on_op(self, op_type: Any, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None,
               graph: Any = None) -> None:
        if graph is not None:  # an op added to a graph being built (tracing), not run
            return None
        phase = self._phases.current()
        if phase is None and self.forward_tap is None:
            return None
        name = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        cost = tf_op_cost(name, tuple(inputs or ()), attrs, tuple(outputs or ()))
        if phase is None:  # the forward: kept per layer call, priced where the layer has no formula
            self.forward_tap.add(f"tf.{name}", cost)
            return None
        if cost is None:
            self.ops.untracked[name] = self.ops.untracked.get(name, 0) + 1
            return None
        self.ops.add(phase, name, *cost)
        return None


class TorchOpCounter:
    """Keras on torch: the torch dispatch mode counts what the layers do not (backward, optimizer, rest).

    The torch backend's counting dispatch mode (``PhaseCountingMode``, thread-local) prices the
    torch operators Keras runs (``loss.backward()``, the ``_foreach_*`` optimizer ops).
    """

    def __init__(self, phases: Phases) -> None:
        from deeplite_like.backends.torch.counting.registry import op_name
        from deeplite_like.backends.torch.latency import PhaseCountingMode, current_autograd_node

        from .counting.torch_ops import aten_cost

        counter = self
        self.forward_tap: OpTap | None = None

        class KerasTorchMode(PhaseCountingMode):
            """No torch module is attached: the phase comes from autograd and the Keras-side flags."""

            def _current_phase(self) -> str:
                if current_autograd_node() is not None:
                    return "backward"
                return phases.current() or "forward"

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if phases.current() is None and current_autograd_node() is None:
                    # the forward: priced per layer; its operators kept per layer call (counting.engine.own_ops)
                    kwargs = kwargs or {}
                    out = func(*args, **kwargs)
                    if counter.forward_tap is not None:
                        counter.forward_tap.add(op_name(func), aten_cost(func, args, kwargs, out))
                    return out
                return super().__torch_dispatch__(func, types, args, kwargs)

        self.mode = KerasTorchMode(time_backward=True)
        self._phases = phases
        self._attached = False

    @property
    def ops(self) -> OpTotals:
        self.mode.flush()
        ops = OpTotals()
        for phase, stats in self.mode.result.phases.items():
            if phase != "forward" and stats.calls:
                ops.phases[phase] = OpStats(stats.macs, stats.flops, stats.calls)
        ops.by_operator = {k: OpStats(v.macs, v.flops, v.calls) for k, v in self.mode.outside.items()}
        ops.untracked = dict(self.mode.result.untracked)
        return ops

    def attach(self) -> None:
        self.mode.__enter__()
        self._attached = True

    def detach(self) -> None:
        """Exit the dispatch mode; raises, changing nothing, if another mode was entered on top of it."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        if not self._attached:
            return
        if _get_current_dispatch_mode() is not self.mode:
            raise RuntimeError("stop_profile(): another TorchDispatchMode was entered after start_profile() and is "
                               "still active (or this is another thread); exit it first")
        self.mode.__exit__(None, None, None)
        self._attached = False
        self._phases.seconds["backward"] = self.mode.backward_s


def make_counter(phases: Phases, backend: str) -> TFOpCounter | TorchOpCounter | None:
    """The operator counter of Keras' ``backend``; ``None`` where there is no operator hook (JAX)."""
    if backend == "tensorflow":
        return TFOpCounter(phases)
    if backend == "torch":
        return TorchOpCounter(phases)
    return None


# -- the session ---------------------------------------------------------------------------------
class TimedRecorder(LayerRecorder):
    """``LayerRecorder`` that also keeps the phase's layer depth, the root call's batch and flag, and call times.

    ``seconds[path]``: wall time of the calls of each layer (only the outermost calls unless
    ``time_layers``); ``forward_s``: of the outermost calls. ``sync`` waits for the device
    around each timed call.
    """

    def __init__(self, layers: list[tuple[str, Any]], phases: Phases | None, time_layers: bool,
                 sync: Callable[[], None]) -> None:
        specs = SpecMaker(import_keras())
        super().__init__(layers, specs.tree, specs.is_symbolic)
        self._phases = phases
        self._time_layers = time_layers
        self._sync = sync
        self.seconds: dict[str, float] = {}
        self.forward_s = 0.0
        self.batch_size: int | None = None
        self.training = False
        self._depth = 0

    def _run(self, layer: Any, path: str, original: Callable, args: tuple, kwargs: dict) -> Any:
        if self._is_symbolic((args, kwargs)):
            return original(*args, **kwargs)
        timed = self._depth == 0 or self._time_layers
        if self._depth == 0:
            self.training = self.training or bool(kwargs.get("training"))
            if self.batch_size is None:
                self.batch_size = batch_size_of((args, kwargs))
        if timed:
            self._sync()
        start = time.perf_counter()
        self._depth += 1
        if self._phases is not None:
            self._phases.layers += 1
        try:
            return super()._run(layer, path, original, args, kwargs)
        finally:
            self._depth -= 1
            if self._phases is not None:
                self._phases.layers -= 1
            if timed:
                self._sync()
                elapsed = time.perf_counter() - start
                self.seconds[path] = self.seconds.get(path, 0.0) + elapsed
                if self._depth == 0:
                    self.forward_s += elapsed


class Session:
    """Everything attached while a profile runs; ``stop`` takes it all off (see the module docstring)."""

    def __init__(self, model: Any, module_latency: bool, count_ops: bool = True) -> None:
        self.model = model
        self.backend = import_keras().config.backend()
        self.sync = synchronizer(self.backend)
        self.layers = named_layers(model)
        self.phases = Phases(self.sync)
        self.recorder = TimedRecorder(self.layers, self.phases, module_latency, self.sync)
        self.counter: TFOpCounter | TorchOpCounter | None = make_counter(self.phases, self.backend) \
            if count_ops else None
        #: the forward's operators per layer call, for layers with no formula (``counting.engine.own_ops``):
        #: kept by the operator counter when there is one, else by a tap of their own while started
        self.own_ops: OpTap | None = None
        self._tap: Any = None
        if self.counter is not None:
            self.own_ops = self.counter.forward_tap = OpTap(self.recorder)
        self._hooks = PhaseHooks(self.phases)
        self._thread: int | None = None
        self.start_s: float | None = None
        self.end_s: float | None = None

    def start(self) -> None:
        self._thread = threading.get_ident()
        try:
            if self.counter is not None:
                self._hooks.attach()
                self.counter.attach()
            else:
                self._tap = own_ops(self.recorder, self.backend)
                self.own_ops = self._tap.__enter__()
            self.recorder.__enter__()
        except BaseException:
            self._detach()
            raise
        self.sync()
        self.start_s = time.perf_counter()

    def stop(self) -> None:
        if threading.get_ident() != self._thread:
            raise RuntimeError("stop_profile() must run in the thread that called start_profile(); the profile is "
                               "still running")
        self.sync()
        self.end_s = time.perf_counter()
        self._detach()

    def _detach(self) -> None:
        if self.counter is not None:
            self.counter.detach()  # raises, changing nothing, when it cannot (a dispatch mode entered on top)
        try:
            self.recorder.__exit__(None, None, None)
        finally:
            try:
                if self._tap is not None:
                    tap, self._tap = self._tap, None
                    tap.__exit__(None, None, None)
            finally:
                self._hooks.detach()

    @property
    def duration_s(self) -> float:
        """Seconds from start to stop (to now while running)."""
        end = self.end_s if self.end_s is not None else time.perf_counter()
        return end - self.start_s
