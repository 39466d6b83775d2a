"""ledger"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from deeplite_like.backends.torch.distributed.shards import local_tensor
from deeplite_like.backends.torch.run_tensors import tensors_in
from deeplite_like.measurements import ActivationMemory

__all__ = ["MemoryStats", "tensor_span"]

def tensor_span(tensor: torch.Tensor) -> tuple[int, int]:
    """Half-open byte interval ``[start, end)`` of its storage that ``tensor`` can touch."""
    if tensor.is_nested:  # its components lie in one buffer, the whole storage (no single shape/stride)
        return 0, tensor.untyped_storage().nbytes()
    size = tensor.element_size()
    start = tensor.storage_offset() * size
    if tensor.numel() == 0:
        return start, start
    last = sum((n - 1) * abs(s) for n, s in zip(tensor.shape, tensor.stride()))
    return start, start + (last + 1) * size


@dataclass(frozen=True)
class MemoryStats(ActivationMemory):
    """Activation memory of one forward pass, in bytes (the fields: ``measurements.ActivationMemory``).

    ``output_bytes`` are the storages the outputs keep alive; ``end_bytes`` includes, in
    ``grad`` mode, the tensors saved for backward. ``meta``: measured on the meta device.
    """

    grad: bool
    meta: bool


def storage_key(tensor: torch.Tensor) -> tuple[str, int] | None:
    """Identity of a tensor's storage (valid on meta too; a DTensor's is its local shard's); None without one."""
    if type(tensor) is torch.Tensor and tensor.layout is torch.strided:  # the usual case, without the checks below
        return str(tensor.device), tensor.untyped_storage()._cdata
    tensor = local_tensor(tensor)
    if type(tensor).__name__ == "AsyncCollectiveTensor":  # a functional collective's pending result
        tensor = tensor.elem
    if type(tensor) not in (torch.Tensor, nn.Parameter) or tensor.is_sparse:
        return None
    return str(tensor.device), tensor.untyped_storage()._cdata


def spanned_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes the tensors cover: per storage, the length of the union of their byte spans.

    Used for inputs: a batch sliced out of a larger one (``x[:n]``, a view) costs the bytes of
    its ``n`` samples, not of the whole storage it happens to live in.
    """
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for tensor in tensors:
        key = storage_key(tensor)
        if key is not None:
            spans.setdefault(key, []).append(tensor_span(tensor))
    total = 0
    for intervals in spans.values():
        end = None
        for lo, hi in sorted(intervals):
            if end is None or lo >= end:
                total += hi - lo
                end = hi
            elif hi > end:
                total += hi - end
                end = hi
    return total


def tensor_leaves(tree: Any) -> list[torch.Tensor]:
    """The tensors in ``tree`` (``run_tensors.tensors_in``: mappings too), a DTensor as this rank's local shard."""
    return [local_tensor(tensor) for tensor in tensors_in(tree)]


class StorageLedger:
    """Live bytes of the storages that operators allocate, and their peak; see the module docstring.

    Not a mode itself: whatever sees each operator calls ``count(func, out)`` after it ran
    (the counting pass, ``counting/recorder.py``, or ``training_step.StepTracker``). ``where()``
    names the innermost module running, for ``peak_module``.
    """

    def __init__(self, base_bytes: int, external: set[tuple[str, int]], where: Callable[[], str]) -> None:
        self.base = base_bytes
        self.live = base_bytes
        self.peak = base_bytes
        self.allocated = 0
        self.peak_op = "(inputs)"
        self.peak_module = ""
        self._external = external
        self._where = where
        self._bytes: dict[tuple[str, int], int] = {}
        self._finalizers: dict[tuple[str, int], weakref.finalize] = {}

    def count(self, func: Any, out: Any) -> None:
        """After an operator ran: the storages its outputs created (not views, not written arguments), the peak."""
        returns = func._schema.returns
        values = out if isinstance(out, (tuple, list)) and len(returns) == len(out) and len(returns) > 1 else (out,)
        for ret, value in zip(returns, values):
            if ret.alias_info is not None:
                continue  # a view, or the written-to argument of an in-place / out= op
            if type(value) is torch.Tensor:  # (most ops: one plain tensor, no tree to walk)
                self._allocated(value)
                continue
            for tensor in tensor_leaves(value):
                self._allocated(tensor)
        if self.live > self.peak:
            self.peak = self.live
            self.peak_op = str(func)
            self.peak_module = self._where()

    def _allocated(self, tensor: torch.Tensor) -> None:
        key = storage_key(tensor)
        if key is None or key in self._bytes or key in self._external:
            return
        storage = tensor.untyped_storage()
        nbytes = storage.nbytes()
        self._bytes[key] = nbytes
        self.live += nbytes
        self.allocated += nbytes
        self._finalizers[key] = weakref.finalize(storage, self._freed, key)

    def _freed(self, key: tuple[str, int]) -> None:
        self.live -= self._bytes.pop(key)
        self._finalizers.pop(key, None)

    def held_bytes(self, tensors: list[torch.Tensor]) -> int:
        """Bytes ``tensors`` keep alive: whole storages allocated during the forward (a view
        holds all of its storage), the spanned bytes of any other storage (an input returned)."""
        own: dict[tuple[str, int], int] = {}
        other = []
        for tensor in tensors:
            key = storage_key(tensor)
            if key in self._bytes:
                own[key] = self._bytes[key]
            elif key is not None:
                other.append(tensor)
        return sum(own.values()) + spanned_bytes(other)

    def detach_all(self) -> None:
        """Drop the finalizers still pending, so nothing refers back to this ledger."""
        for finalizer in list(self._finalizers.values()):
            finalizer.detach()
        self._finalizers.clear()


def memory_stats(ledger: StorageLedger, output: Any, meta: bool, grad: bool, batch_size: int = 1) -> MemoryStats:
    """The ``MemoryStats`` of a forward that just returned ``output`` (still alive), from its ledger."""
    input_bytes = ledger.base
    return MemoryStats(peak_bytes=ledger.peak, input_bytes=input_bytes,
                       output_bytes=ledger.held_bytes(tensor_leaves(output)), end_bytes=ledger.live,
                       allocated_bytes=ledger.allocated, batch_size=batch_size,
                       per_sample_peak_bytes=ledger.peak / batch_size, peak_op=ledger.peak_op,
                       peak_module=ledger.peak_module, grad=grad, meta=meta)

