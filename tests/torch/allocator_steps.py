"""A training step as users write it, run for real on CPU and read from the allocator itself.

``allocator_step`` is the independent reference of the training-memory tests: it does not use
the package. The step is a plain loop (``zero_grad``, forward, loss, ``backward``, ...,
``optimizer.step()``) on a deep copy of the model; ``torch.profiler`` with ``profile_memory=True``
reports every allocation and free of the CPU allocator. It runs from before the optimizer (and a
wrapper such as ``DistributedDataParallel``) is made, through a first step, to the end of the step
measured, so the gradients, optimizer states and buffers the first step leaves are events too;
only the copy's parameters and buffers and the inputs, made before, are summed from the tensors.

Two peaks come out of the same events. ``peak_bytes``: the running total's largest value, kernel
scratch included (an ATen kernel that allocates and frees inside itself, e.g. the CPU ``mm``
copying a transposed operand to contiguous memory). ``dispatcher_peak_bytes``: the running total
sampled when each operator that a ``TorchDispatchMode`` sees returns (a 10-line mode here marks
them with ``record_function``), which is what a tracker at the dispatcher can see; scratch that
lives inside one operator never shows there.
"""
from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils._python_dispatch import TorchDispatchMode

_MARK = "dispatcher-op"
_STEP = "measured-step"


class _MarkOperators(TorchDispatchMode):
    """Wraps every operator the dispatcher shows a mode in a profiler range named ``_MARK``."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        with record_function(_MARK):
            return func(*args, **(kwargs or {}))


@dataclass(frozen=True)
class AllocatorStep:
    """Bytes of one real step, read from the allocator (see the module docstring)."""

    base_bytes: int
    peak_bytes: int
    dispatcher_peak_bytes: int


def _storages_bytes(tensors: list[torch.Tensor]) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            t = getattr(t, "_local_tensor", t)  # a DTensor (tensor parallel) holds its local shard
            storage = t.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def allocator_step(model: nn.Module, inputs: tuple, *, optimizer: Callable[[Any], torch.optim.Optimizer],
                   loss_fn: Callable[..., torch.Tensor] | None = None, target: Any = None,
                   steady_state: bool = True, set_to_none: bool = True, accumulation_steps: int = 1,
                   zero_grad_at: str = "start", keep_output: bool = False, clip_grad_norm: float | None = None,
                   offload_activations: bool = False, before_micro_batch: Callable[[nn.Module, int], None] | None = None,
                   wrap: Callable[[nn.Module], nn.Module] | None = None, **kwargs: Any) -> AllocatorStep:
    """Live bytes of the CPU allocator during one real training step of a copy of ``model``.

    ``steady_state``: a first step runs before the one measured (the optimizer's states exist and
    the gradients are ``None``, or zeros with ``set_to_none=False``). ``accumulation_steps``: k
    forward/backward passes of ``loss / k`` on ``inputs``, then one ``optimizer.step()``.
    ``zero_grad_at``: ``"start"`` (before the forward), ``"after_forward"`` (between the loss and
    ``backward``, first micro-batch) or ``"end"`` (after ``optimizer.step()``). ``keep_output``: the
    loop's ``out`` and ``loss`` variables live until the next step rebinds them. ``clip_grad_norm``:
    ``torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)`` before ``optimizer.step()``.
    ``offload_activations``: forward and loss under saved-tensor hooks that do what
    ``torch.autograd.graph.save_on_cpu`` does on a GPU, emulated on this CPU: each saved tensor is copied
    to host memory the allocator does not see (a NumPy array), and copied back into a fresh torch tensor
    (the device's allocation) when its backward unpacks it.
    ``wrap``: applied to the copy before the optimizer is built (``DistributedDataParallel``).
    ``before_micro_batch(trained, i)``: called before micro-batch ``i``'s forward (FSDP2's
    ``set_requires_gradient_sync(i == k - 1)``).

    The profiler runs from before the optimizer (and ``wrap``) are made, so every byte made after
    the copy is an event; the base is the copy's parameters and buffers and the inputs. With ``wrap``
    the copy is made inside the profiler's window: a wrapper that replaces the parameters (``fully_shard``)
    frees them, and the profiler records no free of a block allocated before it started.
    """
    held = [*inputs, *(v for v in kwargs.values() if isinstance(v, torch.Tensor)),
            *((target,) if isinstance(target, torch.Tensor) else ())]
    if wrap is None:
        model = copy.deepcopy(model).train()
        held += [*model.parameters(), *model.buffers()]
    base = _storages_bytes(held)
    del held  # (no reference here may keep what a wrapper frees)

    def loss_of(output: Any) -> torch.Tensor:
        if loss_fn is None:
            return output.loss if hasattr(output, "loss") else output.sum()
        return loss_fn(output) if target is None else loss_fn(output, target)

    def hooks() -> Any:  # save_on_cpu as a GPU runs it (docstring); host copies invisible to the allocator
        if not offload_activations:
            return contextlib.nullcontext()
        return torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach().numpy().copy(),
                                                        lambda host: torch.from_numpy(host).clone())

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        if wrap is not None:
            model = copy.deepcopy(model).train()
        trained = wrap(model) if wrap is not None else model
        opt = optimizer([p for p in model.parameters() if p.requires_grad])

        kept: dict[str, Any] = {}  # the loop's variables `out` and `loss`, when it keeps them

        def step() -> None:
            if zero_grad_at == "start":
                opt.zero_grad(set_to_none=set_to_none)
            for micro in range(accumulation_steps):
                if before_micro_batch is not None:
                    before_micro_batch(trained, micro)
                with hooks():
                    out = trained(*inputs, **kwargs)
                if keep_output:
                    kept["out"] = out
                with hooks():
                    loss = loss_of(out)
                del out
                if accumulation_steps > 1:
                    loss = loss / accumulation_steps
                if keep_output:
                    kept["loss"] = loss
                if zero_grad_at == "after_forward" and micro == 0:
                    opt.zero_grad(set_to_none=set_to_none)
                loss.backward()
                del loss
            if clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
            opt.step()
            if zero_grad_at == "end":
                opt.zero_grad(set_to_none=set_to_none)

        if steady_state:
            step()
        if zero_grad_at == "start":  # (before the window too, as the reference always did; the step's own
            opt.zero_grad(set_to_none=set_to_none)  # zero_grad then frees nothing: gloo's work gets this time to end)
        with record_function(_STEP), _MarkOperators():
            step()
    events = list(prof.profiler.kineto_results.events())
    memory = sorted((e.start_ns(), e.nbytes()) for e in events
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    (window,) = [(e.start_ns(), e.start_ns() + e.duration_ns()) for e in events if e.name() == _STEP]
    ends = sorted(e.start_ns() + e.duration_ns() for e in events if e.name() == _MARK)
    live = peak = dispatcher_peak = 0
    cursor = 0
    for end in ends:  # the running total as each operator of the step returns (allocations up to its end)
        while cursor < len(memory) and memory[cursor][0] <= end:
            live += memory[cursor][1]
            if memory[cursor][0] >= window[0]:
                peak = max(peak, live)
            cursor += 1
        dispatcher_peak = max(dispatcher_peak, live)
    for time_ns, nbytes in memory[cursor:]:
        live += nbytes
        if window[0] <= time_ns <= window[1]:
            peak = max(peak, live)
    return AllocatorStep(base, base + max(peak, dispatcher_peak), base + dispatcher_peak)


def allocator_peak(run: Callable[[], Any]) -> int:
    """Peak of the running sum of the CPU allocator's events during ``run()`` (``torch.profiler``)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak
