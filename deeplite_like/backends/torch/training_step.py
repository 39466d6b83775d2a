"""Run one training step under storage-lifetime tracking and keep the record of what was live.

The step is the real one: forward, loss, ``loss.backward()``, ``optimizer.step()``, on copies
of the model's parameters (meta copies by default, so nothing is allocated). The tracker of
``memory.py`` (its ``StorageLedger``) sees every operator; this module's ``StepTracker`` adds a record of each
allocation (its serial number, bytes, phase and module) and each free, and a mark after every
operator, from which ``training_memory.py`` derives the peak, the phases, the per-module
activations and, by re-weighting the same events, the per-rank figures of a sharded run.

On meta, the small integer and boolean tensors derived from the inputs keep their values (the
counting engine's ``MetaValues``), so value-dependent control flow on index tensors (transformers'
packed-sequence check on position ids) takes the branch a real run takes.

Where an operator of the backward runs is read from the autograd node executing it: the
forward labels each node it creates with the module that created it (``NodeLabeler``; the
module running comes from ``ModuleStack``'s global hooks).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _module_globals
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from deeplite_like.backends.torch.counting.meta_values import MetaValues
from deeplite_like.backends.torch.counting.op_facts import op_info
from deeplite_like.backends.torch.dispatch_mode import LightDispatchMode
from deeplite_like.backends.torch.memory import StorageLedger, storage_key, tensor_leaves

__all__ = ["ModuleStack", "StepRecord", "StepTracker", "NodeLabeler"]

_MODULE_KEY = "deeplite_like.module"


class ModuleStack:
    """Qualified name of the innermost module running, via global forward hooks (removed on exit)."""

    def __init__(self, model: nn.Module) -> None:
        self._names = {id(m): name for name, m in model.named_modules(remove_duplicate=False)}
        self.stack: list[str] = []
        self._handles: list[Any] = []

    def __enter__(self) -> ModuleStack:
        self._handles.append(_module_globals.register_module_forward_pre_hook(self._push))
        self._handles.append(_module_globals.register_module_forward_hook(self._pop, always_call=True))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _push(self, module: nn.Module, args: Any) -> None:
        name = self._names.get(id(module))
        if name is not None:
            self.stack.append(name)

    def _pop(self, module: nn.Module, args: Any, output: Any) -> None:
        if id(module) in self._names and self.stack:
            self.stack.pop()

    @property
    def current(self) -> str:
        return self.stack[-1] if self.stack else ""


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


def _placeholder_scalar(dtype: torch.dtype) -> bool | int | float:
    """1 of the right Python type for ``Tensor.item()`` of a meta tensor of ``dtype``."""
    if dtype == torch.bool:
        return True
    return 1.0 if dtype.is_floating_point or dtype.is_complex else 1


class StepTracker(StorageLedger, LightDispatchMode):
    """A ``memory.StorageLedger`` as a dispatch mode that also records allocations, frees and a mark per operator."""

    def __init__(self, base_bytes: int, external: set[tuple[str, int]], where: Callable[[], str]) -> None:
        StorageLedger.__init__(self, base_bytes, external, where)
        LightDispatchMode.__init__(self)
        self.record = StepRecord(base_bytes)
        self.values: MetaValues | None = None  # set for a meta step: the values of small integer tensors
        self._runs: dict[int, Callable] = {}
        self.phase = "setup"
        self._serial: dict[tuple[str, int], int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        if not self._dynamo_safe:  # (the optimizer's step may load torch._dynamo)
            self.switch_if_dynamo_loaded()
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and self.phase in _SCALAR_READ_PHASES \
                and args[0].device.type == "meta":
            out = _placeholder_scalar(args[0].dtype)
        else:  # (on meta, small integer tensors keep their values: meta_values.py)
            out = self._run(func, args, kwargs)
            self.count(func, out)
        self.record.marks.append((len(self.record.events), self.phase, self._where(), str(func)))
        return out

    def _run(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Run the operator; on meta, keeping the values of small integer tensors (``meta_values``)."""
        if self.values is None:
            return func(*args, **kwargs)
        run = self._runs.get(id(func))
        if run is None:
            name, written, _, _, _ = op_info(func)
            run = self._runs[id(func)] = self.values.wrap(func, name, written, func)
        return run(*args, **kwargs)

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

    def serial_of(self, tensor: torch.Tensor) -> int | None:
        """Allocation serial of the storage holding ``tensor`` (None if not allocated in the step)."""
        key = storage_key(tensor)
        return self._serial.get(key) if key is not None else None

    @contextlib.contextmanager
    def in_phase(self, name: str) -> Iterator[None]:
        """Label the operators run in the body with phase ``name``; remember where its events start."""
        self.phase = name
        self.record.phase_start_events[name] = len(self.record.events)
        yield


class NodeLabeler(TorchFunctionMode):
    """Labels each autograd node created in the forward with the module running (for backward)."""

    def __init__(self, modules: ModuleStack) -> None:
        super().__init__()
        self._modules = modules

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        out = func(*args, **(kwargs or {}))
        # A function may create several nodes (F.linear on 3-d input: view, mm, t, view): walk back
        # from its outputs to the nodes labelled before (every node is labelled, so the walk ends there).
        name = self._modules.current
        pending = [leaf.grad_fn for leaf in pytree.tree_leaves(out)
                   if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None]
        while pending:
            node = pending.pop()
            if node is None or _MODULE_KEY in node.metadata:
                continue
            node.metadata[_MODULE_KEY] = name
            pending.extend(next_node for next_node, _ in node.next_functions)
        return out


def where_running(modules: ModuleStack) -> Callable[[], str]:
    """Innermost module running: the forward's module stack, else the module of the autograd node."""
    def where() -> str:
        if modules.stack:
            return modules.current
        node = torch._C._current_autograd_node()
        if node is None:
            return ""
        return node.metadata.get(_MODULE_KEY, "")
    return where


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
