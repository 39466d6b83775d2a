"""Memory of one training step, per rank, measured on meta tensors: "will it fit?".

``estimate_training_memory`` runs the real step - forward, loss, ``loss.backward()``,
``optimizer.step()`` - on copies of the parameters (meta copies by default: shapes, dtypes and
storage sizes are real, nothing is allocated), under the storage-lifetime tracker of
``memory.py`` (``step.py`` records the events). Every byte in the result is a storage
that an operator allocated and that was alive at that moment; nothing is a rule of thumb.

The user's model is left as found (``preserved_model_state``): the step runs on copies.

The result is ``TrainingMemory``: plain byte fields, phases, timeline, allowance.
"""
from __future__ import annotations

import bisect
import contextlib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch
from torch import nn

from deeplite_like.backends.torch.counting.recorder import counting_mode
from deeplite_like.backends.torch.counting.registry import CountOptions
from deeplite_like.backends.torch.kernels import AttentionKernel, EmbeddingBagKernel, RecurrentKernel, unfused
from deeplite_like.backends.torch.state import model_device, preserved_model_state
from deeplite_like.backends.torch.tensors import (input_shapes, required_batch_size, spanned_bytes, storage_key,
                                                  tensor_leaves)
from deeplite_like.backends.torch.training.step import (COMM_BACKENDS, KINDS, AutocastPolicy, Fsdp2Timeline,
                                                        OffloadedActivations, ShardPlan, StepRecord, StepTracker,
                                                        build_optimizer, checkpointed, fsdp2_units, repeated_blocks,
                                                        resolve_autocast_dtype, resolve_sharding, select_modules,
                                                        shard_bytes, tensor_storages, unit_index)
from deeplite_like.errors import check_batch_agrees, check_batch_size, check_flag
from deeplite_like.units import format_bytes

__all__ = ["Allowance", "CUDA_BLOCK_BYTES", "PHASES", "PhaseMemory", "TrainingMemory", "build_optimizer",
           "estimate_training_memory"]


PHASES = ("forward", "loss", "backward", "optimizer")
ZERO_GRAD_PLACES = ("start", "after_forward", "end")

def _default_loss(output: Any) -> torch.Tensor:
    """``output.loss`` / ``output["loss"]`` when the model computes its loss, else the sum of the output."""
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, Mapping):
        loss = output.get("loss")
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(output, torch.Tensor):
        return output.sum()
    leaves = [t for t in tensor_leaves(output) if t.is_floating_point() and t.requires_grad]
    if not leaves:
        raise ValueError("the model's output has no floating tensor that requires grad and no 'loss'; pass "
                         "loss_fn=... (called as loss_fn(output) or loss_fn(output, target))")
    return functools.reduce(torch.add, (t.sum() for t in leaves))


def estimate_training_memory(
    model: nn.Module,
    *inputs: Any,
    optimizer: Any = "adamw",
    loss_fn: Callable[..., torch.Tensor] | None = None,
    target: Any = None,
    autocast: Any = None,
    dtype: torch.dtype | None = None,
    activation_checkpointing: Any = None,
    world_size: int = 1,
    sharding: str | None = None,
    units: Any = None,
    attention: str | None = "auto",
    rnn: str | None = "auto",
    meta: bool = True,
    steady_state: bool = True,
    batch_size: int | None = None,
    foreach: bool = True,
    fused: bool = False,
    set_to_none: bool = True,
    accumulation_steps: int = 1,
    zero_grad_at: str = "start",
    keep_output: bool = False,
    clip_grad_norm: float | None = None,
    offload_activations: bool = False,
    mixed_precision: Any = None,
    reshard_after_forward: bool = True,
    cpu_offload: bool = False,
    comm_backend: str = "nccl",
    **kwargs: Any,
) -> TrainingMemory:
    """Measure the memory of one training step of ``model(*inputs, **kwargs)``, per rank, in bytes.

    ``optimizer``: a name (``"adamw"``, ``"adam"``, ``"sgd"``, ...), an ``Optimizer`` class or a
    factory ``params -> optimizer`` (see ``build_optimizer``). ``loss_fn``: called as
    ``loss_fn(output)``, or ``loss_fn(output, target)`` when ``target`` is given; by default the
    model's own ``loss`` (``output.loss``) or the sum of its output. ``autocast``: ``None``, or
    ``torch.bfloat16`` / ``"bf16"`` / ``"fp16"`` (CUDA autocast's policy over forward and loss).
    ``dtype``: cast the floating parameters, buffers and inputs to it (pure low-precision training).
    ``activation_checkpointing``: modules to run under ``torch.utils.checkpoint`` (``True`` for
    the repeated blocks, module classes, a predicate ``(name, module) -> bool`` or qualified
    names). ``world_size`` / ``sharding`` / ``units``: per-rank figures under ``'ddp'``,
    ``'zero1'``, ``'zero2'``, ``'zero3'`` / ``'fsdp'`` (model in ``step.py``; ``units``
    chooses the FSDP units like ``activation_checkpointing``); ``inputs`` are one rank's
    micro-batch. ``attention``: the ``scaled_dot_product_attention`` kernel (``kernels.py``):
    ``"auto"`` is ``"cuda"`` (flash / memory-efficient) on meta and torch's own choice otherwise.
    ``rnn``: the recurrent kernel path (``kernels.py``): ``"auto"`` is ``"cpu"`` (the path a CPU
    runs: oneDNN's ``mkldnn_rnn_layer`` for an LSTM, ATen's generic path in its CPU form, inputs of
    all steps projected at once, for a GRU, an RNN and a projected LSTM) on meta for a model with an
    ``nn.RNNBase``, and torch's own choice otherwise; ``"cpu"`` forces it (``torch.lstm`` /
    ``torch.gru`` called directly); ``None`` keeps the generic path torch takes on meta.
    ``meta=False`` runs the same step on real copies on the model's device (to
    check the meta figures). ``steady_state``: see below.

    The training loop: ``foreach`` / ``fused`` choose the implementation of an optimizer given by
    name or class (``foreach=True``, torch's CUDA default; ``foreach=False``, the per-tensor loop
    torch picks on CPU; ``fused=True``, the fused kernel, measured with ``meta=False`` only: torch
    refuses it on meta). ``set_to_none=False``: the step starts with ``optimizer.zero_grad(
    set_to_none=False)``, so the gradients are zeros held from the step before, accumulated into
    in place. ``accumulation_steps=k``: k forward / loss / backward passes of ``loss / k`` on
    ``inputs`` (one micro-batch), then one ``optimizer.step()``. ``zero_grad_at``: where the loop
    calls ``optimizer.zero_grad()``: ``"start"`` of the step (before the forward), ``"after_forward"``
    (between the loss and ``backward``: the step before's gradients are held through the forward),
    ``"end"`` (after ``optimizer.step()``). ``keep_output=True``: the loop keeps its ``output`` and
    ``loss`` variables until the next step rebinds them (``out = model(x); loss = f(out)``): the
    output is held through backward and the optimizer step, and the step before's output and loss
    through the forward (the figures are then those of a step after the first, ``steady_state``).
    ``clip_grad_norm=max_norm``: the loop calls ``torch.nn.utils.clip_grad_norm_(params, max_norm)``
    between the last backward and ``optimizer.step()`` (in the optimizer phase): a norm per gradient,
    their stack, the total norm and the clip coefficient are made; the gradients are scaled in place.
    ``offload_activations=True``: the forward and the loss run under ``torch.autograd.graph.save_on_cpu()``
    (``step.OffloadedActivations``): every tensor saved for backward is copied to host memory as it is
    saved (activations, and the weights a backward reads), held on the device only while the forward
    still uses it, and copied back for the time its backward node runs; ``offloaded_activations_bytes``
    is the most host memory the copies hold (outside every device figure).

    FSDP2 (``sharding='fsdp'``): ``mixed_precision``, its ``MixedPrecisionPolicy`` (or a dict of its
    fields): the step computes in ``param_dtype`` while the sharded parameters, gradients and
    optimizer states stay in the parameters' dtype; ``reshard_after_forward=False`` keeps each
    unit's gathered parameters from its forward to its backward; ``cpu_offload=True``, its
    ``CPUOffloadPolicy``: the rank's shards of parameters, gradients and states are host memory
    (``offloaded_bytes``, outside every device figure) and the optimizer step runs on the host
    (``step.py``). FSDP2's buffers - the all-gather outputs beside the parameters copied out of them, the
    prefetched unit's, the reduce-scatter input and output, the unsharded gradients until their
    reduce-scatter - are replayed operator by operator (``step.Fsdp2Timeline``) and split at the peak in
    ``collective_buffers``. ``comm_backend``: ``"nccl"`` (the GPU run) or ``"gloo"`` (CPU ranks: its
    reduce-scatter clones its input for the time of the collective).

    Choices that make the meta step the step a CUDA run would take:

    * optimizers built from a name or a class get ``foreach=True``, the implementation torch picks
      by default for CUDA parameters (its temporaries differ from the per-tensor loop that torch
      picks for CPU / meta parameters); ``foreach=False`` / ``fused=True`` choose the others (torch
      refuses ``fused=True`` on meta: it is measured with ``meta=False``). An optimizer's state made
      in its ``__init__`` (Adagrad's sums) is live from the start; its host scalars (the ``step``
      counters) are ``optimizer_host_bytes``, outside every device figure.
    * ``nn.LSTM`` runs the CPU's oneDNN path, ``nn.GRU`` / ``nn.RNN`` the CPU's form of the generic path
      (``rnn="auto"``, ``kernels.py``).
    * ``steady_state=True`` (default) measures a step after the first: the optimizer's states
      exist before the forward starts (a warm-up ``optimizer.step()`` on zero gradients creates
      them; it is not part of the figures) and the gradients are ``None`` at the start
      (``zero_grad(set_to_none=True)``), as in every step of a run but the first.
    * ``autocast=torch.bfloat16`` applies CUDA autocast's policy (``step.AutocastPolicy``) over the
      forward and the loss: the float32 parameters are the master weights, their low-precision
      copies are activations / temporaries.
    * the model's fused transformer fast path is off (as in a training forward).
    """
    settings = _checked_settings(
        model, inputs, kwargs, autocast=autocast, activation_checkpointing=activation_checkpointing,
        world_size=world_size, sharding=sharding, units=units, attention=attention, rnn=rnn, meta=meta,
        steady_state=steady_state, batch_size=batch_size, fused=fused, set_to_none=set_to_none,
        accumulation_steps=accumulation_steps, zero_grad_at=zero_grad_at, keep_output=keep_output,
        clip_grad_norm=clip_grad_norm, offload_activations=offload_activations, mixed_precision=mixed_precision, reshard_after_forward=reshard_after_forward, cpu_offload=cpu_offload,
        comm_backend=comm_backend)
    modes = functools.partial(_function_modes, settings)
    # (a training step: grad on, also under the caller's no_grad() or inference_mode())
    with preserved_model_state(model), checkpointed(model, settings.checkpoint_names, modes), unfused(), \
            torch.inference_mode(False), torch.enable_grad():
        _train_mode(model)
        step = _prepared_step(model, inputs, kwargs, target, settings, optimizer, dtype, foreach, fused)
        ran = _measured_step(model, step, settings, loss_fn, modes())
        return _per_rank(model, step, ran, settings)


# -- the steps of ``estimate_training_memory`` ----------------------------------------------
@dataclass(frozen=True)
class _Settings:
    """The checked options of one estimate (``estimate_training_memory``'s arguments)."""

    plan: ShardPlan
    loop: _Loop
    autocast_dtype: torch.dtype | None
    batch_size: int
    meta: bool
    steady_state: bool
    checkpoint_names: list[str]
    unit_names: list[str]
    attention: str | None
    rnn: str | None
    embedding_bag: bool  # the CPU's index buffers of embedding_bag, on meta (kernels.EmbeddingBagKernel)
    comm_backend: str = "nccl"
    sparse_grads: bool = False  # an nn.Embedding / EmbeddingBag(sparse=True) makes sparse gradients


def _checked_settings(model: nn.Module, inputs: tuple, kwargs: dict, *, autocast: Any, activation_checkpointing: Any,
                      world_size: int, sharding: str | None, units: Any, attention: str | None, rnn: str | None,
                      meta: bool, steady_state: bool, batch_size: int | None, fused: bool, set_to_none: bool,
                      accumulation_steps: int, zero_grad_at: str, keep_output: bool, clip_grad_norm: Any,
                      offload_activations: bool, mixed_precision: Any,
                      reshard_after_forward: bool, cpu_offload: bool, comm_backend: str) -> _Settings:
    """Every argument checked (an error names the argument and what to pass), and ``"auto"`` resolved."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"estimate_training_memory expects a torch.nn.Module, got {type(model).__name__}")
    _refuse_deepspeed(model)
    plan = resolve_sharding(sharding, world_size, mixed_precision, reshard_after_forward, cpu_offload)
    if not isinstance(accumulation_steps, int) or isinstance(accumulation_steps, bool) or accumulation_steps < 1:
        raise ValueError(f"accumulation_steps must be an int >= 1 (micro-batches per optimizer step), got "
                         f"{accumulation_steps!r}")
    if fused and meta:
        raise ValueError("fused=True: torch runs fused optimizers on real devices only (its step refuses meta "
                         "parameters); pass meta=False to measure the fused step on the model's device")
    autocast_dtype = resolve_autocast_dtype(autocast)
    if batch_size is None:
        batch_size = required_batch_size(inputs, kwargs)
    else:  # it labels the figures: it must be the batch that runs
        batch_size = check_batch_size(batch_size, "batch_size", "estimate_training_memory", allow_none=False)
        check_batch_agrees(batch_size, input_shapes(inputs, kwargs), "estimate_training_memory")
    if zero_grad_at not in ZERO_GRAD_PLACES:
        raise ValueError(f"zero_grad_at={zero_grad_at!r}: where the loop calls optimizer.zero_grad(); use one of "
                         f"{', '.join(map(repr, ZERO_GRAD_PLACES))}")
    keep_output = check_flag(keep_output, "keep_output", "estimate_training_memory")
    if clip_grad_norm is not None and (isinstance(clip_grad_norm, bool) or not isinstance(clip_grad_norm, (int, float))
                                       or not clip_grad_norm > 0):
        raise ValueError(f"clip_grad_norm must be None or the max_norm the loop passes to "
                         f"torch.nn.utils.clip_grad_norm_ (a number > 0), got {clip_grad_norm!r}")
    offload_activations = check_flag(offload_activations, "offload_activations", "estimate_training_memory")
    loop = _Loop(set_to_none, accumulation_steps, zero_grad_at, keep_output,
                 None if clip_grad_norm is None else float(clip_grad_norm), offload_activations)
    meta = check_flag(meta, "meta", "estimate_training_memory")
    steady_state = check_flag(steady_state, "steady_state", "estimate_training_memory")
    checkpoint_names = ([] if activation_checkpointing in (None, False)
                        else select_modules(model, activation_checkpointing, "activation_checkpointing"))
    unit_names = (select_modules(model, units, "units") if units is not None else repeated_blocks(model))
    if comm_backend not in COMM_BACKENDS:
        raise ValueError(f"comm_backend={comm_backend!r}: the process group's backend, one of "
                         f"{', '.join(map(repr, COMM_BACKENDS))} (FSDP2's buffers differ: gloo clones a reduce-scatter's input)")
    if attention == "auto":
        attention = "cuda" if meta else None
    if rnn == "auto":  # (only where an nn.LSTM / GRU / RNN runs: a function mode costs a Python call per function)
        rnn = "cpu" if meta and any(isinstance(m, nn.RNNBase) for m in model.modules()) else None
    embedding_bag = meta and any(isinstance(m, nn.EmbeddingBag) for m in model.modules())
    sparse = [name for name, m in model.named_modules()
              if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse and m.weight.requires_grad]
    if sparse and meta:
        raise ValueError(f"{type(model.get_submodule(sparse[0])).__name__}(sparse=True) at '{sparse[0] or '(root)'}' "
                         "makes sparse gradients, which the meta device cannot measure (torch's meta kernel gives "
                         "them no entries, and sparse optimizer updates have no meta kernels): pass meta=False to "
                         "measure the step on real tensors (exact against the allocator), or use sparse=False")
    sparse_grads = bool(sparse)
    return _Settings(plan, loop, autocast_dtype, batch_size, meta, steady_state, checkpoint_names, unit_names,
                     attention, rnn, embedding_bag, comm_backend, sparse_grads)


def _function_modes(settings: _Settings) -> list[Any]:
    """The step's function modes, innermost last: device kernels, then the autocast policy."""
    made: list[Any] = []
    if settings.attention is not None:
        made.append(AttentionKernel(settings.attention))
    if settings.rnn is not None:
        made.append(RecurrentKernel(settings.rnn))
    if settings.embedding_bag:
        made.append(EmbeddingBagKernel())
    if settings.autocast_dtype is not None:
        made.append(AutocastPolicy(settings.autocast_dtype))
    return made


@dataclass
class _Step:
    """What the measured step runs on: copies of the model's tensors and inputs on the step's device, the
    optimizer, and the storages that are live before it starts (each list of storages made once)."""

    state: dict[str, torch.Tensor]  # qualified name -> the copy of a parameter or buffer
    master_sizes: dict[Any, int]  # storage key -> element size of a (master) parameter, gradient or state
    real_buffers: dict[str, torch.Tensor]  # the model's own buffers (their values seed a meta run)
    originals: list[torch.Tensor]  # the tensors of (inputs, kwargs, target) as given
    inputs: tuple
    kwargs: dict
    target: Any
    leaves: list[torch.Tensor]  # every input tensor the step holds (cast copies too)
    trainable: list[torch.Tensor]
    opt: torch.optim.Optimizer
    opt_name: str
    implementation: str
    param_storages: list[torch.Tensor]  # one tensor per storage of the parameters
    buffer_storages: list[torch.Tensor]  # one tensor per storage of the buffers
    input_bytes: int
    params_bytes: int  # the parameters' storages, whole
    buffers_bytes: int


def _prepared_step(model: nn.Module, inputs: tuple, kwargs: dict, target: Any, settings: _Settings, optimizer: Any,
                   dtype: torch.dtype | None, foreach: bool, fused: bool) -> _Step:
    """Copy the model's tensors and the inputs to the step's device (meta by default), build the optimizer."""
    plan = settings.plan
    device = torch.device("meta") if settings.meta else model_device(model)
    real_buffers = dict(model.named_buffers())
    state, master_sizes = _copied_state(model, device, dtype, plan.param_dtype)
    originals = tensor_leaves((inputs, kwargs, target))
    inputs, kwargs, target = _moved((inputs, kwargs, target), device, dtype)
    uncast: list[torch.Tensor] = []  # inputs as given, beside the copies FSDP casts (both are held)
    if plan.param_dtype is not None and plan.cast_forward_inputs:
        uncast = [t for t in tensor_leaves((inputs, kwargs)) if t.is_floating_point() and t.dtype != plan.param_dtype]
        inputs, kwargs = _moved((inputs, kwargs), device, plan.param_dtype)
    trainable = [t for name, t in state.items() if t.requires_grad]
    if not trainable:
        raise ValueError(f"{type(model).__name__} has no parameter that requires grad: there is no training "
                         "step to measure")
    opt, opt_name, implementation = build_optimizer(optimizer, trainable, foreach=foreach, fused=fused)
    leaves = [*tensor_leaves((inputs, kwargs, target)), *uncast]
    param_names = {name for name, _ in model.named_parameters()}
    param_storages = tensor_storages([t for n, t in state.items() if n in param_names])
    buffer_storages = tensor_storages([t for n, t in state.items() if n not in param_names])
    return _Step(state, master_sizes, real_buffers, originals, inputs, kwargs, target, leaves, trainable, opt,
                 opt_name, implementation, param_storages, buffer_storages, input_bytes=spanned_bytes(leaves),
                 params_bytes=_storage_bytes(param_storages), buffers_bytes=_storage_bytes(buffer_storages))


def _storage_bytes(storages: list[torch.Tensor]) -> int:
    return sum(t.untyped_storage().nbytes() for t in storages)


@dataclass
class _Ran:
    """What the measured step left: its record, and the gradients and optimizer states it made."""

    record: StepRecord
    grads: list[torch.Tensor]  # one tensor per gradient storage
    grad_serials: dict[int | None, torch.Tensor]  # allocation serial -> gradient storage
    device_states: list[torch.Tensor]  # the optimizer's states on the device
    state_serials: dict[int | None, torch.Tensor]
    host: list[torch.Tensor]  # the optimizer's host scalars (``step`` counters)
    host_serials: set[int]
    offloaded_activations_bytes: int = 0  # the most host memory saved-tensor copies held (offload_activations)


def _measured_step(model: nn.Module, step: _Step, settings: _Settings, loss_fn: Callable | None,
                   made: list[Any]) -> _Ran:
    """Run the step (after a warm-up one, in the steady state) under the storage tracker; what it left."""
    meta, loop, opt = settings.meta, settings.loop, step.opt
    external = {key for t in (*step.leaves, *step.state.values()) if (key := storage_key(t)) is not None}
    mode = counting_mode(CountOptions(), track_backward=True, meta=meta)
    tracker = StepTracker(step.params_bytes + step.buffers_bytes + step.input_bytes, external, mode,
                          step.trainable[0].device)
    # An optimizer that makes its state in __init__ (Adagrad's sums, bitsandbytes' quantisation maps) holds it
    # from the start.
    tracker.adopt(_made_in_init(opt, step.trainable[0].device))
    if meta:
        mode.values.made_on_meta = False  # (tensors made from nothing stay where torch puts them)
        for real, moved in zip(step.originals, tensor_leaves((step.inputs, step.kwargs, step.target))):
            mode.values.seed(moved, real)  # (same shapes if cast)
        for name, buffer in step.real_buffers.items():
            mode.values.seed(step.state[name], buffer)
    kernels = [m for m in made if isinstance(m, (AttentionKernel, RecurrentKernel, EmbeddingBagKernel))]
    policy = next((m for m in made if isinstance(m, AutocastPolicy)), None)
    offload = OffloadedActivations() if loop.offload_activations else None
    run = functools.partial(_run_step, model, step.inputs, step.kwargs, step.target, loss_fn, opt, tracker, policy,
                            loop, offload=offload)
    try:
        mode.attach(list(model.named_modules()), unfuse=False)  # (the step runs unfused already)
        with contextlib.ExitStack() as stack:
            for kernel in kernels:
                stack.enter_context(kernel)
            stack.enter_context(mode)
            held: dict[str, Any] = {}  # the loop's output and loss variables (keep_output=True)
            if settings.steady_state:
                with tracker.in_phase("warm-up"):
                    # the step before, whole: its output and loss are still held; or sparse gradients (an
                    # optimizer's state from one is sparse too, as large as that step's look-ups)
                    if loop.keep_output or settings.sparse_grads:
                        run(held, label="warm-up")
                    else:  # its gradients and the optimizer's states, as that step leaves them
                        for t in step.trainable:
                            t.grad = torch.zeros_like(t)
                        opt.step()
                        if loop.zero_grad_at == "end":
                            opt.zero_grad(set_to_none=loop.set_to_none)
            run(held)
            held.clear()
        grads = tensor_storages([t.grad for t in step.trainable if t.grad is not None])
        states = _state_storages(opt)
        host = [t for t in states if _host_scalar(t)]
        device_states = [t for t in states if not _host_scalar(t)]
        # a gradient and a state are kept in their parameter's (master) dtype
        for p in step.trainable:
            size = step.master_sizes[storage_key(p)]
            for t in [p.grad, *(v for v in opt.state.get(p, {}).values() if isinstance(v, torch.Tensor))]:
                if t is not None and t.dtype == p.dtype and storage_key(t) is not None:
                    step.master_sizes.setdefault(storage_key(t), size)
        return _Ran(tracker.record, grads, {tracker.serial_of(t): t for t in grads}, device_states,
                    {tracker.serial_of(t): t for t in device_states}, host,
                    {tracker.serial_of(t) for t in host} - {None}, offload.peak_host_bytes if offload else 0)
    except (RuntimeError, NotImplementedError) as error:
        if meta:
            _add_note(error, f"while running a training step of {type(model).__name__} on the meta device: an "
                      "operator without a meta kernel, or with data-dependent shapes, cannot run there; "
                      "pass meta=False to measure on real tensors")
        raise
    finally:
        mode.detach()
        tracker.detach_all()


def _per_rank(model: nn.Module, step: _Step, ran: _Ran, settings: _Settings) -> TrainingMemory:
    """The figures of one rank: its shares of the model states under the plan, and the step's events
    re-weighted to what the rank holds (``_rank_weights``), summarised."""
    plan = settings.plan
    param_names = {name for name, _ in model.named_parameters()}
    master = functools.partial(_rank_bytes, plan=plan, master_sizes=step.master_sizes)
    grads_rank = sum(master(t, divided=plan.grads) for t in ran.grads)
    states_rank = sum(master(t, divided=plan.states) for t in ran.device_states)
    param_blocks = [master(t, divided=plan.params) for t in step.param_storages]
    params_rank = sum(param_blocks)
    weights = _rank_weights(ran.record, ran.grad_serials, ran.state_serials, ran.host_serials, plan,
                            step.master_sizes, _master_ratio(step.state, param_names, step.master_sizes))
    extras = _strategy_extras(step.state, param_names, settings.unit_names, plan, _storage_bytes(ran.grads))
    fsdp = _fsdp_timeline(step, ran, settings, param_names, weights) if plan.params else None
    device_params = 0 if plan.cpu_offload else params_rank
    base_rank = device_params + step.buffers_bytes + step.input_bytes
    base_blocks = [] if plan.cpu_offload else list(param_blocks)
    base_blocks += [t.untyped_storage().nbytes() for t in tensor_storages([*step.buffer_storages, *step.leaves])]
    loop = settings.loop
    return _summarise(
        ran.record, weights, base_rank, extras, base_blocks, fsdp,
        params_bytes=params_rank,
        grads_bytes=grads_rank,
        optimizer_bytes=states_rank,
        offloaded_bytes=params_rank + grads_rank + states_rank if plan.cpu_offload else 0,
        optimizer_host_bytes=_storage_bytes(ran.host),
        buffers_bytes=step.buffers_bytes, input_bytes=step.input_bytes, batch_size=settings.batch_size,
        optimizer=step.opt_name,
        autocast=str(settings.autocast_dtype).removeprefix("torch.") if settings.autocast_dtype else None,
        world_size=plan.world_size, sharding=plan.strategy, checkpointed=tuple(settings.checkpoint_names),
        steady_state=settings.steady_state, meta=settings.meta, implementation=step.implementation,
        set_to_none=loop.set_to_none, accumulation_steps=loop.accumulation_steps, zero_grad_at=loop.zero_grad_at,
        keep_output=loop.keep_output, clip_grad_norm=loop.clip_grad_norm,
        offloaded_activations_bytes=ran.offloaded_activations_bytes,
        mixed_precision=(None if plan.param_dtype is None else
                         f"param {_dtype_name(plan.param_dtype)}, reduce {_dtype_name(plan.reduce_dtype)}"),
        reshard_after_forward=plan.reshard_after_forward,
    )


def _refuse_deepspeed(model: nn.Module) -> None:
    """A DeepSpeed engine, or a model whose parameters ZeRO-3 partitioned, is refused with what to pass.

    The engine holds its own flat, partitioned copies of the parameters, gradients and optimizer
    states (ZeRO-2 fails deep in the step with an IndexError, ZeRO-3 with "'Tensor' object has no
    attribute 'ds_status'"); the sharding model of this function (``sharding='zero1'``, ``'zero2'``,
    ``'zero3'``) measures the same step from the plain model.
    """
    engine = next((c for c in type(model).__mro__ if c.__name__ == "DeepSpeedEngine"
                   and c.__module__.startswith("deepspeed.")), None)
    if engine is not None:
        stage = getattr(model, "zero_optimization_stage", lambda: None)()
        world = getattr(model, "dp_world_size", None) or getattr(model, "world_size", None)
        strategy = f"'zero{stage}'" if stage in (1, 2, 3) else "'zero1' / 'zero2' / 'zero3' (its ZeRO stage)"
        raise TypeError(f"{type(model).__name__} is a DeepSpeed engine: it keeps its own partitioned copies of the "
                        f"parameters, gradients and optimizer states. Pass the model it wraps instead (engine.module, "
                        f"built without deepspeed.zero.Init, or on the meta device) with sharding={strategy}, "
                        f"world_size={world if world else 'the data-parallel size'}")
    partitioned = next((name for name, p in model.named_parameters() if hasattr(p, "ds_status")), None)
    if partitioned is not None:
        raise TypeError(f"parameter '{partitioned}' of {type(model).__name__} is partitioned by DeepSpeed ZeRO-3 "
                        "(deepspeed.zero.Init): its shapes are gone from this process. Build the model on the meta "
                        "device (with torch.device('meta'): ...) and pass sharding='zero3', world_size=N")


def _train_mode(model: nn.Module) -> None:
    """``model.train(True)``; an exported program (``torch.export``), whose graph was fixed in one mode
    at export time and refuses ``train()``, runs as exported."""
    try:
        model.train(True)
    except NotImplementedError:
        pass


def _state_storages(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The optimizer's state tensors, one per storage."""
    return tensor_storages([v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)])


def _made_in_init(opt: torch.optim.Optimizer, device: torch.device) -> list[torch.Tensor]:
    """The tensors on ``device`` an optimizer holds before its first step, one per storage: its state made
    in ``__init__`` (Adagrad's sums) and tensors it keeps in its own attributes (bitsandbytes' 8-bit
    optimizers: the two quantisation maps, 256 float32 each, put in each 8-bit state at its first step).
    On meta the maps are CPU tensors (host memory) copied to the device by that step: seen there."""
    found = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    own = [value for name, value in vars(opt).items()
           if isinstance(value, dict) and name not in ("state", "param_groups", "defaults")]
    found += [t for t in tensor_leaves(own) if not t.requires_grad]
    return [t for t in tensor_storages(found) if t.device == device and not _host_scalar(t)]


def _host_scalar(tensor: torch.Tensor) -> bool:
    """A host scalar of the optimizer (torch's non-capturable ``step`` counters): 0-d, on the CPU."""
    return tensor.dim() == 0 and tensor.device.type == "cpu"


def _moved(tree: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    """``tree`` with its tensors on ``device`` (floating ones cast to ``dtype`` when given); a tensor
    passed twice (input and target) stays one tensor."""
    copies: dict[int, torch.Tensor] = {}

    def move(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        if id(x) not in copies:
            cast = dtype if dtype is not None and x.is_floating_point() else x.dtype
            moved = x.to(device=device, dtype=cast)
            # an inference tensor (made under the caller's inference_mode) cannot be saved for backward
            copies[id(x)] = moved.clone() if moved.is_inference() else moved
        return copies[id(x)]
    return torch.utils._pytree.tree_map(move, tree)


def _add_note(error: BaseException, note: str) -> None:
    if hasattr(error, "add_note"):
        error.add_note(note)


def _copied_state(model: nn.Module, device: torch.device, dtype: torch.dtype | None,
                  param_dtype: torch.dtype | None = None) -> tuple[dict[str, torch.Tensor], dict[Any, int]]:
    """Leaf copies of parameters (keeping requires_grad) and buffers, on ``device``, optionally cast,
    swapped into the modules in place of the originals (every owner of a tied tensor gets the same
    copy). The caller restores the modules (``preserved_model_state`` puts the dicts back).

    ``param_dtype`` (FSDP2's mixed precision): the floating parameters compute in it; their master
    copies keep ``dtype`` (or their own). Also returned: the master element size of each parameter
    copy, by storage key.

    Swapped for the whole step rather than through ``functional_call``: a checkpointed module
    recomputes its forward during backward, and must find the copies there too.
    """
    state: dict[str, torch.Tensor] = {}
    copies: dict[int, torch.Tensor] = {}
    master_sizes: dict[Any, int] = {}
    for kind, named in (("param", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, tensor in named:
            copy = tensor.detach().to(device)
            if dtype is not None and copy.is_floating_point():
                copy = copy.to(dtype)
            if copy.device.type != "meta" and storage_key(copy) == storage_key(tensor):
                copy = copy.clone()  # real run: never step or update the user's own storage
            elif copy.device.type == "meta" and copy is tensor:
                copy = copy.detach()
            size = copy.element_size()
            if kind == "param" and param_dtype is not None and copy.is_floating_point():
                copy = copy.to(param_dtype)
            if kind == "param":
                copy.requires_grad_(tensor.requires_grad)
                master_sizes[storage_key(copy)] = size
            state[name] = copy
            copies[id(tensor)] = copy
    for module in model.modules():
        for slots in (module._parameters, module._buffers):
            for attr, tensor in slots.items():
                if tensor is not None and id(tensor) in copies:
                    slots[attr] = copies[id(tensor)]
    return state, master_sizes


@dataclass(frozen=True)
class _Loop:
    """The training loop as the user writes it (see ``estimate_training_memory``)."""

    set_to_none: bool
    accumulation_steps: int
    zero_grad_at: str
    keep_output: bool
    clip_grad_norm: float | None = None
    offload_activations: bool = False


def _run_step(model: nn.Module, inputs: tuple, kwargs: dict, target: Any, loss_fn: Callable | None,
              opt: torch.optim.Optimizer, tracker: StepTracker, policy: Any, loop: _Loop, held: dict[str, Any],
              label: str | None = None, offload: OffloadedActivations | None = None) -> None:
    """One step of the loop: ``zero_grad`` where ``loop`` places it; forward, loss, backward
    (``accumulation_steps`` times, the loss divided by it); optimizer step; each in its phase (a
    warm-up step, ``label``: its optimizer step in phase ``label``, the rest in ``"{label} forward"``
    ...). The activations are those of the first
    micro-batch's forward. ``held``: the loop's ``output`` / ``loss`` variables, kept across steps
    with ``keep_output`` (rebinding one frees the step before's, as in the user's loop).

    ``zero_grad`` at the start runs before the forward's phase begins (a ``set_to_none=False``
    zeroing is no forward operator); after the forward it runs at the end of the loss phase.
    """
    def phase(name: str) -> Any:  # (a warm-up's forward, loss and backward are not optimizer work: apart)
        if label is None:
            return tracker.in_phase(name)
        return tracker.in_phase(label if name == "optimizer" else f"{label} {name}")

    if loop.zero_grad_at == "start":
        opt.zero_grad(set_to_none=loop.set_to_none)
    k = loop.accumulation_steps
    for micro in range(k):
        with policy or contextlib.nullcontext(), offload or contextlib.nullcontext():
            with phase("forward"):
                output = model(*inputs, **kwargs)
            if micro == 0 and label is None:
                tracker.record.forward_end_events = len(tracker.record.events)
            with phase("loss"):
                if loop.keep_output:
                    held["output"] = output  # (frees the step before's output)
                if loss_fn is None:
                    loss = _default_loss(output)
                else:
                    loss = loss_fn(output) if target is None else loss_fn(output, target)
                del output
                if isinstance(loss, torch.Tensor) and k > 1:
                    loss = loss / k
                if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                    raise ValueError("the loss must be a tensor with one element; loss_fn returned "
                                     f"{type(loss).__name__}"
                                     f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else ''}")
                if loop.keep_output:
                    held["loss"] = loss  # (frees the step before's loss)
                if micro == 0 and loop.zero_grad_at == "after_forward":
                    opt.zero_grad(set_to_none=loop.set_to_none)
        with phase("backward"):
            # torch.autograd.backward, not loss.backward(): a Tensor method is a torch function, and the
            # function modes (autocast policy, attention kernel) would be off during the whole backward,
            # checkpoint recomputations included.
            torch.autograd.backward(loss)
            del loss
    with phase("optimizer"):
        if loop.clip_grad_norm is not None:  # (torch picks its foreach or per-tensor norms: the same tensors)
            torch.nn.utils.clip_grad_norm_([p for group in opt.param_groups for p in group["params"]],
                                           loop.clip_grad_norm)
        opt.step()
        if loop.zero_grad_at == "end":
            opt.zero_grad(set_to_none=loop.set_to_none)


def _rank_bytes(tensor: torch.Tensor, plan: ShardPlan, divided: bool, master_sizes: dict[Any, int] | None = None) -> int:
    """Bytes a rank holds of ``tensor``: its shard when ``divided``; at its master element size when
    it is a parameter, gradient or state of a mixed-precision step (``master_sizes``)."""
    size = (master_sizes or {}).get(storage_key(tensor), tensor.element_size())
    if divided:
        return shard_bytes(tensor, plan.world_size, size)
    return tensor.untyped_storage().nbytes() * size // tensor.element_size()


def _master_ratio(state: dict[str, torch.Tensor], param_names: set[str], master_sizes: dict[Any, int]) -> Fraction:
    """Master bytes over computed bytes of the trainable parameters (2 for float32 masters computing in
    bf16; 1 without a mixed-precision policy): the scale of the optimizer's temporaries."""
    params = tensor_storages([t for n, t in state.items() if n in param_names and t.requires_grad])
    run = sum(t.untyped_storage().nbytes() for t in params)
    held = sum(t.untyped_storage().nbytes() * master_sizes.get(storage_key(t), t.element_size()) // t.element_size()
               for t in params)
    return Fraction(held, run) if run else Fraction(1)


def _dtype_name(dtype: torch.dtype | None) -> str:
    return str(dtype).removeprefix("torch.")


def _rank_weights(record: StepRecord, grad_serials: dict, state_serials: dict, host_serials: set[int],
                  plan: ShardPlan, master_sizes: dict[Any, int], ratio: Fraction) -> list[int]:
    """Per-rank device bytes of every allocation: gradients and states divided where the strategy
    divides them, in their master dtype under a mixed-precision policy (the optimizer's temporaries
    scaled by ``ratio``, master over computed bytes); the optimizer's host scalars
    (``optimizer_host_bytes``) weigh nothing."""
    weights = list(record.sizes)
    for serial in host_serials:  # (RMSprop makes its `step` counters with torch.zeros: the dispatcher sees them)
        weights[serial] = 0
    if plan.states:  # the update runs on each rank's shard: its temporaries are divided too
        for serial, (phase, _) in enumerate(record.origin):
            if phase in ("warm-up", "optimizer"):
                weights[serial] = -(-weights[serial] * ratio.numerator // (plan.world_size * ratio.denominator))
    for serials, divided in ((grad_serials, plan.grads), (state_serials, plan.states)):
        for serial, tensor in serials.items():
            if serial is not None and (divided or storage_key(tensor) in master_sizes):
                weights[serial] = _rank_bytes(tensor, plan, divided, master_sizes)
    if plan.cpu_offload:  # the shards of gradients and states, and the optimizer's work, are on the host
        for serial in [*grad_serials, *state_serials]:
            if serial is not None:
                weights[serial] = 0
        for serial, (phase, _) in enumerate(record.origin):
            if phase in ("warm-up", "optimizer"):
                weights[serial] = 0
    return weights


def _strategy_extras(state: dict[str, torch.Tensor], param_names: set[str], unit_names: list[str], plan: ShardPlan,
                     grads_full: int) -> dict[str, tuple[int, int]]:
    """Per phase: (communication buffers, gather buffers) the strategy adds on each rank: DDP's buckets (a
    flat copy of every gradient), ZeRO-2's unsharded gradients of its largest unit in backward. (FSDP's
    buffers are ``Fsdp2Timeline``'s, operator by operator.)"""
    comm = grads_full if plan.strategy == "ddp" else 0
    reduce = 0
    if plan.grads and not plan.params:
        members: dict[int, list[torch.Tensor]] = {}
        for name in param_names:
            members.setdefault(unit_index(name, unit_names), []).append(state[name])
        reduce = max(_storage_bytes(tensor_storages(tensors)) for tensors in members.values())
    return {phase: (comm, reduce if phase == "backward" else 0) for phase in ("warm-up", *PHASES)}


def _fsdp_timeline(step: _Step, ran: _Ran, settings: _Settings, param_names: set[str],
                   weights: list[int]) -> Fsdp2Timeline:
    """FSDP2's buffers at every operator of the step (``step.Fsdp2Timeline``): the units' boundaries read
    from the record's marks, each gradient the backward allocates weighed unsharded until its unit's
    reduce-scatter (its weight is its shard: the difference is a bump)."""
    record, names = ran.record, settings.unit_names
    params = {n: t for n, t in step.state.items() if n in param_names}
    units = fsdp2_units(params, names, settings.plan, step.master_sizes)
    of_module = {module: unit_index(module, names) if module else -1 for module in {m for _, _, m, _ in record.marks}}
    unit_of_mark = [of_module[module] for _, _, module, _ in record.marks]
    owner = {storage_key(t.grad): unit_index(n, names) for n, t in params.items() if t.grad is not None}
    born = {serial: event for event, (serial, sign) in enumerate(record.events) if sign > 0}
    ends = [end for end, _, _, _ in record.marks]
    bumps: dict[int, list[tuple[int, int]]] = {}
    for serial, grad in ran.grad_serials.items():
        if serial is None or record.origin[serial][0] != "backward":
            continue
        mark = bisect.bisect_right(ends, born[serial])  # the operator whose events made it
        bumps.setdefault(mark, []).append((owner[storage_key(grad)], record.sizes[serial] - weights[serial]))
    return Fsdp2Timeline(units, unit_of_mark, [phase for _, phase, _, _ in record.marks], bumps,
                         settings.plan.reshard_after_forward, settings.comm_backend)


def _alive_after(record: StepRecord, event_count: int) -> set[int]:
    """Serials of the allocations alive once the first ``event_count`` events happened."""
    alive: set[int] = set()
    for serial, sign in record.events[:event_count]:
        (alive.add if sign > 0 else alive.discard)(serial)
    return alive


def _rounding(sizes: list[int]) -> int:
    """Bytes the CUDA caching allocator adds to blocks of ``sizes`` by rounding each up to 512 B."""
    return sum(-(-n // CUDA_BLOCK_BYTES) * CUDA_BLOCK_BYTES - n for n in sizes if n)


def _summarise(record: StepRecord, weights: list[int], base: int, extras: dict[str, tuple[int, int]],
               base_blocks: list[int], fsdp: Fsdp2Timeline | None, **fields: Any) -> TrainingMemory:
    """Replay the events with per-rank weights: timeline, phases, peak, activations at end of forward.

    ``fsdp``: FSDP2's buffers after each operator (``level``) and while the hooks before it run (``surge``,
    over the live total before the operator): a peak there is named ``FSDP2 hooks before <operator>``."""
    live = base
    alive: set[int] = set()
    cursor = 0
    timeline: list[tuple[str, int]] = []
    peak = (-1, "", "", "", 0)  # bytes, phase, module, op, mark
    peak_kinds: tuple[int, ...] = (0,) * len(KINDS)
    peak_alive: set[int] = set()
    phase_stats: dict[str, list[int]] = {}
    for index, (event_end, phase, module, op) in enumerate(record.marks):
        before = live
        while cursor < event_end:
            serial, sign = record.events[cursor]
            live += sign * weights[serial]
            (alive.add if sign > 0 else alive.discard)(serial)
            cursor += 1
        if phase not in extras:
            continue
        comm, gather = extras[phase]
        held = fsdp.level[index] if fsdp else gather
        total = live + comm + held
        if phase != "warm-up":
            timeline.append((phase, total))
            if phase not in phase_stats:  # its start: the live total when the phase began
                start = base + sum(sign * weights[serial]
                                   for serial, sign in record.events[:record.phase_start_events[phase]])
                held_before = fsdp.after_hooks[index] if fsdp else gather  # (FSDP2's hooks of its start run)
                phase_stats[phase] = [start + comm + held_before, total, total]
            stats = phase_stats[phase]
            surge = before + comm + fsdp.surge[index] if fsdp else 0
            # (FSDP2's final callback runs at the end of the backward, before the optimizer's first operator)
            callback = phase == "optimizer" and "backward" in phase_stats and record.marks[index - 1][1] == "backward"
            surge_stats = phase_stats["backward"] if callback else stats
            surge_stats[1] = max(surge_stats[1], surge)
            stats[1] = max(stats[1], total)
            stats[2] = total
            if surge > max(total, peak[0]):
                if callback:
                    peak = (surge, "backward", "", "FSDP2 hooks at the end of the backward", index)
                else:
                    peak = (surge, phase, module, f"FSDP2 hooks before {op}", index)
                peak_kinds = fsdp.at_surge[index]
                peak_alive = set(alive)  # (the operator's own allocations among them: an upper bound)
            elif total > peak[0]:
                peak = (total, phase, module, op, index)
                peak_kinds = fsdp.at_level[index] if fsdp else peak_kinds
                peak_alive = set(alive)
    if peak[0] < 0:
        raise RuntimeError("the training step ran no operator: nothing to measure")
    by_module: dict[str, int] = {}
    for serial in _alive_after(record, record.forward_end_events):
        if record.origin[serial][0] == "forward":
            name = record.origin[serial][1]
            by_module[name] = by_module.get(name, 0) + weights[serial]
    activations = sum(by_module.values())
    phases = tuple(PhaseMemory(name, *phase_stats[name]) for name in PHASES if name in phase_stats)
    if fsdp:  # at the peak: what FSDP2 holds, communication buffers apart
        comm, gather = peak_kinds[1] + peak_kinds[2], peak_kinds[0] + peak_kinds[3]
        buffers = dict(zip(KINDS, peak_kinds))
    else:
        comm, gather = extras["forward"][0], max(g for _, g in extras.values())
        buffers = {"gradient buckets": comm} if comm else {}
    return TrainingMemory(
        activations_bytes=activations, peak_bytes=peak[0], peak_phase=peak[1], peak_module=peak[2],
        peak_op=peak[3], phases=phases, timeline=tuple(timeline),
        activations_by_module=dict(sorted(by_module.items(), key=lambda kv: -kv[1])),
        allowance=Allowance(rounding_bytes=_rounding(base_blocks + [weights[s] for s in peak_alive])),
        comm_buffer_bytes=comm, gather_bytes=gather, collective_buffers=buffers, **fields,
    )


# -- the result -----------------------------------------------------------------------------------
# The CUDA caching allocator rounds every block up to a multiple of 512 bytes.
CUDA_BLOCK_BYTES = 512


@dataclass(frozen=True)
class PhaseMemory:
    """Live bytes of one phase of the step: at its start, its largest, at its end."""

    name: str
    start_bytes: int
    peak_bytes: int
    end_bytes: int


@dataclass(frozen=True)
class Allowance:
    """What the tracker cannot see on a CUDA device, documented, never added to ``peak_bytes``.

    ``rounding_bytes``: exact extra of the caching allocator's 512-byte rounding over the
    blocks live at the peak (parameters, buffers and inputs included; computed from the record). ``cublas_workspace_bytes``:
    PyTorch's default cuBLAS workspace on Hopper (``CUBLAS_WORKSPACE_CONFIG`` unset: 32 MiB per
    handle/stream; 8 MiB + 128 KiB before Hopper). ``cuda_context_bytes``: the CUDA context and
    loaded kernels, driver- and GPU-dependent (typically 300-600 MiB with lazy module loading);
    given as a round 512 MiB. Fragmentation of the caching allocator's segments is not estimated.
    """

    rounding_bytes: int
    cublas_workspace_bytes: int = 32 * 2**20
    cuda_context_bytes: int = 512 * 2**20

    @property
    def total_bytes(self) -> int:
        return self.rounding_bytes + self.cublas_workspace_bytes + self.cuda_context_bytes


@dataclass(frozen=True)
class TrainingMemory:
    """Memory of one training step, per rank, in bytes (see ``estimate_training_memory``).

    ``params_bytes``, ``buffers_bytes``, ``input_bytes``: held before the step starts.
    ``grads_bytes``: the parameters' ``.grad`` after backward. ``optimizer_bytes``: the
    optimizer's state tensors that live with the parameters (read from ``optimizer.state``);
    ``optimizer_host_bytes``: its host-side scalars (torch's ``step`` counters, 4 bytes each).
    ``activations_bytes``: what the forward leaves alive at its end (the tensors saved for
    backward and the model's output). ``peak_bytes``: the largest live total of the step, at
    operator ``peak_op`` of module ``peak_module`` in phase ``peak_phase``. ``phases``: start /
    peak / end per phase. ``timeline``: (phase, live bytes) after every operator.
    ``activations_by_module``: the bytes of ``activations_bytes`` each module allocated.
    ``comm_buffer_bytes`` / ``gather_bytes``: what the sharding strategy adds (already inside
    ``peak_bytes``): DDP's buckets / ZeRO-2's unsharded gradients; under FSDP, at the peak, FSDP2's
    all-gather and reduce-scatter buffers / its gathered parameters and unsharded gradients, split in
    ``collective_buffers`` (by name; DDP: ``gradient buckets``). ``allowance``: what is not seen, apart (``Allowance``). The loop measured:
    ``implementation`` of the optimizer step (``"foreach"``, ``"for-loop"``, ``"fused"``, ...),
    ``set_to_none`` of its ``zero_grad``, ``accumulation_steps`` micro-batches per optimizer step,
    ``zero_grad_at`` where the loop zeroes the gradients, ``keep_output`` whether it keeps its output
    and loss alive until the next step, ``clip_grad_norm`` the max norm it clips the gradients to (or
    ``None``), ``offloaded_activations_bytes`` the most host memory ``offload_activations`` held. FSDP2: ``mixed_precision`` (``"param bfloat16, reduce
    float32"``: the policy's dtypes), ``reshard_after_forward``, and ``offloaded_bytes``: under
    ``cpu_offload`` the rank's shards of parameters, gradients and states (``params_bytes`` +
    ``grads_bytes`` + ``optimizer_bytes``), held in host memory, in no device figure.
    """

    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    peak_bytes: int
    peak_phase: str
    peak_module: str
    peak_op: str
    buffers_bytes: int
    input_bytes: int
    optimizer_host_bytes: int
    phases: tuple[PhaseMemory, ...]
    timeline: tuple[tuple[str, int], ...] = field(repr=False)
    activations_by_module: dict[str, int] = field(repr=False)
    allowance: Allowance
    batch_size: int
    optimizer: str
    autocast: str | None
    world_size: int
    sharding: str | None
    comm_buffer_bytes: int
    gather_bytes: int
    checkpointed: tuple[str, ...]
    steady_state: bool
    meta: bool
    implementation: str = "foreach"
    set_to_none: bool = True
    accumulation_steps: int = 1
    zero_grad_at: str = "start"
    keep_output: bool = False
    clip_grad_norm: float | None = None
    offloaded_activations_bytes: int = 0
    mixed_precision: str | None = None
    reshard_after_forward: bool = True
    offloaded_bytes: int = 0
    collective_buffers: dict[str, int] = field(default_factory=dict)

    @property
    def peak_at(self) -> str:
        """Where the peak happened, e.g. ``"backward: aten.mm.default in 'layers.0.mlp'"``."""
        return f"{self.peak_phase}: {self.peak_op} in '{self.peak_module}'"

    @property
    def model_state_bytes(self) -> int:
        """Parameters + gradients + optimizer states (what ZeRO-style estimators count)."""
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes

    def fits(self, device_bytes: int) -> bool:
        """Whether the peak plus the allowance fits ``device_bytes``."""
        return self.peak_bytes + self.allowance.total_bytes <= device_bytes

    def summary(self) -> str:
        """A few lines in words (for a terminal); reports render the fields themselves."""
        lines = [f"training step, batch {self.batch_size}, optimizer {self.optimizer} ({self.implementation})"
                 + ("" if self.set_to_none else ", zero_grad(set_to_none=False)")
                 + (f", {self.accumulation_steps} micro-batches" if self.accumulation_steps > 1 else "")
                 + (f", zero_grad at {self.zero_grad_at}" if self.zero_grad_at != "start" else "")
                 + (", output kept across steps" if self.keep_output else "")
                 + (f", gradients clipped to norm {self.clip_grad_norm:g}" if self.clip_grad_norm is not None else "")
                 + (f", activations offloaded ({format_bytes(self.offloaded_activations_bytes)} on the host)"
                    if self.offloaded_activations_bytes else "")
                 + (f", autocast {self.autocast}" if self.autocast else "")
                 + (f", {self.sharding} x{self.world_size} (per rank)" if self.sharding else "")
                 + (f", mixed precision {self.mixed_precision}" if self.mixed_precision else "")
                 + ("" if self.reshard_after_forward else ", no reshard after forward")
                 + (f", {format_bytes(self.offloaded_bytes)} offloaded to the host" if self.offloaded_bytes else "")]
        for label, value in (("parameters", self.params_bytes), ("gradients", self.grads_bytes),
                             ("optimizer states", self.optimizer_bytes),
                             ("activations (end of forward)", self.activations_bytes),
                             ("peak", self.peak_bytes)):
            lines.append(f"  {label:<30} {format_bytes(value):>12}")
        lines.append(f"  peak at {self.peak_at}")
        if any(self.collective_buffers.values()):
            lines.append("  of which the strategy's buffers: " + ", ".join(
                f"{name} {format_bytes(n)}" for name, n in self.collective_buffers.items() if n))
        for phase in self.phases:
            lines.append(f"  {phase.name:<12} start {format_bytes(phase.start_bytes):>12}  "
                         f"peak {format_bytes(phase.peak_bytes):>12}  end {format_bytes(phase.end_bytes):>12}")
        lines.append(f"  not seen (apart): rounding {format_bytes(self.allowance.rounding_bytes)}, cuBLAS "
                     f"workspace {format_bytes(self.allowance.cublas_workspace_bytes)}, CUDA context "
                     f"~{format_bytes(self.allowance.cuda_context_bytes)}")
        return "\n".join(lines)
