"""``PhaseCountingMode``: the counting engine's ``CountingMode``, filing every operator under its phase.

The phase is decided when the operator runs: ``backward`` when autograd is executing a node
(``torch._C._current_autograd_node()``), ``forward`` inside a call of the model or one of its
modules, ``optimizer`` inside ``Optimizer.step()`` (``timers.StepTimer`` raises ``in_step``),
``other`` otherwise (the loss, gradient clipping). Each module keeps its figures per phase, and
operators run outside any module call are kept apart (``outside``).
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from deeplite_like.opcount import OpStats

from ..counting import formulas as _formulas  # noqa: F401  (importing the package fills the formula table)
from ..counting.recorder import CountingMode, _Context
from ..counting.registry import CountOptions
from .devices import no_sync

__all__ = ["PhaseCountingMode", "current_autograd_node"]

current_autograd_node = getattr(torch._C, "_current_autograd_node", lambda: None)


class PhaseCountingMode(CountingMode):
    """``CountingMode`` that files every operator under its phase and keeps per-module phase figures.

    The phase is decided per operator (``_current_phase``). At each change of phase the base
    mode's pending sums are flushed (``set_phase``) and the growth of every module's figures
    since the previous change is filed under the phase that just ended
    (``module_phases[name][phase]``: MACs and FLOPs; module calls are in ``by_module``).

    Operators run outside any module call go to a context of their own (``outside``) instead
    of the root module's: the mode's root context is replaced by one whose figures are the
    outside operators plus the model's (``_outside_stats``), so the model's root module
    (``by_module[""]``) holds only what ran in the model.

    ``track_backward=False`` (a profile with no backward pass) keeps the base mode's fast path
    for module calls. ``in_step`` is raised by the optimizer hooks. ``backward_s`` sums the wall time of the
    backward passes (first operator to the autograd engine's end-of-backward callback),
    synchronising with ``sync`` when given.
    """

    def __init__(self, sync: Callable[[], None] | None = None, time_backward: bool = True, meta: bool = False,
                 track_backward: bool = True):
        super().__init__(CountOptions(), track_backward=track_backward, meta=meta)
        self.in_step = 0
        self.phase_name: str | None = None
        self.module_phases: dict[str, dict[str, OpStats]] = {}
        self.outside: dict[str, OpStats] = {}
        self.backward_s = 0.0
        self._outside_stats = OpStats()
        outside = _Context(("<outside>",), (self._outside_stats,), self.outside)
        self._seq_ctxs = [outside if ctx is self._root else ctx for ctx in self._seq_ctxs]
        self._root = self._ctx = outside
        self._snapshot: dict[str, tuple[int, int]] = {}
        self._sync = sync or no_sync
        self._time_backward = time_backward
        self._backward_start: float | None = None

    def _current_phase(self) -> str:
        if current_autograd_node() is not None:
            return "backward"
        if self._ctx is not self._root:
            return "forward"
        return "optimizer" if self.in_step else "other"

    def _refresh_phase(self) -> None:
        phase = self._current_phase()
        if phase != self.phase_name:
            self.set_phase(phase)  # flushes what the ended phase counted
            self._close_segment()
            self.phase_name = phase
            if phase == "backward":
                self._begin_backward()

    def _close_segment(self) -> None:
        """File each module's growth since the last phase change under the phase that ran."""
        phase = self.phase_name
        snapshot = self._snapshot
        for name, stats in self.result.by_module.items():
            before = snapshot.get(name, (0, 0))
            macs, flops = stats.macs - before[0], stats.flops - before[1]
            if phase is not None and (macs or flops):
                self.module_phases.setdefault(name, {}).setdefault(phase, OpStats()).add(macs, flops, 0)
            snapshot[name] = (stats.macs, stats.flops)

    def flush(self) -> None:
        """Bring every figure up to date (call before reading them while counting goes on)."""
        if self.phase_name is not None:
            self.set_phase(self.phase_name)
            self._close_segment()

    def _begin_backward(self) -> None:
        # The end-of-backward callback also ends the phase: the next module call must not be
        # mistaken for a forward re-run inside backward.
        torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
        if self._time_backward:
            self._sync()
            self._backward_start = time.perf_counter()

    def _end_backward(self) -> None:
        if self._backward_start is not None:
            self._sync()
            self.backward_s += time.perf_counter() - self._backward_start
            self._backward_start = None
        self._refresh_phase()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._refresh_phase()
        return super().__torch_dispatch__(func, types, args, kwargs)
