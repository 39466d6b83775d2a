"""Model profiles of Keras 3 models: one call (``build_model_profile``, ``get_model_profile``'s Keras
side) and a training step (``KerasFlopsProfiler``, the core ``FlopsProfiler`` around it).

``deeplite_like.profiling`` imports this module for a Keras model and uses
``build_model_profile`` and ``FLOPS_PROFILER``; the per-TensorFlow-op costs a profile prices
operators with (``TF_COSTS``, ``TF_FREE``, ``tf_op_cost``: ``counting/tf_ops.py``) are
importable from here too. Both profiles record and price the layers as ``count_ops`` does and
count what runs outside them per operator and phase; what is attached while they run, and
what they touch outside the model, is ``profile_session.py``. ``profile_of`` assembles what a
session recorded into the core's ``ModelProfile``.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from deeplite_like.errors import ForwardError, inputs_hint
from deeplite_like.data import describe
from deeplite_like.results import OpStats
from deeplite_like.profiling.result import ModelProfile, ModuleRecord, PhaseStats, build_profile
from deeplite_like.profiling.flops_profiler import FlopsProfiler

from ._tf import import_keras, import_tensorflow, keras_message
from .counting.engine import price
from .counting.tf_ops import TF_COSTS, TF_FREE, tf_op_cost
from .counting.recorder import named_layers
from .counting.registry import CountOptions
from .inputs import as_model_input
from .params import parameter_stats, params_by_layer
from .profile_session import PhaseHooks, Phases, Session, TimedRecorder
from .state import preserved_model_state
from .tensors import expected_inputs_text, model_input_dtypes, prepare_inputs

keras = import_keras()

__all__ = ["FLOPS_PROFILER", "KerasFlopsProfiler", "TF_COSTS", "TF_FREE", "build_model_profile", "profile_of",
           "tf_op_cost"]


# -- a session -> ModelProfile -----------------------------------------------------------------
_CONFIG_KEYS = ("units", "filters", "kernel_size", "strides", "padding", "pool_size", "activation", "rate",
                "axis", "num_heads", "key_dim", "output_dim", "input_dim", "target_shape")


def _extra_repr(layer: Any) -> str:
    try:
        config = layer.get_config()
    except (NotImplementedError, AttributeError, TypeError, ValueError):
        return ""
    parts = [f"{key}={config[key]!r}" if isinstance(config[key], str) else f"{key}={config[key]}"
             for key in _CONFIG_KEYS if key in config and config[key] is not None]
    if config.get("use_bias") is False:
        parts.append("use_bias=False")
    return ", ".join(parts)


def _ignored(layers: list[tuple[str, Any]], ignore: Iterable[Any]) -> set[str]:
    classes, names = [], set()
    for item in ignore:
        if isinstance(item, type):
            classes.append(item)
        elif isinstance(item, str):
            names.add(item)
        else:
            raise TypeError(f"ignore_modules takes Keras layer classes or class names, got {item!r}")
    return {path for path, layer in layers if isinstance(layer, tuple(classes)) or type(layer).__name__ in names}


def _records(model: Any, layers: list[tuple[str, Any]], counted: Any,
             latency: Mapping[str, float] | None) -> list[ModuleRecord]:
    known = {path for path, _ in layers}
    params = params_by_layer(model)
    records = []
    for path, layer in layers:
        parent = None
        if path:
            parent = path.rpartition(".")[0]
            while parent and parent not in known:
                parent = parent.rpartition(".")[0]
        stats = counted.by_module.get(path)
        phases = {"forward": OpStats(stats.macs, stats.flops, 0)} if stats is not None and (stats.macs or stats.flops) \
            else {}
        records.append(ModuleRecord(
            name=path, type=type(layer).__name__, parent=parent, extra_repr=_extra_repr(layer),
            params=params.get(id(layer), 0), calls=stats.calls if stats is not None else 0, phases=phases,
            ops=dict(counted.module_ops.get(path, {})), latency_s=None if latency is None else latency.get(path)))
    return records


def profile_of(session: Session, *, module_latency: bool, ignore: Iterable[Any], params: int, trainable: int,
               forward_latency: float | None, latencies: Mapping[str, float | None], duration: float | None,
               layer_seconds: Mapping[str, float] | None, step: int | None, mp: int,
               notes: list[str]) -> ModelProfile:
    """The ``ModelProfile`` of what ``session`` recorded: the forward per layer, the rest per operator and phase.

    The forward is priced from the session's layer records by the counting engine's ``price`` -
    the same figures as ``count_ops`` - and each layer of the tree (``counting.recorder.
    named_layers`` paths) gets its MACs, FLOPs, calls, parameters, operators and latency. The
    operator counter's totals (backward, optimizer, other) become phases and operator rows that
    are not attributed to layers. The core's ``build_profile`` assembles and applies exclusions.
    """
    recorder = session.recorder
    counted = price(recorder.records, CountOptions(training=recorder.training), session.own_ops)
    phases = {"forward": PhaseStats(counted.macs, counted.flops, sum(s.calls for s in counted.by_operator.values()),
                                    forward_latency)}
    by_operator = {k: OpStats(v.macs, v.flops, v.calls) for k, v in counted.by_operator.items()}
    untracked = dict(counted.untracked)
    outside: dict[str, OpStats] = {}
    if session.counter is not None:
        ops = session.counter.ops
        for name, stats in ops.phases.items():
            if stats.calls:
                phases[name] = PhaseStats(stats.macs, stats.flops, stats.calls, latencies.get(name))
        for name, stats in ops.by_operator.items():
            outside[name] = OpStats(stats.macs, stats.flops, stats.calls)
            by_operator.setdefault(name, OpStats()).add(stats.macs, stats.flops, stats.calls)
        untracked.update(ops.untracked)
    elif session.backend not in ("tensorflow", "torch"):
        notes.append(f"Keras' {session.backend} backend has no operator hook: only the forward (per layer) is "
                     "counted; the backward and the optimizer step are not measured.")
    notes.append("The forward is priced layer by layer (the layer formulas of count_ops); the backward, the "
                 "optimizer step and the rest operator by operator, not attributed to layers.")
    return build_profile(
        type(session.model).__name__, "keras",
        _records(session.model, session.layers, counted, layer_seconds if module_latency else None),
        phases=phases, by_operator=by_operator, outside=outside, excluded_names=_ignored(session.layers, ignore),
        params=params, trainable_params=trainable, duration_s=duration, batch_size=recorder.batch_size,
        untracked=untracked, module_latency=module_latency, device=f"keras/{session.backend}",
        model_parallel_size=mp, step=step, notes=notes)


# -- one call: build_model_profile ---------------------------------------------------------------
_MODEL_CALL = ("forward", "call", "__call__")


def _first_layer(model: Any) -> Any:
    for _, layer in named_layers(model)[1:]:
        if isinstance(layer, keras.layers.InputLayer) or not isinstance(layer, keras.Layer):
            continue
        if not getattr(layer, "_layers", None):
            return layer
    return None


def _inputs(model: Any, input_shape: Sequence[int] | None, args: Any, kwargs: Any) -> tuple[tuple, dict]:
    if input_shape is not None and (args is not None or kwargs is not None):
        raise ValueError("pass either input_shape=... (one float tensor) or args=/kwargs=, not both")
    if input_shape is None:
        if args is None and kwargs is None:
            raise ValueError(f"get_model_profile needs the inputs of {model.name!r}: input_shape=(batch, ...) for a "
                             "model that takes one float tensor, or args=(...)/kwargs={...} otherwise")
        if not isinstance(args, (tuple, list)) and args is not None:
            args = (args,)
        return tuple(args or ()), dict(kwargs or {})
    dtypes, _ = model_input_dtypes(model, keras)
    if len(dtypes) > 1:
        raise ValueError(f"input_shape builds one float tensor, but {model.name!r} takes {len(dtypes)} inputs: "
                         "pass them as args=([x1, x2],) or kwargs")
    first = _first_layer(model)
    if (dtypes and "float" not in dtypes[0]) or isinstance(first, keras.layers.Embedding):
        what = f"an input of dtype {dtypes[0]}" if dtypes and "float" not in dtypes[0] else \
            f"integer ids (its first layer {first.name!r} is an Embedding)"
        raise ValueError(f"input_shape builds a float tensor, but {model.name!r} takes {what}: pass the inputs "
                         "instead, e.g. args=(np.zeros(shape, 'int32'),)")
    inputs, _ = prepare_inputs(model, tuple(input_shape), None, keras)
    return (inputs,), {}


def _caller(model: Any, func_name: str, args: tuple, kwargs: dict, built: bool) -> Callable[[], Any]:
    """The profiled call; a failure in it is one ``ForwardError`` naming the model, the inputs and the fix."""
    if func_name in _MODEL_CALL:
        inputs = as_model_input(args, kwargs)
        call, what = (lambda: model(inputs, training=False)), f"{model.name!r}"
    else:
        entry = getattr(model, func_name, None)
        if not callable(entry):
            raise AttributeError(f"{type(model).__name__} {model.name!r} has no method {func_name!r} to profile "
                                 f"(func_name); use 'forward' for the model call")
        call, what = (lambda: entry(*args, **kwargs)), f"{model.name!r}.{func_name}"

    def guarded() -> Any:
        try:
            return call()
        except Exception as exc:
            expected = expected_inputs_text(model)
            source = (" The input was one float tensor built from input_shape: a model that takes integer ids or "
                      "several inputs needs args=/kwargs=." if built else "")
            given = describe(args) + (f", {describe(kwargs)}" if kwargs else "")
            raise ForwardError(f"the call of {type(model).__name__} {what} on {given} failed: {keras_message(exc)}. "
                               f"{inputs_hint('get_model_profile')}"
                               + (f" ({expected})." if expected else ".") + source) from exc

    return guarded


def _run_with_backward(call: Callable[[], Any], model: Any, backend: str, loss_fn: Callable | None) -> None:
    """Run ``call`` and differentiate its loss (sum of float outputs, or ``loss_fn``) w.r.t. the weights."""
    def loss_of(output: Any) -> Any:
        if loss_fn is not None:
            return loss_fn(output)
        leaves = [t for t in keras.tree.flatten(output) if "float" in keras.backend.standardize_dtype(t.dtype)]
        if not leaves:
            raise ValueError(f"backward=True: the output of {model.name!r} has no floating-point tensor; "
                             "pass loss_fn=... returning a scalar")
        total = keras.ops.sum(leaves[0])
        for leaf in leaves[1:]:
            total = total + keras.ops.sum(leaf)
        return total

    weights = model.trainable_variables
    if backend == "tensorflow":
        tf = import_tensorflow()
        with tf.GradientTape() as tape:
            loss = loss_of(call())
        tape.gradient(loss, weights)
    elif backend == "torch":
        import torch
        with torch.enable_grad():
            loss = loss_of(call())
            torch.autograd.grad(loss, [w.value for w in weights], allow_unused=True)
    else:
        raise NotImplementedError(f"backward=True is not supported on Keras' {backend} backend (no operator hook "
                                  "to measure it)")


def build_model_profile(model: Any, *, input_shape: Sequence[int] | None = None, args: Any = None,
                        kwargs: Mapping[str, Any] | None = None, warm_up: int = 1,
                        ignore_modules: Iterable[Any] | None = None, func_name: str = "forward",
                        backward: bool = False, meta: bool = False, module_latency: bool = True,
                        loss_fn: Callable | None = None) -> ModelProfile:
    """The ``ModelProfile`` of one call of a Keras model (``get_model_profile``'s Keras side).

    One counted call (``training=False``; with ``backward`` the loss - the sum of the float
    outputs, or ``loss_fn(output)`` - is differentiated w.r.t. the trainable weights), then
    ``warm_up - 1`` untimed calls (the counted call is the first warm-up, as in the PyTorch
    backend), one timed call, and with ``module_latency`` one call timing each layer (a
    recorder around every layer call, too heavy to time the whole through). Weights,
    non-trainable state and trainable flags are left as found.
    """
    if not isinstance(model, keras.Layer):
        raise TypeError(f"build_model_profile expects a Keras model or layer, got {type(model).__name__}")
    if meta:
        raise ValueError("meta=True counts on torch's meta device and has no Keras counterpart; Keras models are "
                         "counted on real inputs (use a small batch: the counts scale linearly)")
    built = input_shape is not None
    args, kwargs = _inputs(model, input_shape, args, kwargs)
    call = _caller(model, func_name, args, kwargs, built)
    backend = keras.config.backend()
    with preserved_model_state(model, restore_values=True):
        layers = [layer for _, layer in named_layers(model) if isinstance(layer, keras.Layer)]  # the model first
        if any(not getattr(layer, "built", True) for layer in layers):
            call()  # build first (shape inference is not a real call), as count_ops does
        session = Session(model, module_latency=False, count_ops=backward)
        session.start()
        try:
            if backward:
                _run_with_backward(call, model, backend, loss_fn)
            else:
                call()
        finally:
            session.stop()
        for _ in range(warm_up - 1):  # (the counted call was the first)
            call()
        session.sync()
        start = time.perf_counter()
        call()
        session.sync()
        forward_latency = time.perf_counter() - start
        backward_s = None
        if backward:  # timed apart from counting, like the forward
            timed = Phases(session.sync)
            with PhaseHooks(timed):
                _run_with_backward(call, model, backend, loss_fn)
            backward_s = timed.seconds["backward"] or None
        layer_seconds = None
        if module_latency:
            per_layer = TimedRecorder(session.layers, None, True, session.sync)
            with per_layer:
                call()
            layer_seconds = per_layer.seconds
    stats = parameter_stats(model)
    latencies = {"backward": backward_s, "optimizer": None, "other": None}
    warmed = f" and {warm_up - 1} warm-up call(s)" if warm_up > 1 else ""
    notes = [f"Latency: one call timed after the counted call{warmed}, without counting"
             + ("; per-layer latency from one more call timing each layer." if module_latency else ".")]
    if func_name not in _MODEL_CALL:
        notes.append(f"Profiled entry point: {model.name}.{func_name}.")
    return profile_of(session, module_latency=module_latency, ignore=ignore_modules or (), params=stats.total_params,
                      trainable=stats.trainable_params, forward_latency=forward_latency, latencies=latencies,
                      duration=forward_latency + (latencies["backward"] or 0.0),
                      layer_seconds=layer_seconds, step=None, mp=1, notes=notes)


# -- a training step: KerasFlopsProfiler ---------------------------------------------------------
class KerasFlopsProfiler(FlopsProfiler):
    """``FlopsProfiler`` of a Keras model: around ``train_on_batch`` or a custom ``GradientTape`` step.

    Between ``start_profile()`` and ``stop_profile()``, in the thread that called them:

    * every layer call of the model is recorded (the counting engine's ``LayerRecorder``, set on
      the model's layers only) and priced per layer as ``count_ops`` prices it: the forward;
    * the operators that run outside the layers are counted one by one per phase (backward inside
      ``GradientTape.gradient`` or an autograd node, optimizer inside ``Optimizer.apply``, other:
      the loss, metrics) by the backend's operator counter (``profile_session.py``).

    What this touches outside the model, and how it is put back: the phase hooks on two classes
    and, on TensorFlow, ``tf.config.run_functions_eagerly(True)`` - both shared by the running
    profiles and undone when the last one stops, the user's previous eager setting restored (see
    ``profile_session.py``). Stop the profile also when the step raises (``with
    FlopsProfiler(model):`` does). The profile's notes say that latencies were taken while
    counting (and, on TensorFlow, with ``tf.function``s run eagerly).

    ``process_group`` is a ``torch.distributed`` notion: give ``model_parallel_size`` instead.
    ``start_profile()`` and ``stop_profile()`` run in the thread that trains; only that thread and
    this model are profiled.
    """

    def __init__(self, model: Any, ds_engine: Any = None, recompute_fwd_factor: float = 0.0, *,
                 model_parallel_size: int | None = None, process_group: Any = None,
                 module_latency: bool = True, ignore_modules: Iterable[Any] | None = None) -> None:
        if not isinstance(model, keras.Layer):
            raise TypeError(f"KerasFlopsProfiler expects a Keras model or layer, got {type(model).__name__}")
        if process_group is not None:
            raise TypeError("process_group is a torch.distributed group; for a Keras model pass "
                            "model_parallel_size=<devices one copy of the model is split over>")
        super().__init__(model, ds_engine, recompute_fwd_factor, model_parallel_size=model_parallel_size,
                         module_latency=module_latency,
                         ignore_modules=ignore_modules)
        self._session: Session | None = None
        self._ignore: list[Any] = []
        self._params: Any = None

    def _start(self, ignore: list[Any]) -> None:
        self._ignore = ignore
        self._params = parameter_stats(self.model) if getattr(self.model, "built", False) else None
        session = Session(self.model, self.module_latency)
        session.start()
        self._session = session

    def _stop(self) -> None:
        self._session.stop()

    def _discard(self) -> None:
        self._session = None

    def _build(self, step: int | None) -> ModelProfile:
        session = self._session
        stats = self._params if self._params is not None else parameter_stats(self.model)
        latencies = {"backward": session.phases.seconds["backward"] or None,
                     "optimizer": session.phases.seconds["optimizer"] or None}
        duration = session.duration_s
        other = duration - session.recorder.forward_s - sum(v or 0.0 for v in latencies.values())
        latencies["other"] = max(0.0, other)
        notes = ["Latencies were measured while counting (every operator passes through the operator hook"
                 + (", and tf.functions run eagerly" if session.backend == "tensorflow" else "")
                 + "): they are not those of an un-profiled step."]
        return profile_of(session, module_latency=self.module_latency, ignore=self._ignore,
                          params=stats.total_params, trainable=stats.trainable_params,
                          forward_latency=session.recorder.forward_s or None, latencies=latencies, duration=duration,
                          layer_seconds=session.recorder.seconds, step=step, mp=self._model_parallel_size() or 1,
                          notes=notes)


#: The class the core's ``FlopsProfiler(model)`` instantiates for a Keras model.
FLOPS_PROFILER = KerasFlopsProfiler
