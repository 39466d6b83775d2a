"""Run one training step under storage-lifetime tracking and keep the record of what was live.

The step is the real one: forward, loss, ``loss.backward()``, ``optimizer.step()``, on copies
of the model's parameters (meta copies by default, so nothing is allocated). It runs under the
counting pass (``counting/recorder.py``'s ``CountingMode``), which sees every operator and knows
which module runs it, in the forward by its global module hooks and in the backward by the
autograd node's sequence number: the one module attribution of the package. ``StepTracker`` is
that pass's storage ledger (``memory.StorageLedger``) with a record of each allocation (its
serial number, bytes, phase and module), each free, and a mark after every operator, from which
``training_memory.py`` derives the peak, the phases, the per-module activations and, by
re-weighting the same events, the per-rank figures of a sharded run.

On meta, the small integer and boolean tensors derived from the inputs keep their values (the
counting pass's ``MetaValues``), so value-dependent control flow on index tensors (transformers'
packed-sequence check on position ids) takes the branch a real run takes.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from deeplite_like.backends.torch.counting.recorder import CountingMode
from deeplite_like.backends.torch.memory import StorageLedger, storage_key, tensor_leaves

__all__ = ["StepRecord", "StepTracker"]


@dataclass
class StepRecord:
    """What one tracked step did, as events (see the module docstring).

    ``sizes[s]``, ``origin[s]`` (phase, module): allocation ``s``. ``events``: ``(serial, +1 / -1)``
    in order. ``marks``: ``(len(events) after the operator, phase, module, operator)``, one per
    operator. ``forward_end_events`` / ``phase_start_events``: ``len(events)`` when the forward returned / a phase began. ``base_bytes``: live before the step (parameters, buffers, inputs, and whatever
    the warm-up left alive is among the events).
    """

    base_bytes: int
    sizes: list[int] = field(default_factory=list)
    origin: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[int, int]] = field(default_factory=list)
    marks: list[tuple[int, str, str, str]] = field(default_factory=list)
    forward_end_events: int = 0
    phase_start_events: dict[str, int] = field(default_factory=dict)


# Phases where a scalar read of a meta tensor (``.item()``) gets a placeholder value: an optimizer
# that scales its update by a value it reads (Adafactor's RMS of the parameter) allocates the same
# whatever the value. In the forward and backward a read could steer control flow, so it still fails.
_SCALAR_READ_PHASES = ("warm-up", "optimizer")


class StepTracker(StorageLedger):
    """The counting pass's storage ledger, recording each allocation and free and a mark per operator.

    ``mode``: the ``CountingMode`` the step runs under (``mode.ledger`` is this tracker); it
    names the module running (``CountingMode.module_running``) and keeps the phase.
    """

    def __init__(self, base_bytes: int, external: set[tuple[str, int]], mode: CountingMode) -> None:
        super().__init__(base_bytes, external, mode.module_running)
        self.mode = mode
        mode.ledger = self
        self.record = StepRecord(base_bytes)
        self.phase = "setup"
        self._serial: dict[tuple[str, int], int] = {}

    def count(self, func: Any, out: Any) -> None:
        super().count(func, out)
        self.record.marks.append((len(self.record.events), self.phase, self._where(), str(func)))

    def _allocated(self, tensor: torch.Tensor) -> None:
        key = storage_key(tensor)
        if key is None or key in self._bytes or key in self._external:
            return
        super()._allocated(tensor)
        serial = len(self.record.sizes)
        self._serial[key] = serial
        self.record.sizes.append(self._bytes[key])
        self.record.origin.append((self.phase, self._where()))
        self.record.events.append((serial, 1))

    def _freed(self, key: tuple[str, int]) -> None:
        super()._freed(key)
        self.record.events.append((self._serial.pop(key), -1))

    def adopt(self, tensors: list[torch.Tensor]) -> None:
        """Record storages made before the step that belong to it (an optimizer's state made in its
        ``__init__``, as Adagrad's sums): allocations of phase ``setup``, freed like any other."""
        for tensor in tensors:
            self._allocated(tensor)

    def serial_of(self, tensor: torch.Tensor) -> int | None:
        """Allocation serial of the storage holding ``tensor`` (None if not allocated in the step)."""
        key = storage_key(tensor)
        return self._serial.get(key) if key is not None else None

    @contextlib.contextmanager
    def in_phase(self, name: str) -> Iterator[None]:
        """Label the operators run in the body with phase ``name``; remember where its events first start
        (a phase repeated, as forward and backward are under gradient accumulation, keeps its first start)."""
        self.phase = name
        self.mode.set_phase(name)
        if self.mode.values is not None:
            self.mode.values.placeholder_reads = name in _SCALAR_READ_PHASES
        self.record.phase_start_events.setdefault(name, len(self.record.events))
        yield


def tensor_storages(tree: Any) -> list[torch.Tensor]:
    """Tensor leaves of ``tree``, one per storage (first seen wins)."""
    seen: set[tuple[str, int]] = set()
    out = []
    for tensor in tensor_leaves(tree):
        key = storage_key(tensor)
        if key is not None and key not in seen:
            seen.add(key)
            out.append(tensor)
    return out
