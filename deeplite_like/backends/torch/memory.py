"""Peak activation memory of one forward pass, from the storages its operators allocate.

Mechanism: the storage ledger of the observation pass (``tensors.StorageLedger``): every storage an
operator allocates is live from then until it is freed, so the live bytes are exact at every
operator boundary, and the peak is the largest value reached right after an operator allocated
its outputs (its inputs still alive, as they must be while it runs).

What it counts, what it cannot see and the meta run are in ``peak_activation_memory``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from torch import nn

from deeplite_like.backends.torch.counting.engine import observe
from deeplite_like.backends.torch.inputs import moved
from deeplite_like.backends.torch.state import model_device, preserved_model_state
from deeplite_like.backends.torch.tensors import MemoryStats, input_shapes, required_batch_size
from deeplite_like.errors import check_batch_agrees, check_batch_size, check_flag

__all__ = ["MemoryStats", "peak_activation_memory"]


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
    transformer fast path during the forward so that its activations are seen (below).

    The measurement is the storage ledger of the observation pass (``counting.engine.observe``),
    which counts the same forward's operations too: ``compute_network_status`` reads peak
    memory, MACs and the per-layer table from one run.

    The model's mode, device, dtype, requires_grad, grads and hooks are left as found.

    What counts:

    * the inputs are live from the start (the caller holds them) and are included in
      ``peak_bytes``; the outputs are live at the end;
    * parameters and buffers are excluded (they are the model's size, see ``params.py``);
    * in ``grad=True`` mode the tensors autograd saves for backward stay alive until the output
      dies, so the peak and ``end_bytes`` show what a training forward holds.

    Fused fast paths: ``nn.TransformerEncoderLayer`` / ``nn.MultiheadAttention`` in eval mode
    under ``no_grad`` run one fused kernel whose intermediates are invisible (the layer would
    seem to cost only its output). The measurement therefore turns that fast path off
    (``kernels.unfused``, restored in ``finally``) so the layer's
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
