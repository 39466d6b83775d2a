"""``build_model_profile``: the ``ModelProfile`` of one call of a Keras model (``get_model_profile``'s Keras side).

One counted call (a profiling ``Session``: the layers recorded and priced as ``count_ops``
prices them; with ``backward=True`` the operator counter prices the gradient computation),
then untimed warm-up calls, one timed call, a timed backward, and one call timing each layer.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from deeplite_like.caller import inputs_hint
from deeplite_like.data import describe
from deeplite_like.errors import ForwardError
from deeplite_like.profiling.result import ModelProfile

from .._tf import import_keras, import_tensorflow
from ..counting.inputs import expected_inputs_text, model_input_dtypes, prepare_inputs
from ..counting.recorder import named_layers
from ..inputs import as_model_input
from ..messages import keras_message
from ..params import parameter_stats
from ..state import preserved_model_state
from .assemble import profile_of
from .phases import PhaseHooks, Phases
from .session import Session, TimedRecorder

__all__ = ["build_model_profile"]

keras = import_keras()

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
