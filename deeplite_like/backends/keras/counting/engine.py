"""``count_ops``: MACs and FLOPs of one forward pass of a Keras 3 model, per layer.

The model runs once, for real, on the inputs given (or made from a shape), with every layer's
``call`` recorded (``recorder.py``); the records are then priced here (``price``) by the layer
formulas (``registry.py``, ``formulas/``). ``method='graph'`` instead asks TensorFlow's
profiler (``tf_ops.py``). The model is left as found (see ``count_ops``).

A layer with a formula is priced by it. A layer without one - a custom layer, a ``Lambda``, a
subclassed ``Model.call`` doing ``ops.matmul`` next to its sublayers, ``ConvLSTM2D`` - is
priced by the framework operators it runs *itself*, outside the layers it calls (those are
priced by their own formulas), as the torch engine prices aten ops (``own_ops``). Each op goes
to the innermost recorded call running when it ran (``LayerRecorder.current``); ops with no
cost known and not known free are kept by name (``OpTap.unknown``), to be listed in
``OpCount.untracked`` when their call is priced op by op: never dropped silently.

On Keras' torch backend the same recorded forward can also measure peak memory
(``TorchForwardMemory``): a status reads MACs, the layer table and memory from one forward.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import deeplite_like.backends.keras.counting.formulas  # noqa: F401  (importing the package fills the formula table)
from deeplite_like.errors import (FormulaError, ForwardError, UntrackedLayerWarning, check_batch_size, check_flag,
                                  inputs_hint)
from deeplite_like.results import ActivationMemory, OpCount, OpStats, parent_names, roll_up_containers

from .._tf import import_keras, keras_message
from ..state import preserved_model_state
from ..tensors import expected_inputs_text, prepare_inputs, to_backend
from .recorder import CallRecord, LayerRecorder, SpecMaker, describe, describe_call, named_layers
from .registry import FREE, INFERENCE_IDENTITY, OP_MARKS, CountOptions, Entry, LayerCall, is_keras_layer, lookup
from .tf_ops import count_graph, tf_op_cost

__all__ = ["TORCH_TRACKING", "MemoryStats", "Observation", "OpTap", "TorchForwardMemory", "count_ops", "observe",
           "own_ops", "price", "run_recorded", "warn_if_untracked"]

METHODS = ("analytic", "graph")


def count_ops(model: Any, inputs_or_shape: Any, *, batch_size: int | None = None, method: str = "analytic",
              training: bool = False, causal_half: bool = False, warn_untracked: bool = True) -> OpCount:
    """Count the MACs and FLOPs (ints, for the batch that ran) of one forward pass of a Keras model.

    ``method='analytic'`` (default, any Keras backend): the model runs once on real tensors,
    every layer call is recorded and priced by its layer formula (``register_layer_formula``),
    with the same conventions and numbers as the torch backend. A layer with no formula (a
    custom layer, ``Lambda``, a subclassed model's ``call``) is priced by the framework
    operators it runs itself, outside its sublayers (``own_ops``: TensorFlow and torch
    backends; by_operator names them ``tf.MatMul``, ``aten.bmm``). ``OpCount.by_module`` is keyed
    by dotted layer paths (``"block1.conv"``; the model is ``""``) and nested: a parent
    includes its children, a shared layer is counted once per call. ``by_operator`` is keyed by
    layer class (``"Conv2D"``; ``"ops.Add"`` for operation nodes of functional models),
    ``module_ops`` by path then class. An operator with no cost known, run by a layer without
    a formula, is *untracked* (by op name): counted as 0, listed in ``OpCount.untracked`` and
    warned about once (``UntrackedLayerWarning``) unless ``warn_untracked=False``.

    On Keras' JAX backend, which has no operator hook, the operators a layer runs itself are read
    from the program JAX traces (``jax_ops.trace_program``: ``jax.make_jaxpr`` of the model's
    ``stateless_call``, no compilation): each primitive attributed to its innermost layer by JAX's
    name stack, priced (``jax.dot_general``...), ``scan`` bodies once per step; layers with a
    formula are priced by it, as on the other backends (once per step inside a ``scan``), so the
    three backends give the same counts; unknown primitives are untracked by name.

    ``method='graph'`` (TensorFlow backend only): TensorFlow's profiler counts the float ops of
    the model's traced graph at this batch size (``tf_ops.count_graph``): totals and
    ``by_operator`` by TF op type; MACs are half the FLOPs of contraction ops. It is a
    cross-check, complete only where TensorFlow has a FLOP statistic for every op (see
    ``tf_ops.py``).

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
    memory: Any = None  # on Keras' torch backend when asked: the forward's ``MemoryStats``


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
    own, repeats, untracked = recorder.own_ops, None, {}
    if import_keras().config.backend() == "jax":  # own arithmetic read from the traced program
        own, repeats, untracked = _traced_ops(model, inputs, training, recorder)
    result = price(recorder.records, CountOptions(training=bool(training), causal_half=bool(causal_half)),
                   own, repeats)
    for name, calls in untracked.items():
        result.untracked[name] = result.untracked.get(name, 0) + calls
    roll_up_containers(result.by_module, parent_names(name for name, _ in named_layers(model)))
    result.batch_size = batch
    return Observation(recorder, result, recorder.memory)


def _traced_ops(model: Any, inputs: Any, training: bool,
                recorder: LayerRecorder) -> tuple[OpTap, dict[int, int], dict[str, int]]:
    """Keras on JAX, where no operator hook exists: the program ``jax.make_jaxpr`` traces (``jax_ops``)
    stands in for one. Returns the own-operator tap ``price`` reads (a layer's own primitives, filed
    under the first recorded call of its path), each record's repeats (a layer inside an ``ops.scan``
    runs once per step but is recorded once; an operation node 0) and what is untracked beyond single primitives (a
    ``while`` with an unproven trip count)."""
    from .jax_ops import UNKNOWN_WHILE, trace_program

    try:
        traced = trace_program(model, inputs, training=bool(training),
                               paths=[name for name, _ in named_layers(model)])
    except Exception as exc:
        raise ForwardError(f"tracing {type(model).__name__} {getattr(model, 'name', '')!r} with jax.make_jaxpr "
                           f"failed: {keras_message(exc)}. On Keras' JAX backend the counts come from the traced "
                           "program: the model's call must be traceable (keras.ops.cond / ops.fori_loop instead of "
                           "a Python `if` or loop on a tensor's value); or count it with KERAS_BACKEND=tensorflow "
                           "or torch") from exc
    tap, seen = OpTap(recorder), set()
    for record in recorder.records:
        if record.path not in seen:
            seen.add(record.path)
            if record.path in traced.own:
                tap.costs[record.index] = traced.own[record.path]
            if record.path in traced.unknown:
                tap.unknown[record.index] = traced.unknown[record.path]
    # an operation node of a functional model (``h + x``: ops.Add) opens no name scope on JAX: its
    # primitives are the enclosing layer's own, priced there, so its formula counts 0 times here
    layer_type = import_keras().Layer
    repeats = {record.index: traced.repeats(record.path) if isinstance(record.layer, layer_type) else 0
               for record in recorder.records}
    untracked = {UNKNOWN_WHILE: traced.untracked[UNKNOWN_WHILE]} if UNKNOWN_WHILE in traced.untracked else {}
    return tap, repeats, untracked


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
    (``own_ops``): ``recorder.own_ops`` is then an ``OpTap`` (``None`` on a backend with no
    operator hook, JAX). ``memory_batch`` (with ``tap_ops``, Keras' torch backend): the same
    forward, run under ``torch.no_grad()`` as inference, also measures its peak memory for a batch
    of that size (``TorchForwardMemory``): ``recorder.memory``.

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


# -- pricing the recorded calls --------------------------------------------------------------
def operator_name(obj: Any, entry: Entry | None) -> str:
    """``Conv2D`` for a layer, ``ops.Add`` for a functional-graph operation."""
    if entry is not None and entry.name and entry is not FREE:
        return entry.name
    name = type(obj).__name__
    return name if is_keras_layer(obj) else f"ops.{name}"


def price(records: list[CallRecord], options: CountOptions, own_ops: OpTap | None = None,
          repeats: dict[int, int] | None = None) -> OpCount:
    """An ``OpCount`` from the records of one forward pass. For each record, in call order:

    * a call that did not finish (it raised; a profile may have caught it) and the calls inside
      it: skipped;
    * inside an opaque formula's call (``MultiHeadAttention``'s projections, ``LSTM``'s cell):
      skipped, the enclosing formula priced it;
    * a formula: its ``Cost`` goes to the layer's path and every enclosing call's path (the real
      call stack: ``by_module`` is nested, a shared layer counts under whichever parent called it,
      once per call), to ``by_operator`` under the layer's class name (``ops.<Name>`` for graph
      operations) and to ``module_ops[path]``; parts it reports as unpriceable go to ``untracked``;
    * no formula (or marked ``OP_LEVEL``), with the operators tapped (``own_ops``): the ops it ran
      itself (outside the layers it called, which are priced on their own) are priced one by one, by op name
      (``tf.BatchMatMulV2``); ops with no cost known go to ``untracked`` by op name;
    * ``OP_LEVEL`` with no operators tapped (JAX): untracked, by class name (``INFERENCE_IDENTITY``:
      free at inference);
    * no formula, no operators tapped, but calls were recorded inside it: a container, its
      cost is its children's;
    * no formula, nothing inside, known free: 0;
    * otherwise: untracked (counted as 0, listed by class name).

    ``own_ops``: the operators each call ran itself (``run_recorded(..., tap_ops=True)``).
    ``repeats``: record index -> how many times that call runs per forward (Keras on JAX: a layer
    recorded once inside an ``ops.scan`` of 6 steps runs 6 times); a formula's cost is multiplied.
    """
    result = OpCount()
    by_module, untracked = result.by_module, result.untracked
    by_module.setdefault("", OpStats())
    cache: dict[type, Entry | None] = {}
    chains: list[tuple[str, ...] | None] = [None] * len(records)  # None: skipped (unfinished, or inside opaque)
    opaque = [False] * len(records)
    total = OpStats()

    for record in records:
        i, parent = record.index, record.parent
        if not record.finished or (parent >= 0 and (chains[parent] is None or opaque[parent])):
            continue
        enclosing = chains[parent] if parent >= 0 else (() if record.path == "" else ("",))
        chain = enclosing if record.path in enclosing else enclosing + (record.path,)
        chains[i] = chain
        by_module.setdefault(record.path, OpStats()).calls += 1

        entry = lookup(type(record.layer), cache)
        if entry is FREE:
            continue
        if entry is None or entry in OP_MARKS:
            if own_ops is not None:
                for name, calls in own_ops.unknown.get(i, {}).items():
                    untracked[name] = untracked.get(name, 0) + calls
                for name, op in own_ops.costs.get(i, {}).items():
                    _add(result, chain, record.path, name, op.macs, op.flops, op.calls)
                    total.add(op.macs, op.flops, op.calls)
            elif entry is INFERENCE_IDENTITY and not options.training:
                continue  # the identity at inference: free
            elif record.children == 0 or entry is not None:
                name = operator_name(record.layer, None)
                untracked[name] = untracked.get(name, 0) + 1
            continue
        opaque[i] = entry.opaque
        call = LayerCall(record.layer, record.path, record.args, record.kwargs, record.outputs, options)
        macs, flops = _apply(entry, call, record)
        times = repeats.get(i, 1) if repeats else 1
        macs, flops = macs * times, flops * times
        for part in call.untracked_parts:
            untracked[part] = untracked.get(part, 0) + 1
        _add(result, chain, record.path, operator_name(record.layer, entry), macs, flops, times)
        total.add(macs, flops, times)

    result.macs, result.flops = total.macs, total.flops
    return result


def _add(result: OpCount, chain: tuple[str, ...], path: str, name: str, macs: int, flops: int, calls: int) -> None:
    """Attribute a cost to every enclosing call's path, and to ``name`` overall and under ``path``."""
    for enclosing in chain:
        result.by_module[enclosing].add(macs, flops, 0)
    for table in (result.by_operator, result.module_ops.setdefault(path, {})):
        table.setdefault(name, OpStats()).add(macs, flops, calls)


def _apply(entry: Entry, call: LayerCall, record: CallRecord) -> tuple[int, int]:
    try:
        cost = entry.formula(call)
        macs, flops = int(cost[0]), int(cost[1])
    except Exception as exc:
        where = f"layer {record.path!r}" if record.path else "the model"
        raise FormulaError(
            f"the formula {getattr(entry.formula, '__qualname__', entry.formula)!r} for {where} "
            f"({type(record.layer).__name__}) failed on {describe_call(record)} -> {describe(record.outputs)}: "
            f"{type(exc).__name__}: {exc}. It must return a Cost(macs, flops); fix it, or replace it with "
            "register_layer_formula(..., override=True).") from exc
    return macs, flops


# -- the operators a layer call runs itself --------------------------------------------------
class OpTap:
    """Per recorded call (by index): ``costs[i][op name]`` and ``unknown[i][op name] -> calls``."""

    def __init__(self, recorder: LayerRecorder) -> None:
        self.costs: dict[int, dict[str, OpStats]] = {}
        self.unknown: dict[int, dict[str, int]] = {}
        self._recorder = recorder

    def add(self, name: str, cost: tuple[int, int] | None) -> None:
        """One op run by the current call: its ``(macs, flops)``, or ``None`` when its cost is unknown."""
        index = self._recorder.current
        if index < 0:
            return  # outside every layer call (input conversion before the model's call)
        if cost is None:
            table = self.unknown.setdefault(index, {})
            table[name] = table.get(name, 0) + 1
            return
        self.costs.setdefault(index, {}).setdefault(name, OpStats()).add(int(cost[0]), int(cost[1]), 1)


@contextlib.contextmanager
def own_ops(recorder: LayerRecorder, backend: str, ledger: Any = None) -> Iterator[OpTap | None]:
    """Tap the ops run while the block runs, in this thread, for Keras' ``backend`` (None: no hook).

    TensorFlow
        An op callback (``tensorflow.python.framework.op_callbacks``, thread-local) sees every eager
        op, priced by ``tf_ops.tf_op_cost`` (``tf.MatMul``, ``tf.Softmax``...).
    torch
        A ``TorchDispatchMode`` (thread-local) sees every aten op, priced by the torch backend's
        formula table (``aten.bmm``...).
    JAX
        No operator hook: ``own_ops`` returns ``None``; ``observe`` replaces the recorded counts
        with the traced program's own operators (``jax_ops.trace_program``).

    ``ledger`` (torch only): a storage ledger told of every op's outputs (``TorchForwardMemory``).
    """
    if backend == "tensorflow":
        with _tf_tap(OpTap(recorder)) as tap:
            yield tap
    elif backend == "torch":
        with _torch_tap(OpTap(recorder), ledger) as tap:
            yield tap
    else:
        yield None


@contextlib.contextmanager
def _tf_tap(tap: OpTap) -> Iterator[OpTap]:
    from tensorflow.python.framework import op_callbacks

    def on_op(op_type: Any, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None, graph: Any = None) -> None:
        if graph is not None:  # an op added to a graph being traced, not run
            return None
        name = op_type.decode() if isinstance(op_type, bytes) else str(op_type)
        cost = tf_op_cost(name, tuple(inputs or ()), attrs, tuple(outputs or ()))
        if cost is not None and outputs and all(len(t.shape) == 0 for t in (*(inputs or ()), *outputs)):
            cost = (0, 0)  # scalars alone (a scale from a shape): JAX and torch compute them in Python
        tap.add(f"tf.{name}", cost)
        return None

    op_callbacks.add_op_callback(on_op)
    try:
        yield tap
    finally:
        with contextlib.suppress(KeyError, ValueError):  # removed already (op_callbacks.clear_op_callbacks())
            op_callbacks.remove_op_callback(on_op)


@contextlib.contextmanager
def _torch_tap(tap: OpTap, ledger: Any) -> Iterator[OpTap]:
    from deeplite_like.backends.torch.counting.recorder import make

    from .torch_ops import OpPricingMode

    with make(OpPricingMode, tap.add, ledger):
        yield tap


# -- activation memory: its record, and the recorded forward's on Keras' torch backend -------
TORCH_TRACKING = "eager torch forward, allocation tracking"


@dataclass(frozen=True)
class MemoryStats(ActivationMemory):
    """Activation memory of one forward pass, in bytes (the fields: ``measurements.ActivationMemory``).

    ``method`` says how it was measured (``GRAPH_SIMULATION`` on TensorFlow). ``constant_bytes``:
    graph constants (excluded). ``opaque_ops``: ops running nested functions, whose internals are
    not seen. ``unsized``: ops whose output shape was not static (counted 0). ``program_bytes`` (JAX):
    the compiled program's own sizes, ``compiled.memory_analysis()`` as XLA reports them (``argument``:
    parameters + inputs, ``output``, ``alias``, ``temp``, ``generated_code``, ``peak`` when XLA gives it).
    """

    method: str
    constant_bytes: int = 0
    opaque_ops: tuple[str, ...] = ()
    unsized: tuple[str, ...] = ()
    program_bytes: tuple[tuple[str, int], ...] = ()
    timeline: tuple[tuple[str, int], ...] = field(default=(), repr=False)


class TorchForwardMemory:
    """Peak memory of one recorded forward on Keras' torch backend (``run_recorded``).

    ``ledger``: the PyTorch backend's ``StorageLedger``, told of every operator by the recorder's
    operator tap; the inputs are live from the start, the model's variables are not activations;
    the innermost recorded layer call names the peak. Entered around the forward: ``torch.no_grad()``.
    """

    def __init__(self, model: keras.layers.Layer, inputs: Any, recorder: LayerRecorder) -> None:
        import torch

        from deeplite_like.backends.torch.tensors import StorageLedger, spanned_bytes, storage_key, tensor_leaves

        leaves = tensor_leaves(inputs)
        weights = [variable.value for variable in model.variables]
        external = {key for tensor in (*leaves, *tensor_leaves(weights)) if (key := storage_key(tensor)) is not None}

        def where() -> str:
            index = recorder.current
            return recorder.records[index].path if index >= 0 else ""

        self.ledger = StorageLedger(spanned_bytes(leaves), external, where)
        self._no_grad = torch.no_grad()

    def __enter__(self) -> TorchForwardMemory:
        self._no_grad.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.ledger.detach_all()
        self._no_grad.__exit__(*exc_info)

    def stats(self, output: Any, batch_size: int) -> MemoryStats:
        """The ``MemoryStats`` of the forward that just returned ``output`` (still alive)."""
        from deeplite_like.backends.torch.tensors import memory_stats

        measured = memory_stats(self.ledger, output, meta=False, grad=False, batch_size=batch_size)
        shared = {f.name: getattr(measured, f.name) for f in dataclasses.fields(ActivationMemory)}
        return MemoryStats(**shared, method=TORCH_TRACKING)
