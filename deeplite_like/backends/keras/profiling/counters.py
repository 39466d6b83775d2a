"""Operator counters of a training-step profile: what runs outside the model's layers, op by op.

The forward is priced per layer (the counting engine's records). The backward, the optimizer
step and the rest (the loss, metrics) are priced operator by operator, per phase
(``phases.py``), by the counter of the Keras backend in use:

TensorFlow: ``TFOpCounter``
    An op callback (``tensorflow.python.framework.op_callbacks``, what
    ``tf.debugging.enable_check_numerics`` uses; thread-local: only the profiling thread's ops
    are seen) prices every eager op with ``counting.formulas.tf_ops.tf_op_cost``.

    **Global setting, unavoidable:** a ``tf.function`` that was traced already (a compiled
    ``train_on_batch``, a ``@tf.function`` step) runs its graph as one op, and the callback
    would see nothing of it. So while a profile runs, ``tf.function``s run eagerly
    (``tf.config.run_functions_eagerly(True)``), which is process-wide: other threads'
    ``tf.function``s run eagerly too (slower, same results). It is a ``SharedChange``: set
    when the first profile starts, and the user's previous setting (whatever it was) put back
    when the last one stops - also when the step raised, at ``stop_profile()``. Latencies
    measured then are eager ones; the profile's notes say so.

torch: ``TorchOpCounter``
    The torch backend's counting dispatch mode (``PhaseCountingMode``, thread-local) prices
    the torch operators Keras runs (``loss.backward()``, the ``_foreach_*`` optimizer ops).

JAX has no operator hook: only the forward is counted (the profile's notes say so).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable

from deeplite_like.opcount import OpStats

from .._tf import import_tensorflow
from ..counting.formulas.tf_ops import tf_op_cost
from ..counting.own_ops import OpTap
from .phases import Phases
from .shared import SharedChange

__all__ = ["OpTotals", "TFOpCounter", "TorchOpCounter", "make_counter"]


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
    """TensorFlow op callback: prices every eager op outside the forward (see the module docstring)."""

    def __init__(self, phases: Phases) -> None:
        self.ops = OpTotals()
        self._phases = phases
        self._thread: int | None = None
        #: the forward's operators, per layer call (priced where a layer has no formula: ``own_ops.py``)
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
    """Keras on torch: the torch dispatch mode counts what the layers do not (backward, optimizer, rest)."""

    def __init__(self, phases: Phases) -> None:
        from deeplite_like.backends.torch.counting.registry import op_name
        from deeplite_like.backends.torch.profiling.phases import PhaseCountingMode, current_autograd_node

        from ..counting.torch_ops import aten_cost

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
                    # the forward: priced per layer; its operators kept per layer call (own_ops.py)
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
