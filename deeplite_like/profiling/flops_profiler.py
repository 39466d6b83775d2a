"""The two DeepSpeed entry points, for any backend: ``get_model_profile`` (one call of a model) and
``FlopsProfiler`` (a real training step: forward, backward, optimizer step), as DeepSpeed's
``flops_profiler.profiler`` module holds them.

``get_model_profile``'s arguments are checked before anything runs: each check names the argument,
the value given and what is accepted, so that a wrong ``module_depth="2"`` fails at once instead of
after a profile, or not at all. The backend's profile module is found from its ``Backend`` record
(``deeplite_like.backends``) and imported only then.

``FlopsProfiler`` holds what both backends share: the start/stop/end life cycle, the DeepSpeed-style
getters and ``print_model_profile``. ``FlopsProfiler(model)`` returns the profiler of the
model's backend (``TorchFlopsProfiler``, ``KerasFlopsProfiler``: subclasses of this one). A
backend implements ``_start``, ``_stop``, ``_discard`` and ``_build``.

Differences from DeepSpeed's ``FlopsProfiler``, on purpose:

* everything that runs between ``start_profile()`` and ``stop_profile()`` is counted, phase by
  phase (``forward``, ``backward``, ``optimizer``, ``other``): the backward pass is measured,
  not estimated as 2x the forward. ``get_total_flops()`` is the sum of every phase;
  ``get_total_flops(phase="forward")`` is DeepSpeed's figure.
* ``get_total_duration()`` is the wall time between start and stop (``phase=`` for one phase).
* nothing is stored on the model: ``stop_profile()`` removes every hook, ``end_profile()``
  drops the figures, and ``start_profile()`` can be called again for a later step.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

import deeplite_like.profiling.views as views
from deeplite_like.backends import backend_for
from deeplite_like.errors import NotProvidedError, called_as, check_flag
from deeplite_like.profiling.result import PHASES, ModelProfile, is_int, check_view_options

def get_model_profile(model: Any, input_shape: Sequence[int] | None = None, args: Sequence[Any] | None = None,
                      kwargs: Mapping[str, Any] | None = None, print_profile: bool = True, detailed: bool = True,
                      module_depth: int = -1, top_modules: int = 3, warm_up: int = 1, as_string: bool | None = None,
                      output_file: str | os.PathLike | None = None, ignore_modules: Iterable[Any] | None = None,
                      func_name: str = "forward", backward: bool = False, meta: bool = False, *,
                      module_latency: bool = True, loss_fn: Any = None, mode: str | None = None) -> ModelProfile:
    """Profile one call of ``model``: totals, phases and the per-module tree (a ``ModelProfile``).

    The backend is picked from the model's type (a torch module or a Keras model). The model is
    left as found (mode, parameters, buffers, gradients, hooks).

    Args:
        model: the model.
        input_shape: the shape of one floating-point input tensor, batch dimension included
            (``(8, 3, 224, 224)``). Only for models that take one float tensor: a model that takes
            integer ids or several inputs gets them through ``args``/``kwargs``.
        args, kwargs: the inputs of the call (instead of ``input_shape``).
        print_profile: print the report (or write it to ``output_file``).
        detailed: include the module tree in the printed report.
        module_depth: deepest depth shown in the tree and the aggregated view (-1: all).
        top_modules: how many module types per depth the aggregated view ranks.
        warm_up: calls before the timed ones, untimed (PyTorch: the counted call is the first of
            them: the default profile runs the model three times, counted, timed, timed per module).
        as_string: write figures with SI prefixes (``1.23 GFLOPs``) rather than raw numbers (the
            default); given ``True`` explicitly, the result also unpacks as DeepSpeed's three strings.
        output_file: write the report there (``.json``: JSON, ``.html``: HTML, else text).
        ignore_modules: module types (classes, or class names) whose cost is excluded from the
            totals and listed as excluded.
        func_name: the entry point to profile (``"forward"``; ``"generate"`` for a text model).
        backward: also run and count the backward pass of the output (summed, or ``loss_fn(out)``).
        meta: count without running real arithmetic (torch: on the meta device); no latency.
        module_latency: time each module's forward (on CUDA with a synchronisation around each).
        loss_fn: ``loss_fn(output) -> scalar`` for ``backward=True``.
        mode: DeepSpeed's name for ``func_name`` (``mode='generate'``); give one of the two.

    Every argument is checked before the model runs: a wrong type or value is a ``TypeError`` /
    ``ValueError`` naming the argument. A failing forward raises, as DeepSpeed's does, the model's
    own exception (PyTorch), with a note naming the module that failed and the inputs it got; a
    Keras model's is a ``deeplite_like.ForwardError`` naming the layer, the original its cause.

    Returns:
        The ``ModelProfile``: ``.params``, ``.macs``, ``.flops``, ``.forward_latency_s``,
        ``.forward_flops_per_s``, ``.phases``, ``.root`` (the tree), ``.aggregated()``,
        ``.to_dict()``, ``.to_text()``, ``.save(path)``. It unpacks as DeepSpeed's tuple:
        ``flops, macs, params = get_model_profile(...)`` (raw ints; strings with ``as_string=True``).
    """
    if mode is not None:
        if func_name not in ("forward", mode):
            raise ValueError(f"get_model_profile got func_name={func_name!r} and mode={mode!r}; they name the same "
                             "thing (the method to profile): give one of them")
        func_name = mode
    if not isinstance(warm_up, int) or isinstance(warm_up, bool) or warm_up < 0:
        raise ValueError(f"warm_up must be a non-negative int, got {warm_up!r}")
    for name, value in (("print_profile", print_profile), ("detailed", detailed), ("backward", backward),
                        ("meta", meta), ("module_latency", module_latency)):
        check_flag(value, name, "get_model_profile")
    if as_string is not None:  # (None: not given, raw ints back and a formatted report)
        check_flag(as_string, "as_string", "get_model_profile")
    check_view_options(module_depth, top_modules)
    input_shape = check_input_shape(input_shape)
    with called_as("get_model_profile"):
        profile = profile_module(model).build_model_profile(
            model, input_shape=input_shape, args=args, kwargs=kwargs, warm_up=warm_up, ignore_modules=ignore_modules,
            func_name=func_name, backward=backward, meta=meta, module_latency=module_latency, loss_fn=loss_fn)
    profile.strings = as_string is True
    as_string = as_string is not False
    if output_file is not None:
        profile.save(output_file, module_depth, top_modules, detailed, as_string)
    elif print_profile:
        print(profile.to_text(module_depth, top_modules, detailed, as_string))
    return profile


_EXAMPLE_SHAPE = "input_shape=(8, 3, 224, 224)"


def check_input_shape(input_shape: Any) -> tuple[int, ...] | None:
    """``input_shape`` as a tuple of ints >= 1 (batch dimension included), or ``None`` when not given."""
    if input_shape is None:
        return None
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__iter__"):
        raise TypeError(f"input_shape must be a sequence of ints, batch dimension included ({_EXAMPLE_SHAPE}), got "
                        f"{type(input_shape).__name__} {input_shape!r}")
    shape = tuple(input_shape)
    if not shape:
        raise ValueError(f"input_shape=() has no dimension; give the batch dimension first ({_EXAMPLE_SHAPE})")
    for position, dim in enumerate(shape):
        if dim is None or (is_int(dim) and dim == -1):
            fixed = tuple(1 if d is None or (is_int(d) and d == -1) else d for d in shape)
            raise ValueError(f"input_shape={shape!r}: dimension {position} is {dim!r}, but a profile runs one real call "
                             f"on a tensor of exactly that shape: give every size, the batch too, e.g. "
                             f"input_shape={fixed!r}")
        if not is_int(dim) or dim < 1:
            raise ValueError(f"input_shape={shape!r}: dimension {position} is {dim!r}; every dimension must be an "
                             f"int >= 1, batch dimension included ({_EXAMPLE_SHAPE})")
    return tuple(int(d) for d in shape)


def profile_module(model: Any) -> Any:
    """The profile module of the backend that handles ``model`` (a Keras model is checked first)."""
    return backend_for(model).load_profile()


_IDLE, _RUNNING, _STOPPED = "idle", "running", "stopped"

# DeepSpeed's module-level stacks of per-module counts (``module_flop_count``, ``module_mac_count``),
# which its profiler pushes and pops during a forward and which its tests check are left as
# found. Counting here keeps no global state, so they are always empty: code that reads or
# trims them (DeepSpeed's test_profile_cleanup) finds depth 0.
module_flop_count: list[list[Any]] = []
module_mac_count: list[list[Any]] = []


class FlopsProfiler:
    """Count and time what runs between ``start_profile()`` and ``stop_profile()``.

    Args:
        model: a ``torch.nn.Module`` or a Keras model; ``FlopsProfiler(model)`` picks the backend.
        ds_engine: DeepSpeed's (and cli99's) second argument: the engine that runs the model, or
            any object with its attributes. When given, ``print_model_profile`` starts with its
            world size, data parallel size (``seq_dp_world_size`` when ``dp_world_size`` is
            None), model parallel size and batch size per GPU, and, when its
            ``wall_clock_breakdown()`` is true, its forward / backward / step timers; its
            ``mp_world_size`` is the model parallel size unless ``model_parallel_size`` is given.
        recompute_fwd_factor: DeepSpeed's third argument: the share of the forward recomputed in
            the backward (activation checkpointing). As in DeepSpeed it enters the engine-timed
            lines only, where the backward is estimated as ``(2 + factor) x`` the forward FLOPs;
            a backward run inside the profile window is measured instead.
        model_parallel_size: how many devices one copy of the model is split over (tensor or
            pipeline parallel). Figures are per device; the whole model's params and FLOPs are
            multiplied by it. ``None``: read from ``process_group`` if given, else 1.
        process_group: a ``torch.distributed`` model-parallel group (torch only).
        module_latency: time each module's forward (on CUDA: synchronising around each one,
            which slows the step); the forward, backward and optimizer latencies are always timed.
        ignore_modules: module types whose cost is excluded from the totals (listed as excluded).
    """

    def __new__(cls, model: Any, *args: Any, **kwargs: Any) -> "FlopsProfiler":
        if cls is FlopsProfiler:
            cls = profile_module(model).FLOPS_PROFILER
        return super().__new__(cls)

    def __init__(self, model: Any, ds_engine: Any = None, recompute_fwd_factor: float = 0.0, *,
                 model_parallel_size: int | None = None, process_group: Any = None,
                 module_latency: bool = True, ignore_modules: Iterable[Any] | None = None) -> None:
        if isinstance(recompute_fwd_factor, bool) or not isinstance(recompute_fwd_factor, (int, float)) \
                or not recompute_fwd_factor >= 0:
            raise ValueError(f"recompute_fwd_factor must be a number >= 0 (the share of the forward recomputed in "
                             f"the backward), got {recompute_fwd_factor!r}")
        if model_parallel_size is not None and (not isinstance(model_parallel_size, int) or model_parallel_size < 1):
            raise ValueError(f"model_parallel_size must be a positive int, got {model_parallel_size!r}")
        self.model = model
        self.ds_engine = ds_engine
        self.recompute_fwd_factor = float(recompute_fwd_factor)
        self.model_parallel_size = model_parallel_size
        self.process_group = process_group
        self.module_latency = bool(module_latency)
        self.ignore_modules = list(ignore_modules or ())
        self._state = _IDLE
        self._cached: dict[Any, ModelProfile] = {}
        self._ignoring: list[Any] = []

    # -- backend hooks ----------------------------------------------------------------------
    def _start(self, ignore: list[Any]) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def _discard(self) -> None:
        raise NotImplementedError

    def _build(self, step: int | None) -> ModelProfile:
        raise NotImplementedError

    def _model_parallel_size(self) -> int | None:
        """``model_parallel_size``, else the engine's ``mp_world_size`` (DeepSpeed's), else None."""
        if self.model_parallel_size is not None:
            return self.model_parallel_size
        mp = getattr(self.ds_engine, "mp_world_size", None) if self.ds_engine is not None else None
        return mp if isinstance(mp, int) and not isinstance(mp, bool) and mp >= 1 else None

    # -- life cycle -------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """True between ``start_profile()`` and ``stop_profile()``."""
        return self._state == _RUNNING

    def start_profile(self, ignore_list: Iterable[Any] | None = None) -> None:
        """Start counting; everything that runs until ``stop_profile()`` is profiled.

        ``ignore_list`` (DeepSpeed's name) adds module types to exclude for this profile.
        Figures of a previous profile are dropped.
        """
        if self._state == _RUNNING:
            raise RuntimeError(f"{type(self).__name__}.start_profile(): already profiling; call stop_profile() first")
        self._discard()
        self._cached.clear()
        self._ignoring = self.ignore_modules + list(ignore_list or ())
        self._start(self._ignoring)
        self._state = _RUNNING

    def reset_profile(self) -> None:
        """Drop the figures counted so far (DeepSpeed's method): a running profile counts on from now,
        a stopped one is dropped (as ``end_profile()``)."""
        if self._state == _RUNNING:
            self._stop()
            self._discard()
            self._cached.clear()
            self._start(self._ignoring)
        else:
            self.end_profile()

    def stop_profile(self) -> None:
        """Stop counting and remove every hook; the figures stay readable until ``end_profile()``."""
        if self._state != _RUNNING:
            raise RuntimeError(f"{type(self).__name__}.stop_profile(): not profiling; call start_profile() first")
        self._stop()  # raises, leaving the profile running, when it cannot stop cleanly
        self._state = _STOPPED

    def end_profile(self) -> None:
        """Stop if needed and drop the figures; nothing of the profiler stays attached to the model."""
        if self._state == _RUNNING:
            self.stop_profile()
        self._discard()
        self._cached.clear()
        self._state = _IDLE

    def __enter__(self) -> "FlopsProfiler":
        self.start_profile()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._state == _RUNNING:
            self.stop_profile()

    # -- results ----------------------------------------------------------------------------
    def get_profile(self, profile_step: int | None = None) -> ModelProfile:
        """The ``ModelProfile`` of what ran since ``start_profile()`` (so far, while still running)."""
        if self._state == _IDLE:
            raise NotProfiledError(f"{type(self).__name__}: nothing profiled; call start_profile() before the step "
                               "(and read the figures before end_profile())")
        if self._state == _RUNNING:
            return self._build(profile_step)
        if profile_step not in self._cached:
            self._cached[profile_step] = self._build(profile_step)
        return self._cached[profile_step]

    def _total(self, phase: str | None, whole: str, part: str) -> Any:
        """The profile's ``whole`` figure, or ``part`` of the totals of ``phase``."""
        if phase is not None and phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; phases are {', '.join(PHASES)}")
        profile = self.get_profile()
        return getattr(profile, whole) if phase is None else getattr(profile.phase(phase), part)

    def get_total_flops(self, as_string: bool = False, phase: str | None = None) -> int | str:
        """FLOPs per device of every phase (or of ``phase``: ``forward``, ``backward``, ``optimizer``, ``other``)."""
        value = self._total(phase, "flops", "flops")
        return views.count(value, "FLOPs") if as_string else value

    def get_total_macs(self, as_string: bool = False, phase: str | None = None) -> int | str:
        """MACs per device of every phase (or of ``phase``)."""
        value = self._total(phase, "macs", "macs")
        return views.count(value, "MACs") if as_string else value

    def get_total_params(self, as_string: bool = False) -> int | str:
        """Parameters per device (elements; each shared tensor once)."""
        value = self.get_profile().params
        return views.count(value) if as_string else value

    def get_total_duration(self, as_string: bool = False, phase: str | None = None) -> float | str | None:
        """Seconds between start and stop (or the latency of ``phase``); None when not timed."""
        value = self._total(phase, "duration_s", "latency_s")
        return views.seconds(value) if as_string else value

    def print_model_profile(self, profile_step: int | None = 1, module_depth: int = -1, top_modules: int = 1,
                            detailed: bool = True, output_file: str | os.PathLike | None = None,
                            as_string: bool = True) -> None:
        """Print the report (summary, aggregated top-k per depth, tree), or write it to ``output_file``."""
        check_view_options(module_depth, top_modules)
        profile = self.get_profile(profile_step)
        # DeepSpeed's attributes: the forward figures DeepSpeed prints, kept after end_profile()
        self.flops = profile.phase("forward").flops if "forward" in profile.phases else profile.flops
        self.macs = profile.phase("forward").macs if "forward" in profile.phases else profile.macs
        self.params = profile.params
        engine = _engine_lines(self.ds_engine, self.flops, self.recompute_fwd_factor)
        if output_file is not None:
            path = profile.save(output_file, module_depth, top_modules, detailed, as_string)
            if engine and path.suffix.lower() not in (".json", ".html", ".htm"):
                path.write_text(engine + path.read_text(encoding="utf-8"), encoding="utf-8")
        else:
            print(engine + profile.to_text(module_depth, top_modules, detailed, as_string))


    def print_model_aggregated_profile(self, module_depth: int = -1, top_modules: int = 1) -> None:
        """Print the aggregated view alone: the top ``top_modules`` module types per depth (DeepSpeed's method)."""
        check_view_options(module_depth, top_modules)
        print(self.get_profile().aggregated_table(module_depth, top_modules))


class NotProfiledError(RuntimeError, AttributeError):
    """Figures asked of a ``FlopsProfiler`` with no profile (before ``start_profile()`` or after
    ``end_profile()``). An ``AttributeError`` too: DeepSpeed's profiler raises that there."""


# DeepSpeed's global timer names (deepspeed.utils.timer); cli99's engine names them in full.
_ENGINE_TIMERS = (("fwd", "bwd", "step"), ("forward", "backward", "step"))


def _engine_lines(engine: Any, forward_flops: int, recompute_fwd_factor: float) -> str:
    """DeepSpeed's engine block of ``print_model_profile`` (empty without an engine)."""
    if engine is None:
        return ""
    line = "{:<70}  {}".format
    dp = getattr(engine, "dp_world_size", None)
    if dp is None:  # (Ulysses sequence parallelism: the data-parallel group is the sequence-data-parallel one)
        dp = getattr(engine, "seq_dp_world_size", None)
    rows = [line("world size:", getattr(engine, "world_size", 1)), line("data parallel size:", dp),
            line("model parallel size:", getattr(engine, "mp_world_size", 1))]
    micro_batch = getattr(engine, "train_micro_batch_size_per_gpu", None)
    if callable(micro_batch):
        rows.append(line("batch size per GPU:", micro_batch()))
    breakdown = getattr(engine, "wall_clock_breakdown", None)
    if callable(breakdown) and breakdown() and callable(getattr(engine, "timers", None)):
        seconds = _engine_seconds(engine)
        if seconds is not None:
            fwd, bwd, step = seconds
            factor = 2 + recompute_fwd_factor
            rows += [line("fwd latency (engine timer):", views.seconds(fwd)),
                     line("bwd latency (engine timer):", views.seconds(bwd)),
                     line(f"bwd FLOPS per GPU = {factor:g} * fwd flops per GPU / bwd latency:",
                          views.count(factor * forward_flops / bwd, "FLOPS") if bwd else "-"),
                     line("step latency (engine timer):", views.seconds(step)),
                     line(f"FLOPS per GPU = {factor + 1:g} * fwd flops per GPU / iter latency:",
                          views.count((factor + 1) * forward_flops / (fwd + bwd + step), "FLOPS")
                          if fwd + bwd + step else "-")]
    return "\n".join(["DeepSpeed engine:", *rows]) + "\n\n"


def _engine_seconds(engine: Any) -> tuple[float, float, float] | None:
    """The engine's forward, backward and step timers in seconds (their ``elapsed(False)`` is in ms)."""
    for names in _ENGINE_TIMERS:
        try:
            return tuple(engine.timers(name).elapsed(False) / 1000.0 for name in names)
        except (KeyError, AttributeError):
            continue
    return None


# DeepSpeed's / cli99's module-level names deliberately not provided, and what to use instead
# (docs/migration.rst). ``deepspeed.profiling.flops_profiler`` maps to ``deeplite_like.profiling``,
# its ``.profiler`` module to this one: both answer these names with the advice.
NOT_PROVIDED = {
    **dict.fromkeys(("flops_to_string", "macs_to_string", "params_to_string", "duration_to_string",
                     "number_to_string", "DEFAULT_PRECISION"),
                    "figures are raw numbers here; ModelProfile.to_text() / summary_text() render them, and "
                    "deeplite_like.profiling.views.count(value, unit) / seconds(value) format one"),
    **dict.fromkeys(("get_module_flops", "get_module_macs", "get_module_duration"),
                    "nothing is stored on the modules; read a module's figures from the profile tree: "
                    "profile.root (ModuleNode .flops, .macs, .latency_s, .children) or profile.to_dict()"),
    **dict.fromkeys(("MODULE_HOOK_MAPPING", "wrapFunc", "old_functions"),
                    "nothing is patched or hooked per module type: operators are counted by a dispatch mode "
                    "from a formula registry (deeplite_like.backends.torch.register_formula)"),
}


def not_provided(module: str, name: str) -> Any:
    """A module ``__getattr__``'s answer: ``NotProvidedError`` with the advice for a peer's name, else
    ``AttributeError``."""
    if name in NOT_PROVIDED:
        raise NotProvidedError(f"{module}.{name} (DeepSpeed / cli99 name) is not provided: {NOT_PROVIDED[name]} "
                               "(see docs/migration.rst)", name=name)
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


def __getattr__(name: str) -> Any:
    return not_provided(__name__, name)
