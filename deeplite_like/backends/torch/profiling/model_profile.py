"""``build_model_profile``: the ``ModelProfile`` of one call of a PyTorch model (``get_model_profile``'s torch side).

Counted with ``PhaseCountingMode`` (``phases.py``) on the real model or on meta copies
(``run.py``), then, on real tensors, timed without counting. The model is left as found.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch import nn

from deeplite_like.profiling.build import build_profile
from deeplite_like.profiling.result import ModelProfile

from ..params import parameter_stats
from ..state import preserved_model_state
from .assemble import ignored_names, module_params, module_records, phase_totals
from ..counting.engine import warn_if_untracked
from .devices import device_name, no_sync, synchronizer
from .entry_point import check_entry
from .inputs import profile_inputs
from .phases import PhaseCountingMode
from ..run_tensors import batch_size_of, tensors_in
from .run import ProfileRun, forward_error, timed
from .timers import ModuleTimer

__all__ = ["build_model_profile"]


def build_model_profile(model: nn.Module, *, input_shape: Sequence[int] | None = None, args: Any = None,
                        kwargs: Mapping[str, Any] | None = None, warm_up: int = 1,
                        ignore_modules: Iterable[Any] | None = None, func_name: str = "forward",
                        backward: bool = False, meta: bool = False, module_latency: bool = True,
                        loss_fn: Callable[[Any], torch.Tensor] | None = None) -> ModelProfile:
    """The ``ModelProfile`` of one call of ``model.<func_name>`` (``get_model_profile``'s torch side).

    One counted call (under ``torch.no_grad()`` unless ``backward``), then, on real tensors, one
    timed call (forward latency; with ``backward`` the loss and backward are timed too). The
    counted call is the first of the ``warm_up`` calls that precede the timed one (DeepSpeed's
    ``warm_up=1`` is one call before the profiled one, as here); more run untimed. With
    ``module_latency`` one more call times each module: the timed call carries no hook, since
    the module timers' hooks would add their own cost to the forward's latency (+2.9 % on
    ResNet-50, +6.5 % on MobileNetV3-Large). So a default profile runs the model three times:
    counted, timed, timed per module. The model is left as found: mode, parameters, buffers
    (running statistics), gradients, hooks, and the random generators.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"build_model_profile expects a torch.nn.Module, got {type(model).__name__}")
    check_entry(model, func_name)
    named = list(model.named_modules())
    on_meta = bool(meta) or any(t.is_meta for t in itertools.chain(model.parameters(), model.buffers()))
    args, kwargs, built = profile_inputs(model, input_shape, args, kwargs, on_meta)
    if backward and not any(p.requires_grad for p in model.parameters()) \
            and not any(t.requires_grad for t in tensors_in((args, kwargs))):
        raise ValueError(f"backward=True needs something to differentiate, but no input requires grad and "
                         f"{type(model).__name__} has no trainable parameter")
    sync = no_sync if on_meta else synchronizer(model)
    stats = parameter_stats(model)
    params = module_params(named)
    timings: dict[str, float] = {}
    module_seconds: dict[str, float] | None = None

    with preserved_model_state(model):  # (buffer values and random generators included)
        mode = PhaseCountingMode(time_backward=False, meta=on_meta, track_backward=backward)  # meta: replay, values of index tensors
        run = ProfileRun(model, func_name, args, kwargs, backward, on_meta, loss_fn, mode.values)
        mode.watch([p for p in model.parameters()])  # a forward that writes its weights is undone below
        run.mode = mode
        try:
            mode.attach(named)
            with mode:
                try:
                    output = run.forward()
                except Exception as exc:
                    # DeepSpeed's API: the model's own exception object, told where it happened
                    if hasattr(exc, "add_note"):
                        exc.add_note(str(forward_error(model, exc, mode, built, func_name)))
                        raise
                    raise forward_error(model, exc, mode, built, func_name) from exc
                if backward:
                    run.run_backward(run.loss(output))
        finally:
            run.mode = None
            mode.detach()
            mode.restore_mutated()
        mode.flush()
        del output
        if not on_meta:
            for _ in range(warm_up - 1):  # (the counted call was the first)
                out = run.forward()
                if backward:
                    run.run_backward(run.loss(out))
            out, timings["forward"] = timed(run.forward, sync)
            if backward:
                loss, timings["other"] = timed(lambda: run.loss(out), sync)
                _, timings["backward"] = timed(lambda: run.run_backward(loss), sync)
            del out
            if module_latency:
                timer = ModuleTimer(named, True, sync)
                timer.attach()
                try:
                    run.forward()
                finally:
                    timer.detach()
                module_seconds = timer.seconds

    phases = phase_totals(mode)
    for name, seconds in timings.items():
        if name in phases:
            phases[name].latency_s = seconds
    notes = []
    if on_meta:
        notes.append("Counted on the meta device: nothing ran for real, so nothing was timed.")
    else:
        warmed = f" and {warm_up - 1} warm-up call(s)" if warm_up > 1 else ""
        notes.append(f"Latency: one call timed after the counted call{warmed}, without counting"
                     + ("; per-module latency from one more call with a hook around each module." if module_latency
                        else "."))
    if func_name != "forward":
        notes.append(f"Profiled entry point: {type(model).__name__}.{func_name}, counted as a call of the model: "
                     "operators it ran outside the model's own calls are the root's own operators.")
    if not backward:
        notes.append("Counted under torch.no_grad() (inference).")
    warn_if_untracked(mode.result.untracked, stacklevel=2)
    return build_profile(
        type(model).__name__, "torch",
        module_records(named, params, mode, module_seconds if module_latency and not on_meta else None),
        phases=phases, by_operator=mode.result.by_operator, outside=mode.outside,
        excluded_names=ignored_names(named, ignore_modules or ()), params=stats.total_params,
        trainable_params=stats.trainable_params,
        duration_s=sum(timings.values()) if timings else None, batch_size=batch_size_of(args, kwargs),
        untracked=mode.result.untracked, module_latency=bool(module_latency) and not on_meta,
        device="meta" if on_meta else device_name(model), notes=notes, communication=mode.communication())
