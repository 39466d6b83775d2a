"""Model profiles of PyTorch models: ``build_model_profile`` (one call) and ``TorchFlopsProfiler`` (a step).

Both count with ``PhaseCountingMode``, the counting engine's ``CountingMode`` (same formula
table, same module attribution, backward ops attributed to the module whose forward made
their autograd node) extended in three ways:

* every operator is filed under the phase it ran in, decided when it runs: ``backward`` when
  autograd is executing a node (``torch._C._current_autograd_node()``), ``forward`` inside a
  call of the model or one of its modules, ``optimizer`` inside ``Optimizer.step()`` (the global
  step pre/post hooks of ``torch.optim``), ``other`` otherwise (the loss, gradient clipping);
* each module keeps its figures per phase (so the tree shows forward and backward apart);
* operators run outside any module call are kept apart (``ModelProfile.outside``) instead of
  being added to the root module.

Timing: the root module's forward calls (``forward`` latency), each module's forward calls
(``module_latency=True``), each backward pass (from its first operator to the end-of-backward
callback of the autograd engine) and each optimizer step, with a device synchronisation at
both ends of every timed interval when the model is on an accelerator.

Nothing stays attached: module hooks, optimizer hooks and the dispatch mode are removed by
``stop_profile()``; no attribute is ever set on the model or its modules.
"""
from __future__ import annotations

import contextlib
import itertools
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import torch
from torch import nn
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _get_current_dispatch_mode

from deeplite_like.opcount import OpStats
from deeplite_like.profiling.build import ModuleRecord, build_profile
from deeplite_like.profiling.flops_profiler import FlopsProfiler
from deeplite_like.profiling.result import ModelProfile, PhaseStats

from .counting import formulas as _formulas  # noqa: F401  (importing the package fills the formula table)
from .counting.recorder import CountingMode, _Context
from .counting.registry import CountOptions
from .errors import BackwardError, ForwardError, UntrackedOpWarning
from .inputs import batch_size_of
from .params import parameter_stats
from .state import preserved_model_state

__all__ = ["FLOPS_PROFILER", "PhaseCountingMode", "TorchFlopsProfiler", "build_model_profile"]

_current_autograd_node = getattr(torch._C, "_current_autograd_node", lambda: None)


# -- synchronisation ------------------------------------------------------------------------
def _synchronizer(model: nn.Module) -> Callable[[], None] | None:
    """A function that waits for every CUDA device holding the model; None on CPU and meta."""
    devices = sorted({t.device.index or 0 for t in itertools.chain(model.parameters(), model.buffers())
                      if t.device.type == "cuda"})
    if not devices:
        return None

    def sync() -> None:
        for index in devices:
            torch.cuda.synchronize(index)

    return sync


def _device_name(model: nn.Module) -> str:
    devices = {str(t.device) for t in itertools.chain(model.parameters(), model.buffers())}
    if not devices:
        return "cpu"
    return devices.pop() if len(devices) == 1 else "several: " + ", ".join(sorted(devices))


# -- counting -------------------------------------------------------------------------------
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

    ``in_step`` is raised by the optimizer hooks. ``backward_s`` sums the wall time of the
    backward passes (first operator to the autograd engine's end-of-backward callback),
    synchronising with ``sync`` when given.
    """

    def __init__(self, sync: Callable[[], None] | None = None, time_backward: bool = True):
        super().__init__(CountOptions(), track_backward=True)
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
        self._sync = sync
        self._time_backward = time_backward
        self._backward_start: float | None = None

    def _current_phase(self) -> str:
        if _current_autograd_node() is not None:
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
            if self._sync is not None:
                self._sync()
            self._backward_start = time.perf_counter()

    def _end_backward(self) -> None:
        if self._backward_start is not None:
            if self._sync is not None:
                self._sync()
            self.backward_s += time.perf_counter() - self._backward_start
            self._backward_start = None
        self._refresh_phase()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._refresh_phase()
        return super().__torch_dispatch__(func, types, args, kwargs)


# -- timing ---------------------------------------------------------------------------------
class _ModuleTimer:
    """Forward wall time per module (or of the root only), and the batch size of the first call."""

    def __init__(self, named_modules: list[tuple[str, nn.Module]], per_module: bool,
                 sync: Callable[[], None] | None) -> None:
        self._modules = named_modules if per_module else named_modules[:1]
        self._sync = sync
        self._stack: list[tuple[nn.Module, float]] = []
        self._handles: list = []
        self.seconds: dict[str, float] = {}
        self.batch_size: int | None = None
        self._names: dict[int, str] = {}

    def attach(self) -> None:
        for name, module in self._modules:
            if isinstance(module, torch.jit.ScriptModule):
                continue
            self._names[id(module)] = name
            self._handles.append(module.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post, with_kwargs=True, always_call=True,
                                                              prepend=True))

    def detach(self) -> None:
        while self._handles:
            self._handles.pop().remove()
        self._stack.clear()

    def _pre(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        if _current_autograd_node() is not None:  # a forward re-run by checkpointing, inside backward
            return None
        if self.batch_size is None and not self._stack:
            self.batch_size = batch_size_of(args, kwargs)
        if self._sync is not None:
            self._sync()
        self._stack.append((module, time.perf_counter()))
        return None

    def _post(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if not self._stack or self._stack[-1][0] is not module:
            return None
        if self._sync is not None:
            self._sync()
        _, start = self._stack.pop()
        name = self._names[id(module)]
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        return None


class _StepTimer:
    """Marks optimizer steps for the mode (``in_step``) and times them, via torch.optim's global step hooks."""

    def __init__(self, mode: PhaseCountingMode | None, sync: Callable[[], None] | None) -> None:
        self._mode = mode
        self._sync = sync
        self._starts: list[float] = []
        self._handles: list = []
        self.seconds = 0.0

    def attach(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        self._handles = [register_optimizer_step_pre_hook(self._pre), register_optimizer_step_post_hook(self._post)]

    def detach(self) -> None:
        while self._handles:
            self._handles.pop().remove()
        if self._mode is not None:
            self._mode.in_step = 0

    def _pre(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        if self._sync is not None:
            self._sync()
        self._starts.append(time.perf_counter())
        if self._mode is not None:
            self._mode.in_step += 1

    def _post(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        if not self._starts:
            return
        if self._sync is not None:
            self._sync()
        self.seconds += time.perf_counter() - self._starts.pop()
        if self._mode is not None:
            self._mode.in_step = max(0, self._mode.in_step - 1)


# -- turning a run into a profile -----------------------------------------------------------
def _ignored_names(named_modules: list[tuple[str, nn.Module]], ignore: Iterable[Any]) -> set[str]:
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


def _module_params(named_modules: list[tuple[str, nn.Module]]) -> dict[str, int]:
    return {name: parameter_stats(module).total_params for name, module in named_modules}


def _records(named_modules: list[tuple[str, nn.Module]], params: dict[str, int], mode: PhaseCountingMode,
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


def _phase_totals(mode: PhaseCountingMode) -> dict[str, PhaseStats]:
    return {name: PhaseStats(s.macs, s.flops, s.calls) for name, s in mode.result.phases.items()
            if s.calls or name in ("forward", "backward")}


def _warn_untracked(untracked: Mapping[str, int]) -> None:
    if untracked:
        listing = ", ".join(f"{name} ({calls} call{'s' if calls != 1 else ''})"
                            for name, calls in sorted(untracked.items(), key=lambda kv: (-kv[1], kv[0])))
        warnings.warn(f"{len(untracked)} operator(s) ran with no FLOP formula and were counted as 0: {listing}. "
                      "Register a formula with deeplite_like.backends.torch.counting.register_formula, or mark "
                      "the op as free of arithmetic with register_free.", UntrackedOpWarning, stacklevel=3)


# -- the training-loop profiler -------------------------------------------------------------
class TorchFlopsProfiler(FlopsProfiler):
    """``FlopsProfiler`` of a ``torch.nn.Module``: counts and times what runs between start and stop.

    Between ``start_profile()`` and ``stop_profile()`` a counting dispatch mode is active on the
    calling thread: the forward, ``loss.backward()`` (on autograd's threads too) and
    ``optimizer.step()`` are counted operator by operator. Latencies are measured while
    counting, so they include the mode's per-operator overhead (a few microseconds of Python
    per operator); time un-profiled steps for clean numbers.
    """

    def __init__(self, model: nn.Module, *, model_parallel_size: int | None = None, process_group: Any = None,
                 module_latency: bool = True, ignore_modules: Iterable[Any] | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"TorchFlopsProfiler expects a torch.nn.Module, got {type(model).__name__}")
        super().__init__(model, model_parallel_size=model_parallel_size, process_group=process_group,
                         module_latency=module_latency, ignore_modules=ignore_modules)
        self._window: _Window | None = None

    def _parallel(self) -> tuple[int, int | None]:
        dist = torch.distributed
        initialized = dist.is_available() and dist.is_initialized()
        mp = self.model_parallel_size
        if mp is None and self.process_group is not None:
            if not initialized:
                raise RuntimeError("FlopsProfiler got a process_group but torch.distributed is not initialized; "
                                   "call torch.distributed.init_process_group first or pass model_parallel_size=")
            mp = dist.get_world_size(self.process_group)
        return mp or 1, (dist.get_world_size() if initialized else None)

    def _start(self, ignore: list[Any]) -> None:
        model = self.model
        named = list(model.named_modules())
        sync = _synchronizer(model)
        mp, world = self._parallel()
        mode = PhaseCountingMode(sync)
        stats = parameter_stats(model)
        window = _Window(named=named, mode=mode, timer=_ModuleTimer(named, self.module_latency, sync),
                         steps=_StepTimer(mode, sync), sync=sync, ignored=_ignored_names(named, ignore),
                         params=_module_params(named), total_params=stats.total_params,
                         trainable_params=stats.trainable_params, model_parallel_size=mp, world_size=world,
                         device=_device_name(model))
        try:
            mode.attach(named)
            window.timer.attach()
            window.steps.attach()
            if sync is not None:
                sync()
            window.start = time.perf_counter()
            mode.__enter__()
        except BaseException:
            window.detach()
            raise
        self._window = window

    def _stop(self) -> None:
        window = self._window
        if _get_current_dispatch_mode() is not window.mode:
            raise RuntimeError("stop_profile(): another TorchDispatchMode was entered after start_profile() and is "
                               "still active; exit it first, then call stop_profile()")
        try:
            window.mode.__exit__(None, None, None)
            if window.sync is not None:
                window.sync()
            window.end = time.perf_counter()
        finally:
            window.detach()
        window.mode.flush()
        _warn_untracked(window.mode.result.untracked)

    def _discard(self) -> None:
        self._window = None

    def _build(self, step: int | None) -> ModelProfile:
        window = self._window
        mode = window.mode
        mode.flush()  # (while still running: brings the figures up to now)
        end = window.end if window.end is not None else time.perf_counter()
        duration = end - window.start
        phases = _phase_totals(mode)
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
            _records(window.named, window.params, mode, window.timer.seconds if self.module_latency else None),
            phases=phases, by_operator=mode.result.by_operator, outside=mode.outside, excluded_names=window.ignored,
            params=window.total_params, trainable_params=window.trainable_params, duration_s=duration,
            batch_size=window.timer.batch_size, untracked=mode.result.untracked, module_latency=self.module_latency,
            device=window.device, model_parallel_size=window.model_parallel_size, world_size=window.world_size,
            step=step, notes=notes)


@dataclass
class _Window:
    """One profile of a ``TorchFlopsProfiler``: what is attached, and the facts taken at start."""

    named: list[tuple[str, nn.Module]]
    mode: PhaseCountingMode
    timer: _ModuleTimer
    steps: _StepTimer
    sync: Callable[[], None] | None
    ignored: set[str]
    params: dict[str, int]
    total_params: int
    trainable_params: int
    model_parallel_size: int
    world_size: int | None
    device: str
    start: float = 0.0
    end: float | None = None

    def detach(self) -> None:
        """Remove the module wrappers, the timing hooks and the optimizer hooks (safe to call twice)."""
        try:
            self.mode.detach()
        finally:
            self.timer.detach()
            self.steps.detach()


FLOPS_PROFILER = TorchFlopsProfiler


# -- one call: get_model_profile ------------------------------------------------------------
class _EntryPoint(nn.Module):
    """Calls ``model.<func_name>`` so that ``functional_call`` can run any entry point on meta tensors."""

    def __init__(self, model: nn.Module, func_name: str, mode: PhaseCountingMode | None) -> None:
        super().__init__()
        self.model = model
        self.func_name = func_name
        self.mode = mode

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self.model, self.func_name, args, kwargs, self.mode)


def _call(model: nn.Module, func_name: str, args: tuple, kwargs: dict, mode: PhaseCountingMode | None = None) -> Any:
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
        return mode._call(model, entry, args, kwargs)
    finally:
        root = mode.result.by_module.get("")
        if root is not None and root.calls:
            root.calls -= 1


def _check_entry(model: nn.Module, func_name: str) -> None:
    entry = getattr(model, func_name, None)
    if not callable(entry):
        public = sorted(n for n in dir(type(model)) if not n.startswith("_") and callable(getattr(type(model), n, None))
                        and n not in dir(nn.Module))
        raise AttributeError(f"{type(model).__name__} has no method {func_name!r} to profile (func_name); "
                             f"its own methods are {public or ['forward']}")


def _first_leaf(named_modules: list[tuple[str, nn.Module]]) -> tuple[str, nn.Module] | None:
    for name, module in named_modules:
        if not list(module.children()) and any(True for _ in module.parameters(recurse=False)):
            return name, module
    return None


def _inputs(model: nn.Module, input_shape: Sequence[int] | None, args: Any, kwargs: Any,
            on_meta: bool) -> tuple[tuple, dict, bool]:
    """``(args, kwargs, built)``: the call's inputs; ``built`` when made from ``input_shape``."""
    if input_shape is not None and (args is not None or kwargs is not None):
        raise ValueError("pass either input_shape=... (one float tensor) or args=/kwargs=, not both")
    if input_shape is None:
        if args is None and kwargs is None:
            raise ValueError(f"get_model_profile needs the inputs of {type(model).__name__}: input_shape=(batch, ...) "
                             "for a model that takes one float tensor, or args=(...)/kwargs={...} otherwise")
        if isinstance(args, torch.Tensor):
            args = (args,)
        return tuple(args or ()), dict(kwargs or {}), False
    try:
        shape = tuple(int(d) for d in input_shape)
    except (TypeError, ValueError):
        raise ValueError(f"input_shape must be a sequence of ints (batch dimension included), got {input_shape!r}") \
            from None
    leaf = _first_leaf(list(model.named_modules()))
    if leaf is not None and isinstance(leaf[1], (nn.Embedding, nn.EmbeddingBag)):
        raise ValueError(f"input_shape builds a float tensor, but the first layer of {type(model).__name__}, "
                         f"{leaf[0]!r} ({type(leaf[1]).__name__}), takes integer ids: pass the inputs instead, e.g. "
                         f"args=(torch.randint(0, {leaf[1].num_embeddings}, {shape}),)")
    floats = [p for p in itertools.chain(model.parameters(), model.buffers()) if p.is_floating_point()]
    if any(not p.is_floating_point() for p in model.parameters()) and not floats:
        raise ValueError(f"input_shape builds a float tensor, but {type(model).__name__} has no floating-point "
                         "parameters (quantized or integer model?): pass args=/kwargs= with the inputs it takes")
    dtype = floats[0].dtype if floats else torch.get_default_dtype()
    if on_meta:
        return (torch.empty(shape, dtype=dtype, device="meta"),), {}, True
    device = floats[0].device if floats else torch.device("cpu")
    generator = torch.Generator(device).manual_seed(0)  # its own generator: the global one is left as found
    return (torch.randn(shape, dtype=dtype, device=device, generator=generator),), {}, True


def _meta_like(tensor: torch.Tensor) -> torch.Tensor:
    meta = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device="meta")
    return meta.requires_grad_(True) if tensor.requires_grad else meta


def _fresh_leaf(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().requires_grad_(True) if tensor.requires_grad else tensor


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [leaf for leaf in pytree.tree_leaves(tree) if isinstance(leaf, torch.Tensor)]


def _loss(output: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    if loss_fn is not None:
        try:
            loss = loss_fn(output)
        except Exception as exc:
            raise BackwardError(f"loss_fn raised on the model output: {type(exc).__name__}: {exc}") from exc
    else:
        outputs = [t for t in _tensors(output if not isinstance(output, Mapping) else list(output.values()))
                   if t.is_floating_point() and t.requires_grad]
        if not outputs:
            raise BackwardError(f"backward=True: the output ({type(output).__name__}) has no floating-point tensor "
                                "that requires grad; pass loss_fn=... returning a scalar to differentiate")
        loss = outputs[0].sum()
        for tensor in outputs[1:]:
            loss = loss + tensor.sum()
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad):
        raise BackwardError("backward=True: the loss must be a one-element tensor that requires grad; check loss_fn")
    return loss


def _forward_error(model: nn.Module, exc: Exception, mode: PhaseCountingMode, built: bool,
                   func_name: str) -> ForwardError:
    frame, seen, cause = None, set(), exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        frame = mode.failures.get(cause, frame)
        cause = cause.__cause__ or cause.__context__
    where = ("outside any module call" if frame is None else
             f"in {'the root module' if frame.name == '' else repr(frame.name)} ({type(frame.module).__name__})")
    hint = (" The input was one float tensor built from input_shape: a model that takes integer ids or several "
            "inputs needs args=/kwargs=." if built else "")
    return ForwardError(f"{type(model).__name__}.{func_name} failed {where}: {type(exc).__name__}: {exc}.{hint}")


class _Run:
    """Runs the entry point (and its backward) on the real model or, for meta, on meta copies."""

    def __init__(self, model: nn.Module, func_name: str, args: tuple, kwargs: dict, backward: bool,
                 on_meta: bool, loss_fn: Callable | None) -> None:
        self.model, self.func_name, self.loss_fn = model, func_name, loss_fn
        self.backward, self.on_meta = backward, on_meta
        self.state: dict[str, torch.Tensor] = {}
        if on_meta:
            self.state = {f"model.{name}": _meta_like(t) for name, t in
                          itertools.chain(model.named_parameters(), model.named_buffers()) if not t.is_meta}
            args, kwargs = pytree.tree_map_only(torch.Tensor, _meta_like, (args, kwargs))
        if backward:  # fresh leaves: backward stops at the inputs; the caller's tensors get no .grad
            args, kwargs = pytree.tree_map_only(torch.Tensor, _fresh_leaf, (args, kwargs))
        self.args, self.kwargs = args, kwargs
        self.mode: PhaseCountingMode | None = None  # set for the counted call

    def forward(self) -> Any:
        with torch.enable_grad() if self.backward else torch.no_grad():
            if self.on_meta:
                with torch.device("meta"):
                    return torch.func.functional_call(_EntryPoint(self.model, self.func_name, self.mode), self.state,
                                                      self.args, self.kwargs, tie_weights=True, strict=False)
            return _call(self.model, self.func_name, self.args, self.kwargs, self.mode)

    def loss(self, output: Any) -> torch.Tensor:
        with torch.enable_grad():
            return _loss(output, self.loss_fn)

    def run_backward(self, loss: torch.Tensor) -> None:
        params = [self.state.get(f"model.{name}", p) for name, p in self.model.named_parameters()]
        leaves = [p for p in params if p.requires_grad]
        leaves += [t for t in _tensors((self.args, self.kwargs)) if t.requires_grad and t.is_leaf]
        for p in self.model.parameters():
            p.grad = None
        try:
            torch.autograd.backward(loss, inputs=leaves or None)
        except Exception as exc:
            raise BackwardError(f"the backward pass of {type(self.model).__name__} failed: "
                                f"{type(exc).__name__}: {exc}") from exc


def _timed(fn: Callable[[], Any], sync: Callable[[], None] | None) -> tuple[Any, float]:
    if sync is not None:
        sync()
    start = time.perf_counter()
    out = fn()
    if sync is not None:
        sync()
    return out, time.perf_counter() - start


@contextlib.contextmanager
def _rng_kept(model: nn.Module) -> Iterator[None]:
    """Leave the CPU and CUDA random generators as found (dropout draws numbers while profiling)."""
    cuda = sorted({t.device.index or 0 for t in model.parameters() if t.device.type == "cuda"})
    with torch.random.fork_rng(devices=cuda):
        yield


def build_model_profile(model: nn.Module, *, input_shape: Sequence[int] | None = None, args: Any = None,
                        kwargs: Mapping[str, Any] | None = None, warm_up: int = 1,
                        ignore_modules: Iterable[Any] | None = None, func_name: str = "forward",
                        backward: bool = False, meta: bool = False, module_latency: bool = True,
                        loss_fn: Callable[[Any], torch.Tensor] | None = None) -> ModelProfile:
    """The ``ModelProfile`` of one call of ``model.<func_name>`` (``get_model_profile``'s torch side).

    One counted call (under ``torch.no_grad()`` unless ``backward``), then, on real tensors,
    ``warm_up`` untimed calls, one timed call (forward latency; with ``backward`` the loss and
    backward are timed too), and with ``module_latency`` one more call timing each module
    (synchronising around each on CUDA). The model is left as found: mode, parameters,
    buffers (running statistics), gradients, hooks, and the random generators.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"build_model_profile expects a torch.nn.Module, got {type(model).__name__}")
    _check_entry(model, func_name)
    named = list(model.named_modules())
    on_meta = bool(meta) or any(t.is_meta for t in itertools.chain(model.parameters(), model.buffers()))
    args, kwargs, built = _inputs(model, input_shape, args, kwargs, on_meta)
    if backward and not any(p.requires_grad for p in model.parameters()) \
            and not any(t.requires_grad for t in _tensors((args, kwargs))):
        raise ValueError(f"backward=True needs something to differentiate, but no input requires grad and "
                         f"{type(model).__name__} has no trainable parameter")
    sync = None if on_meta else _synchronizer(model)
    stats = parameter_stats(model)
    params = _module_params(named)
    timings: dict[str, float] = {}
    module_seconds: dict[str, float] | None = None

    with preserved_model_state(model, restore_buffer_values=True), _rng_kept(model):
        run = _Run(model, func_name, args, kwargs, backward, on_meta, loss_fn)
        mode = PhaseCountingMode(time_backward=False)
        mode.watch([p for p in model.parameters()])  # a forward that writes its weights is undone below
        run.mode = mode
        try:
            mode.attach(named)
            with mode:
                try:
                    output = run.forward()
                except Exception as exc:
                    raise _forward_error(model, exc, mode, built, func_name) from exc
                if backward:
                    run.run_backward(run.loss(output))
        finally:
            run.mode = None
            mode.detach()
            mode.restore_mutated()
        mode.flush()
        del output
        if not on_meta:
            for _ in range(warm_up):
                out = run.forward()
                if backward:
                    run.run_backward(run.loss(out))
            out, timings["forward"] = _timed(run.forward, sync)
            if backward:
                loss, timings["other"] = _timed(lambda: run.loss(out), sync)
                _, timings["backward"] = _timed(lambda: run.run_backward(loss), sync)
            del out
            if module_latency:
                timer = _ModuleTimer(named, True, sync)
                timer.attach()
                try:
                    run.forward()
                finally:
                    timer.detach()
                module_seconds = timer.seconds

    phases = _phase_totals(mode)
    for name, seconds in timings.items():
        if name in phases:
            phases[name].latency_s = seconds
    notes = []
    if on_meta:
        notes.append("Counted on the meta device: nothing ran for real, so nothing was timed.")
    else:
        notes.append(f"Latency: one call timed after {warm_up} warm-up call(s), without counting"
                     + ("; per-module latency from one more call with a hook around each module." if module_latency
                        else "."))
    if func_name != "forward":
        notes.append(f"Profiled entry point: {type(model).__name__}.{func_name}, counted as a call of the model: "
                     "operators it ran outside the model's own calls are the root's own operators.")
    if not backward:
        notes.append("Counted under torch.no_grad() (inference).")
    _warn_untracked(mode.result.untracked)
    return build_profile(
        type(model).__name__, "torch", _records(named, params, mode, module_seconds if module_latency and not on_meta
                                                else None),
        phases=phases, by_operator=mode.result.by_operator, outside=mode.outside,
        excluded_names=_ignored_names(named, ignore_modules or ()), params=stats.total_params,
        trainable_params=stats.trainable_params,
        duration_s=sum(timings.values()) if timings else None, batch_size=batch_size_of(args, kwargs),
        untracked=mode.result.untracked, module_latency=bool(module_latency) and not on_meta,
        device="meta" if on_meta else _device_name(model), notes=notes)
