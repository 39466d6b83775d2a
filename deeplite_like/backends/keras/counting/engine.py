"""``count_ops``: MACs and FLOPs of one forward pass of a Keras 3 model, per layer.

The model runs once, for real, on the inputs given (or made from a shape), with every layer's
``call`` recorded (``recorder.py``); the records are then priced by the layer formulas
(``pricing.py``, ``formulas/``). ``method='graph'`` instead asks TensorFlow's profiler
(``graph.py``). The model is left as found (see ``count_ops``).
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from deeplite_like.argument_checks import check_batch_size, check_flag
from deeplite_like.caller import inputs_hint
from deeplite_like.opcount import OpCount, parent_names, roll_up_containers

from .._tf import import_keras
from ..messages import keras_message
from ..state import preserved_model_state
from ..tensors import to_backend
from . import formulas as _formulas  # noqa: F401  (importing the package fills the formula table)
from .errors import ForwardError, UntrackedLayerWarning
from .inputs import expected_inputs_text, prepare_inputs
from .own_ops import own_ops
from .pricing import price
from .recorder import LayerRecorder, named_layers
from .registry import CountOptions
from .specs import SpecMaker, describe_call

METHODS = ("analytic", "graph")


def count_ops(model: Any, inputs_or_shape: Any, *, batch_size: int | None = None, method: str = "analytic",
              training: bool = False, causal_half: bool = False, warn_untracked: bool = True) -> OpCount:
    """Count the MACs and FLOPs (ints, for the batch that ran) of one forward pass of a Keras model.

    ``method='analytic'`` (default, any Keras backend): the model runs once on real tensors,
    every layer call is recorded and priced by its layer formula (``register_layer_formula``),
    with the same conventions and numbers as the torch backend. A layer with no formula (a
    custom layer, ``Lambda``, a subclassed model's ``call``) is priced by the framework
    operators it runs itself, outside its sublayers (``own_ops.py``: TensorFlow and torch
    backends; by_operator names them ``tf.MatMul``, ``aten.bmm``). ``OpCount.by_module`` is keyed
    by dotted layer paths (``"block1.conv"``; the model is ``""``) and nested: a parent
    includes its children, a shared layer is counted once per call. ``by_operator`` is keyed by
    layer class (``"Conv2D"``; ``"ops.Add"`` for operation nodes of functional models),
    ``module_ops`` by path then class. An operator with no cost known, run by a layer without
    a formula, is *untracked* (by op name); on JAX (no operator hook) a layer with no formula,
    no recorded sublayer calls and not known to be free is: counted as 0, listed in ``OpCount.untracked`` and
    warned about once (``UntrackedLayerWarning``) unless ``warn_untracked=False``.

    ``method='graph'`` (TensorFlow backend only): TensorFlow's profiler counts the float ops of
    the model's traced graph at this batch size (``graph.count_graph``): totals and
    ``by_operator`` by TF op type; MACs are half the FLOPs of contraction ops. It is a
    cross-check, complete only where TensorFlow has a FLOP statistic for every op (see
    ``graph.py``).

    The model is left as found: its weights and non-trainable state (batch-norm moving
    statistics, seed generators, RNN states) are restored if the pass changed them, every
    layer's ``call`` is put back, trainable flags and compiled state are not touched. A model
    not built yet is built by the pass, as any call would build it.

    Args:
        model: a ``keras.Layer`` (a ``keras.Model``: Sequential, functional or subclassed).
        inputs_or_shape: a tensor or array, a list/dict of them, or a shape with the batch
            first (``(1, 224, 224, 3)``; ``None`` as batch takes ``batch_size``), or a
            list/dict of shapes. Inputs made from shapes are standard-normal floats (zeros
            for integer inputs) in the dtype of the model's ``Input``.
        batch_size: the batch for shapes whose first dimension is ``None`` (default 1).
        method: ``'analytic'`` or ``'graph'``.
        training: run (and price) the pass in training mode: dropout and batch statistics.
        causal_half: count causal attention (``use_causal_mask=True``) as half of dense.
        warn_untracked: warn once about untracked layers.

    Raises:
        TypeError: ``model`` is not a Keras layer.
        ValueError: an unknown method, or inconsistent shapes / batch size.
        ForwardError: the forward raised; the message names the innermost layer that failed,
            its class and the shapes it received (the original error is chained).
        FormulaError: a layer formula raised.
    """
    keras = import_keras()
    if not isinstance(model, keras.Layer):
        raise TypeError(f"count_ops expects a Keras 3 layer or model (keras.Layer), got "
                        f"{type(model).__module__}.{type(model).__qualname__}")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {', '.join(map(repr, METHODS))}")
    check_batch_size(batch_size, "batch_size", "count_ops")  # batch_size=0 would count an empty batch: 0 MACs
    for name, value in (("training", training), ("causal_half", causal_half), ("warn_untracked", warn_untracked)):
        check_flag(value, name, "count_ops")
    inputs, batch = prepare_inputs(model, inputs_or_shape, batch_size, keras)
    if method == "graph":
        from .graph import count_graph

        return count_graph(model, inputs, training=training, batch_size=batch, warn_untracked=warn_untracked)

    result = observe(model, inputs, batch, training=training, causal_half=causal_half).counts
    if warn_untracked:
        warn_if_untracked(result, stacklevel=2)
    return result


@dataclass
class Observation:
    """One recorded forward of a Keras model (``observe``): every layer call, and its priced counts."""

    recorder: LayerRecorder
    counts: OpCount
    memory: Any = None  # on Keras' torch backend when asked: the forward's ``memory.MemoryStats``


def observe(model: Any, inputs: Any, batch: int | None, *, training: bool, causal_half: bool = False,
            on_failure: FailureHandler | None = None, memory: bool = False) -> Observation:
    """One real forward with every layer call recorded and priced: ``count_ops``' counts and the
    layer table's shapes both come from it, and on Keras' torch backend with ``memory`` its peak
    memory (the profiler's functions share one per status).

    ``on_failure``: by default a failing forward raises ``ForwardError`` naming the layer.
    """
    handler = on_failure or (lambda exc, rec: _forward_error(model, exc, rec))
    recorder = run_recorded(model, inputs, training=bool(training), on_failure=handler, tap_ops=True,
                            memory_batch=batch or 1 if memory else None)
    result = price(recorder.records, CountOptions(training=bool(training), causal_half=bool(causal_half)),
                   recorder.own_ops)
    roll_up_containers(result.by_module, parent_names(name for name, _ in named_layers(model)))
    result.batch_size = batch
    return Observation(recorder, result, recorder.memory)


def warn_if_untracked(result: OpCount, stacklevel: int = 1) -> None:
    """Warn once (``UntrackedLayerWarning``) about the untracked layers of ``result``, if any.

    ``stacklevel`` as ``warnings.warn``'s, counted from the caller of this function.
    """
    if result.untracked:
        warnings.warn(untracked_message(result.untracked), UntrackedLayerWarning, stacklevel=stacklevel + 1)


# -- running the model ----------------------------------------------------------------------
#: ``on_failure(exception, recorder)`` -> the exception to raise (``exception`` itself: re-raise it).
FailureHandler = Callable[[Exception, "LayerRecorder | None"], BaseException]


def run_recorded(model: Any, inputs: Any, *, training: bool, on_failure: FailureHandler,
                 tap_ops: bool = False, memory_batch: int | None = None) -> LayerRecorder:
    """One real forward ``model(inputs, training=training)`` with every layer call recorded.

    ``tap_ops=True`` also prices the framework operators each call runs itself
    (``own_ops.py``): ``recorder.own_ops`` is then an ``OpTap`` (``None`` on a backend with no
    operator hook, JAX). ``memory_batch`` (with ``tap_ops``, Keras' torch backend): the same
    forward, run under ``torch.no_grad()`` as inference, also measures its peak memory for a batch
    of that size (``memory.TorchForwardMemory``): ``recorder.memory``.

    A model not built yet is built by a first call whose layer calls are not kept (shape
    inference is not a real call, and building may create layers). The model is left as found
    (``preserved_model_state(restore_values=True)``), and every layer's ``call`` is put back.
    When the forward raises, ``on_failure`` decides what is raised: the recorder's
    ``failed_record`` names the innermost layer that failed.
    """
    keras = import_keras()
    specs = SpecMaker(keras)
    with preserved_model_state(model, restore_values=True):
        layers = named_layers(model)
        if any(not getattr(layer, "built", True) for _, layer in layers if isinstance(layer, keras.Layer)):
            # Build first (shape inference is not a real call), recording only where a failure comes from.
            with LayerRecorder(layers, specs.tree, specs.is_symbolic, keep_records=False) as builder:
                _forward(model, inputs, training, builder, on_failure)
            layers = named_layers(model)  # building may have created layers
        with LayerRecorder(layers, specs.tree, specs.is_symbolic) as recorder:
            tracked = None
            if tap_ops and memory_batch is not None and keras.config.backend() == "torch":
                from ..memory import TorchForwardMemory

                inputs = to_backend(inputs)
                tracked = TorchForwardMemory(model, inputs, recorder)
            with own_ops(recorder, keras.config.backend(), tracked and tracked.ledger) if tap_ops \
                    else contextlib.nullcontext() as tap, tracked or contextlib.nullcontext():
                recorder.own_ops = tap
                output = _forward(model, inputs, training, recorder, on_failure)
                if tracked is not None:
                    recorder.memory = tracked.stats(output, memory_batch)
    return recorder


def _forward(model: Any, inputs: Any, training: bool, recorder: LayerRecorder | None,
             on_failure: FailureHandler) -> Any:
    try:
        return model(inputs, training=training)
    except Exception as exc:
        error = on_failure(exc, recorder)
        if error is exc:
            raise
        raise error from exc


def _forward_error(model: Any, exc: Exception, recorder: LayerRecorder | None) -> ForwardError:
    """Name the innermost layer the failure went through, with the shapes it received."""
    what = keras_message(exc)
    expected = expected_inputs_text(model)
    hint = (inputs_hint("count_ops")
            + (f" ({expected})." if expected else "."))
    record = recorder.failed_record(exc) if recorder is not None else None
    if record is None:
        return ForwardError(f"the forward pass of {type(model).__name__} {getattr(model, 'name', '')!r} failed: "
                            f"{what}. {hint}")
    where = "the model" if record.path == "" else f"layer {record.path!r}"
    return ForwardError(f"the forward pass failed inside {where} ({type(record.layer).__name__}) called with "
                        f"{describe_call(record)}: {what}. {hint}")


def untracked_message(untracked: dict[str, int]) -> str:
    listing = ", ".join(f"{name} ({calls} call{'s' if calls != 1 else ''})"
                        for name, calls in sorted(untracked.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"{len(untracked)} layer(s) or part(s) ran with no FLOP formula and were counted as 0: {listing}. "
            "Register a formula with deeplite_like.backends.keras.counting.register_layer_formula, or mark the "
            "layer as free of arithmetic with register_free_layer.")
