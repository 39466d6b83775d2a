"""Peak activation memory of one forward pass, from the storages its operators allocate.

Mechanism: a ``TorchDispatchMode`` sees every ATen operator of the forward. Each output
that the operator's schema does not declare as an alias of an input (views and in-place /
``out=`` results are aliases: they allocate nothing) is a fresh allocation; its untyped
storage is recorded once (a storage shared by several outputs counts once) with its
``nbytes``, and a ``weakref.finalize`` on the storage subtracts those bytes the moment the
storage is freed. Live bytes are therefore exact at every operator boundary, and the peak
is the largest value reached right after an operator allocated its outputs (its inputs
still alive, as they must be while it runs).

What counts:

* the inputs are live from the start (the caller holds them) and are included in
  ``peak_bytes``; the outputs are live at the end;
* parameters and buffers are excluded (they are the model's size, see ``params.py``);
* in ``grad=True`` mode the tensors autograd saves for backward stay alive until the output
  dies, so the peak and ``end_bytes`` show what a training forward holds.

Fused fast paths: ``nn.TransformerEncoderLayer`` / ``nn.MultiheadAttention`` in eval mode
under ``no_grad`` run one fused kernel whose intermediates are invisible (the layer would
seem to cost only its output). The measurement therefore turns that fast path off
(``fastpath.unfused``, restored in ``finally``) so the layer's
activations are seen op by op; ``allow_fastpath=True`` keeps it.

On meta tensors ``scaled_dot_product_attention`` takes the math path (the attention matrix
is materialised) where a CPU / CUDA device may use a flash or memory-efficient kernel that
never holds it: for attention models a meta measurement is an upper bound.

What it cannot see: scratch memory that a kernel allocates and frees inside itself (GEMM
packing buffers, cuDNN / cuBLAS workspaces, intermediates of fused kernels such as
``scaled_dot_product_attention``), and allocator rounding (the CUDA caching allocator rounds
blocks up to 512 bytes). Those make ``torch.cuda.max_memory_allocated`` or the profiler's
memory events read somewhat higher; see ``tests/torch/test_memory.py`` for the cross-checks.

With ``meta=True`` the forward runs on meta tensors (meta copies of the parameters, buffers and
inputs, swapped into the modules for the run: ``counting.engine.to_meta``): shapes, dtypes and
storage sizes are real, no memory is allocated, so models too large for the machine can be measured.
"""
from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from deeplite_like.argument_checks import check_batch_agrees, check_batch_size, check_flag
from deeplite_like.backends.torch.inputs import moved
from deeplite_like.backends.torch.params import tensor_span
from deeplite_like.backends.torch.run_tensors import input_shapes, required_batch_size, tensors_in
from deeplite_like.backends.torch.distributed.shards import local_tensor
from deeplite_like.backends.torch.state import model_device, preserved_model_state
from deeplite_like.measurements import ActivationMemory

__all__ = ["MemoryStats", "peak_activation_memory"]


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


def peak_activation_memory(
    model: nn.Module,
    args: Any,
    kwargs: Mapping[str, Any] | None = None,
    *,
    meta: bool = False,
    grad: bool = False,
    train: bool | None = None,
    batch_size: int | None = None,
    allow_fastpath: bool = False,
) -> MemoryStats:
    """Measure the peak live activation memory (bytes) of one forward ``model(*args, **kwargs)``.

    ``args`` is a tuple of positional inputs (a single tensor is accepted as one input);
    tensors are moved to the model's device (copies; the caller's tensors are untouched).
    ``grad=False`` runs under ``torch.no_grad()``; ``grad=True`` records autograd so tensors
    saved for backward stay alive. ``train=True`` / ``False`` sets the module mode for the
    forward; ``None`` (default) leaves every module's mode as found, so a caller that already
    chose the mode keeps it. Buffer values the forward writes (BatchNorm running statistics in
    train mode, counters and observers in any mode) and the random generators are restored.
    ``meta=True`` (implied by a model on the meta device) runs on meta tensors and allocates
    nothing. ``batch_size`` defaults to the leading
    dimension of the first input tensor. ``allow_fastpath=False`` (default) turns off the fused
    transformer fast path during the forward so that its activations are seen (module docstring).

    The measurement is the storage ledger of the observation pass (``counting.engine.observe``),
    which counts the same forward's operations too: ``compute_network_status`` reads peak
    memory, MACs and the per-layer table from one run.

    The model's mode, device, dtype, requires_grad, grads and hooks are left as found.
    """
    from deeplite_like.backends.torch.counting.engine import observe

    if not isinstance(model, nn.Module):
        raise TypeError(f"peak_activation_memory expects a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})
    meta = check_flag(meta, "meta", "peak_activation_memory")
    grad = check_flag(grad, "grad", "peak_activation_memory")
    on_meta = any(t.device.type == "meta" for t in (*model.parameters(), *model.buffers()))
    meta = meta or on_meta
    if batch_size is None:
        batch_size = required_batch_size(args, kwargs)
    else:  # it divides the peak into per_sample_peak_bytes: it must be the batch that runs
        batch_size = check_batch_size(batch_size, "batch_size", "peak_activation_memory", allow_none=False)
        check_batch_agrees(batch_size, input_shapes(args, kwargs), "peak_activation_memory")
    if not meta:
        args, kwargs = moved(args, kwargs, model_device(model))

    with preserved_model_state(model):  # (a failure on meta carries the observation's note: pass meta=False)
        if train is not None:
            model.train(train)
        seen = observe(model, args, kwargs, meta=meta, memory=True, grad=grad, unfuse=not allow_fastpath,
                       wrap_errors=False)
    return dataclasses.replace(seen.memory, batch_size=batch_size, per_sample_peak_bytes=seen.memory.peak_bytes / batch_size)
