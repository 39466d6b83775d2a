"""The DeepSpeed-style profiles of a PyTorch model: one call (``build_model_profile``) and a training step.

Both (``build_model_profile`` and ``TorchFlopsProfiler``, the training step's) build their
``ModelProfile`` from the same parts of a counted run: module records (``module_records``) and
phase totals (``phase_totals``). Nothing stays attached: hooks, optimizer
hooks and the dispatch mode are removed when a profile ends; no attribute is ever set on the
model or its modules, so a copy (``copy.deepcopy``: an EMA, a best-model snapshot) or a
``torch.save`` made while profiling is a plain copy of the user's model, which is left as found.
"""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

from deeplite_like.backends.torch.counting.engine import (backward_pass, grad_inputs, non_leaf_inputs, to_meta,
                                                          warn_if_untracked)
from deeplite_like.backends.torch.counting.meta import MetaValues
from deeplite_like.backends.torch.inputs import fixed_batch_hint, profile_inputs
from deeplite_like.backends.torch.latency import (ModuleTimer, PhaseCountingMode, StepTimer, device_name, no_sync,
                                                  synchronizer)
from deeplite_like.backends.torch.params import module_param_counts, parameter_stats
from deeplite_like.backends.torch.state import preserved_model_state, swapped_tensors
from deeplite_like.backends.torch.tensors import batch_size_of, loss_of, tensors_in
from deeplite_like.errors import ForwardError
from deeplite_like.profiling.flops_profiler import FlopsProfiler
from deeplite_like.profiling.result import ModelProfile, ModuleRecord, PhaseStats, build_profile

__all__ = ["FLOPS_PROFILER", "PhaseCountingMode", "ProfileRun", "TorchFlopsProfiler", "build_model_profile",
           "call_entry", "check_entry", "forward_error", "ignored_names", "module_params", "module_records",
           "phase_totals", "timed"]


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

    ``build_model_profile`` is ``get_model_profile``'s torch side: the ``ModelProfile`` of one call of
    the profiled entry point (``forward``, or any method named by ``func_name``, counted as the
    model's call) and optionally its backward, counted with ``latency.PhaseCountingMode`` on the real
    model or on meta copies (``ProfileRun``), then, on real tensors, timed without counting. A
    failing forward raises a ``ForwardError`` that says where it failed.
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


# -- the entry point ------------------------------------------------------------------------------
def call_entry(model: nn.Module, func_name: str, args: tuple, kwargs: dict,
               mode: PhaseCountingMode | None = None) -> Any:
    """``model(...)`` for ``forward``; else ``model.<func_name>(...)``, counted as a call of the root module.

    Counted as the root's call (``CountingMode._call``), an entry point such as ``generate`` is part
    of the model: the root includes every operator it runs, also those outside ``self(...)`` (token
    sampling), which show as the root's own operators. Its own call is not counted as a forward
    call (``calls`` stays the number of ``model(...)`` calls).
    """
    if func_name == "forward":
        return model(*args, **kwargs)  # through __call__, so the root's hooks run
    entry = getattr(model, func_name)
    if mode is None:
        return entry(*args, **kwargs)
    try:
        return mode._call(model, entry, args, kwargs, name=mode.attached_name(model))
    finally:
        root = mode.result.by_module.get("")
        if root is not None and root.calls:
            root.calls -= 1


def check_entry(model: nn.Module, func_name: str) -> None:
    entry = getattr(model, func_name, None)
    if not callable(entry):
        public = sorted(n for n in dir(type(model)) if not n.startswith("_") and callable(getattr(type(model), n, None))
                        and n not in dir(nn.Module))
        raise AttributeError(f"{type(model).__name__} has no method {func_name!r} to profile (func_name); "
                             f"its own methods are {public or ['forward']}")


# -- one counted run ------------------------------------------------------------------------------
def forward_error(model: nn.Module, exc: Exception, mode: PhaseCountingMode, built: bool,
                   func_name: str) -> ForwardError:
    frame = mode.failed_frame(exc)
    where = ("outside any module call" if frame is None else
             f"in {'the root module' if frame.name == '' else repr(frame.name)} ({type(frame.module).__name__})")
    hint = (" The input was one float tensor built from input_shape: a model that takes integer ids or several "
            "inputs needs args=/kwargs=." if built else "")
    hint = fixed_batch_hint(exc, mode.result.batch_size) or hint
    return ForwardError(f"{type(model).__name__}.{func_name} failed {where}: {type(exc).__name__}: {exc}.{hint}")


class ProfileRun:
    """Runs the entry point (and its backward) on the real model or, for meta, on meta copies."""

    def __init__(self, model: nn.Module, func_name: str, args: tuple, kwargs: dict, backward: bool,
                 on_meta: bool, loss_fn: Callable | None, values: MetaValues | None = None) -> None:
        self.model, self.func_name, self.loss_fn = model, func_name, loss_fn
        self.backward, self.on_meta = backward, on_meta
        self.copies: dict[int, torch.Tensor] = {}  # on meta: id(original) -> meta copy (``swapped_tensors``)
        non_leaves = non_leaf_inputs(args, kwargs)
        if on_meta:
            _, self.copies, args, kwargs = to_meta(model, args, kwargs, values)
        self.input_leaves: list[torch.Tensor] = []
        if backward:  # fresh leaves: backward stops at the inputs; the caller's tensors get no .grad
            args, kwargs, self.input_leaves = grad_inputs(args, kwargs, non_leaves)
        self.args, self.kwargs = args, kwargs
        self.mode: PhaseCountingMode | None = None  # set for the counted call

    def forward(self) -> Any:
        with torch.enable_grad() if self.backward else torch.no_grad():
            if self.on_meta:
                with swapped_tensors(self.model, self.copies):  # (factories make meta tensors: MetaValues)
                    return call_entry(self.model, self.func_name, self.args, self.kwargs, self.mode)
            return call_entry(self.model, self.func_name, self.args, self.kwargs, self.mode)

    def loss(self, output: Any) -> torch.Tensor:
        with torch.enable_grad():
            return loss_of(output, self.loss_fn)

    def run_backward(self, loss: torch.Tensor) -> None:
        params = [self.copies.get(id(p), p) for p in self.model.parameters()]
        leaves = [p for p in params if p.requires_grad] + self.input_leaves
        for p in self.model.parameters():
            p.grad = None
        backward_pass(loss, leaves, f"the backward pass of {type(self.model).__name__} failed")


def timed(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[Any, float]:
    sync()
    start = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - start


# -- a counted run -> the parts of a ModelProfile -------------------------------------------------
def ignored_names(named_modules: list[tuple[str, nn.Module]], ignore: Iterable[Any]) -> set[str]:
    """Qualified names of modules whose type is listed (classes match subclasses; strings match names)."""
    classes, names = [], set()
    for item in ignore:
        if isinstance(item, type) and issubclass(item, nn.Module):
            classes.append(item)
        elif isinstance(item, str):
            names.add(item)
        else:
            raise TypeError(f"ignore_modules takes torch.nn.Module classes or class names, got {item!r}")
    classes_t = tuple(classes)
    return {name for name, module in named_modules
            if (classes_t and isinstance(module, classes_t)) or type(module).__name__ in names
            or f"{type(module).__module__}.{type(module).__qualname__}" in names}


def _parent(name: str, known: set[str]) -> str | None:
    if name == "":
        return None
    parent = name.rpartition(".")[0]
    while parent and parent not in known:
        parent = parent.rpartition(".")[0]
    return parent


def module_params(named_modules: list[tuple[str, nn.Module]]) -> dict[str, int]:
    """Parameters of each listed module's subtree (``named_modules`` is ``model.named_modules()``), in one pass."""
    if not named_modules:
        return {}
    counts = module_param_counts(named_modules[0][1])
    return {name: counts[name] for name, _ in named_modules}


def module_records(named_modules: list[tuple[str, nn.Module]], params: dict[str, int], mode: PhaseCountingMode,
             latency: dict[str, float] | None) -> list[ModuleRecord]:
    known = {name for name, _ in named_modules}
    result = mode.result
    records = []
    for name, module in named_modules:
        stats = result.by_module.get(name)
        records.append(ModuleRecord(
            name=name, type=type(module).__name__, parent=_parent(name, known), extra_repr=module.extra_repr(),
            params=params.get(name, 0), calls=stats.calls if stats is not None else 0,
            phases=dict(mode.module_phases.get(name, {})), ops=dict(result.module_ops.get(name, {})),
            latency_s=None if latency is None else latency.get(name)))
    return records


def phase_totals(mode: PhaseCountingMode) -> dict[str, PhaseStats]:
    return {name: PhaseStats(s.macs, s.flops, s.calls) for name, s in mode.result.phases.items()
            if s.calls or name in ("forward", "backward")}


# -- a training step between start_profile() and stop_profile() (``FlopsProfiler``) ----------
class TorchFlopsProfiler(FlopsProfiler):
    """``FlopsProfiler`` of a ``torch.nn.Module``: counts and times what runs between start and stop.

    Between ``start_profile()`` and ``stop_profile()`` a counting dispatch mode is active on the
    calling thread: the forward, ``loss.backward()`` (on autograd's threads too) and
    ``optimizer.step()`` are counted operator by operator. Latencies are measured while
    counting, so they include the mode's per-operator overhead (a few microseconds of Python
    per operator); time un-profiled steps for clean numbers.

    Threads: a dispatch mode belongs to the thread that entered it, and only that thread can exit
    it. ``stop_profile()`` (and ``end_profile()``) from another thread is therefore refused with an
    error that names both threads, and the profile keeps running, whole, until it is stopped from
    the thread that started it; if that thread has ended, its dispatch mode ended with it, and any
    thread may stop the profile (everything else is removed, the figures stay readable).

    ``TorchFlopsProfiler`` (``FLOPS_PROFILER``) is the core ``FlopsProfiler`` (DeepSpeed's API) around
    a training step: between ``start_profile()`` and ``stop_profile()`` the forward, the backward and
    the optimizer step are counted operator by operator and timed (``latency.ModuleTimer``,
    ``latency.StepTimer``).
    """

    def __init__(self, model: nn.Module, ds_engine: Any = None, recompute_fwd_factor: float = 0.0, *,
                 model_parallel_size: int | None = None, process_group: Any = None,
                 module_latency: bool = True, ignore_modules: Iterable[Any] | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"TorchFlopsProfiler expects a torch.nn.Module, got {type(model).__name__}")
        super().__init__(model, ds_engine, recompute_fwd_factor, model_parallel_size=model_parallel_size,
                         process_group=process_group,
                         module_latency=module_latency, ignore_modules=ignore_modules)
        self._window: _Window | None = None

    def _parallel(self) -> tuple[int, int | None]:
        dist = torch.distributed
        initialized = dist.is_available() and dist.is_initialized()
        mp = self._model_parallel_size()
        if mp is None and self.process_group is not None:
            if not initialized:
                raise RuntimeError("FlopsProfiler got a process_group but torch.distributed is not initialized; "
                                   "call torch.distributed.init_process_group first or pass model_parallel_size=")
            mp = dist.get_world_size(self.process_group)
        return mp or 1, (dist.get_world_size() if initialized else None)

    def _start(self, ignore: list[Any]) -> None:
        model = self.model
        named = list(model.named_modules())
        sync = synchronizer(model)
        mp, world = self._parallel()
        mode = PhaseCountingMode(sync)
        stats = parameter_stats(model)
        window = _Window(named=named, mode=mode, timer=ModuleTimer(named, self.module_latency, sync),
                         steps=StepTimer(mode, sync), sync=sync, ignored=ignored_names(named, ignore),
                         params=module_params(named), total_params=stats.total_params,
                         trainable_params=stats.trainable_params, model_parallel_size=mp, world_size=world,
                         device=device_name(model), thread=threading.current_thread())
        try:
            mode.attach(named)
            window.timer.attach()
            window.steps.attach()
            sync()
            window.start = time.perf_counter()
            mode.__enter__()
        except BaseException:
            window.detach()
            raise
        self._window = window

    def _stop(self) -> None:
        window = self._window
        here, owner = threading.current_thread(), window.thread
        in_owner = here is owner
        if not in_owner and owner.is_alive():
            raise RuntimeError(f"stop_profile() was called in thread {here.name!r}, but start_profile() ran in thread "
                               f"{owner.name!r}, which is still running: the counting dispatch mode is per thread and "
                               f"only {owner.name!r} can exit it. Call stop_profile() (or end_profile()) in "
                               f"{owner.name!r}; the profile keeps running until then.")
        if in_owner and _get_current_dispatch_mode() is not window.mode:
            raise RuntimeError("stop_profile(): another TorchDispatchMode was entered after start_profile() and is "
                               "still active; exit it first, then call stop_profile()")
        try:
            if in_owner:  # (a thread that has ended took its dispatch modes with it)
                window.mode.__exit__(None, None, None)
            window.sync()
            window.end = time.perf_counter()
        finally:
            window.detach()
        window.mode.flush()
        warn_if_untracked(window.mode.result.untracked, stacklevel=2)

    def _discard(self) -> None:
        self._window = None

    def _build(self, step: int | None) -> ModelProfile:
        window = self._window
        mode = window.mode
        mode.flush()  # (while still running: brings the figures up to now)
        end = window.end if window.end is not None else time.perf_counter()
        duration = end - window.start
        phases = phase_totals(mode)
        latencies = {"forward": window.timer.seconds.get(""), "backward": mode.backward_s,
                     "optimizer": window.steps.seconds}
        for name, seconds in latencies.items():
            if name in phases:
                phases[name].latency_s = seconds
        if "other" in phases:
            phases["other"].latency_s = max(0.0, duration - sum(phases[name].latency_s or 0.0
                                                                for name in latencies if name in phases))
        notes = ["Latencies were measured while counting: every operator also passes through the counting "
                 "dispatch mode, which adds CPU time; 'other' latency is the rest of the window."]
        return build_profile(
            type(self.model).__name__, "torch",
            module_records(window.named, window.params, mode, window.timer.seconds if self.module_latency else None),
            phases=phases, by_operator=mode.result.by_operator, outside=mode.outside, excluded_names=window.ignored,
            params=window.total_params, trainable_params=window.trainable_params, duration_s=duration,
            batch_size=window.timer.batch_size, untracked=mode.result.untracked, module_latency=self.module_latency,
            device=window.device, model_parallel_size=window.model_parallel_size, world_size=window.world_size,
            step=step, notes=notes, communication=mode.communication())


@dataclass
class _Window:
    """One profile of a ``TorchFlopsProfiler``: what is attached, and the facts taken at start."""

    named: list[tuple[str, nn.Module]]
    mode: PhaseCountingMode
    timer: ModuleTimer
    steps: StepTimer
    sync: Callable[[], None]
    ignored: set[str]
    params: dict[str, int]
    total_params: int
    trainable_params: int
    model_parallel_size: int
    world_size: int | None
    device: str
    thread: threading.Thread
    start: float = 0.0
    end: float | None = None

    def detach(self) -> None:
        """Remove the module hooks, the timing hooks and the optimizer hooks (safe to call twice)."""
        try:
            self.mode.detach()
        finally:
            self.timer.detach()
            self.steps.detach()


FLOPS_PROFILER = TorchFlopsProfiler
