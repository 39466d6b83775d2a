"""A profiling session: everything attached to a Keras model while a profile runs, and taken off at stop.

* ``TimedRecorder``: the counting engine's ``LayerRecorder`` (instance-level, this model and
  this thread only) that also times layer calls, keeps the layer depth for the phases, and
  reads the batch size and ``training`` flag of the model's outermost call;
* an operator counter for what runs outside the layers (``counters.py``), and the phase
  hooks it needs (``phases.py``) - only when operators are counted.

A session is started and stopped in one thread (the op callback and dispatch mode it uses
are per thread); ``stop`` raises, changing nothing, when called from another.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from .._tf import import_keras
from ..counting.own_ops import OpTap, own_ops
from ..counting.recorder import LayerRecorder, named_layers
from ..counting.specs import SpecMaker
from ..tensors import batch_size_of
from ..timing import synchronizer
from .counters import TFOpCounter, TorchOpCounter, make_counter
from .phases import PhaseHooks, Phases

__all__ = ["Session", "TimedRecorder"]


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
        #: the forward's operators per layer call, for layers with no formula (``counting/own_ops.py``):
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
