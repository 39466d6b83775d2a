"""Recording the layer calls of a real forward pass of a Keras model: the one mechanism.

Every part of the Keras backend that needs to know which layer runs - the counting engine,
the layer-wise summary, failure notes, the memory simulation's owners, the profiles - records
through ``LayerRecorder`` here, and names layers with ``named_layers`` here.

What is recorded
    One ``CallRecord`` per call of every layer (and functional-graph operation) of the model,
    in call order: the layer object, its qualified path, the enclosing call (nesting follows
    the real call stack, so a shared layer is recorded once per call, under whichever parent
    called it), and the shapes and dtypes of what ``call`` received and returned
    (``TensorSpec``s: tensors are not kept alive). With ``keep_records=False`` nothing is
    kept but where an exception came from (cheap enough to wrap a timing loop).

How: wrapping ``call`` on the instance, for the duration - model-scoped and thread-safe
    Keras 3 has no forward hooks. Every path into a layer's computation goes through its
    ``call`` method: ``Layer.__call__`` (functional graphs, ``Sequential``, subclassed models)
    looks up ``self.call``, and ``TimeDistributed`` calls ``self.layer.call`` directly. So
    ``LayerRecorder`` sets an instance attribute ``call`` (a thin wrapper around the bound
    method) on each layer of the model when entered, and removes it, or puts back an instance
    attribute the user had, in ``finally`` when left, also when the forward raises. Keras does
    the same for its GPTQ/AWQ calibration (``keras/src/quantizers/gptq_core.py``). The class
    (``keras.layers.Layer``) is never touched: other models are unaffected, and calls made
    by other threads - even of this model's layers - pass straight through (only the thread
    that entered the recorder is recorded), so recorders in several threads cannot see each
    other's calls nor restore in the wrong order (a forward split over threads, such as a
    distribution strategy's replicas, is recorded only in the entering thread). Attributes
    are set with ``object.__setattr__`` to bypass Keras' attribute tracking (and
    ``torch.nn.Module.__setattr__`` on the torch backend).

    ``Layer.__call__`` checks the first input against the layer's ``input_spec``
    (``_assert_input_compatibility``) *before* ``call``; that method is wrapped the same way
    (when the Keras version has it) so that a wrong input shape is attributed to the layer
    whose check failed, with the input it was given, not to its parent.

Layers are named by dotted paths of ``layer.name``s from the model (the root is ``""``),
like the torch backend's qualified names (``"block1.conv"``); two siblings with the same
name get ``_1``, ``_2`` suffixes, a layer reachable from two parents keeps its first path.
``named_layers`` is the only definition of these names in the Keras backend.

What is kept of a tensor
    A ``TensorSpec`` (shape, standardised dtype, whether a Keras mask rode along), never the
    tensor: nothing of the run is kept alive. ``SpecMaker`` makes them and tells a
    shape-inference call (Keras building a layer) from a real one; ``describe`` and
    ``shapes_text`` show them to people (error messages, the layer table).
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable

from deeplite_like.safety import protected, uninterruptible

from ..tensors import format_shapes, nbytes
from .registry import TensorSpec, specs_in

__all__ = ["CallRecord", "LayerRecorder", "SpecMaker", "describe", "describe_call", "named_layers", "shapes_text",
           "spec_bytes"]


@dataclass
class CallRecord:
    """One call of one layer: what it got and returned (as ``TensorSpec``s), and where it ran."""

    index: int
    layer: Any
    path: str
    parent: int  # index of the enclosing record, -1 at the top
    args: tuple
    kwargs: dict
    outputs: Any = None
    children: int = 0  # calls recorded directly inside this one
    finished: bool = False  # the call returned (it did not raise)
    start_mark: int = -1  # the recorder's marker() when the call began and when it ended (-1: no marker)
    end_mark: int = -1


def _direct_children(obj: Any) -> list[Any]:
    """The layers (and, for functional models, graph operations) directly inside ``obj``."""
    children: list[Any] = []
    flatten = getattr(obj, "_flatten_layers", None)
    if callable(flatten):
        children.extend(flatten(include_self=False, recursive=False))
    else:
        children.extend(getattr(obj, "_layers", ()) or ())
    try:
        operations = obj.operations  # functional models: layers and ops (``x + y``) of the graph
    except AttributeError:
        operations = ()
    known = {id(child) for child in children}
    for op in operations or ():
        if id(op) not in known:
            children.append(op)
            known.add(id(op))
    return children


def named_layers(model: Any) -> list[tuple[str, Any]]:
    """``(path, layer)`` for the model (``""``) and every layer and operation inside, depth first."""
    seen: set[int] = set()
    order: list[tuple[str, Any]] = []

    def visit(obj: Any, path: str) -> None:
        seen.add(id(obj))
        order.append((path, obj))
        taken: set[str] = set()
        for child in _direct_children(obj):
            if id(child) in seen:
                continue
            name = str(getattr(child, "name", type(child).__name__))
            unique, suffix = name, 0
            while unique in taken:
                suffix += 1
                unique = f"{name}_{suffix}"
            taken.add(unique)
            visit(child, f"{path}.{unique}" if path else unique)

    visit(model, "")
    return order


#: The method ``Layer.__call__`` checks the first input with, before ``call`` (Keras 3).
_INPUT_CHECK = "_assert_input_compatibility"


class LayerRecorder:
    """Records the calls of the given layers made by this thread while entered (``with LayerRecorder(...)``).

    Args:
        layers: ``(path, layer)`` pairs, e.g. ``named_layers(model)``.
        to_specs: maps a nested structure of tensors to the same structure of ``TensorSpec``s.
        is_symbolic: True for arguments of a symbolic (shape-inference) call, which is run
            through without being recorded.
        keep_records: False keeps no ``CallRecord``s, only where exceptions came from
            (``failed_record``).
        marker: called when a recorded call begins and ends (``CallRecord.start_mark`` /
            ``end_mark``), e.g. the number of ops in the graph being traced.

    Not re-entrant; several recorders may be nested (the inner one wraps the outer one's
    wrappers and is left first).
    """

    def __init__(self, layers: list[tuple[str, Any]], to_specs: Callable[[Any], Any],
                 is_symbolic: Callable[[Any], bool], *, keep_records: bool = True,
                 marker: Callable[[], int] | None = None):
        self.records: list[CallRecord] = []
        self.own_ops: Any = None  # an own_ops.OpTap when the engine tapped the operators (run_recorded)
        self.memory: Any = None  # the forward's memory.MemoryStats when the engine measured it (torch backend)
        self._layers = layers
        self._to_specs = to_specs
        self._is_symbolic = is_symbolic
        self._keep = keep_records
        self._marker = marker
        self._thread: int | None = None  # the recording thread while entered
        self._stack: list[int] = []
        self._saved: list[tuple[Any, str, bool, Any]] = []  # (layer, attribute, had it on the instance, its value)
        self._failures: dict[int, tuple[BaseException, CallRecord]] = {}  # id(exception) -> where it came from
        self._failure_order: list[int] = []

    @property
    def layers(self) -> list[tuple[str, Any]]:
        """The ``(path, layer)`` pairs being recorded."""
        return self._layers

    @property
    def current(self) -> int:
        """The index of the innermost recorded call now running in this thread (-1: none)."""
        return self._stack[-1] if self._stack and self._recording() else -1

    def __enter__(self) -> "LayerRecorder":
        if self._thread is not None:
            raise RuntimeError("this LayerRecorder is already recording; make a new one to nest recordings")
        self._thread = threading.get_ident()
        try:
            for path, layer in self._layers:
                self._patch(layer, path)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._restore()

    # -- patching ---------------------------------------------------------------------------
    def _patch(self, layer: Any, path: str) -> None:
        if getattr(layer, "__dict__", None) is None:
            return  # no instance attributes (__slots__): the layer's calls count toward its parent
        self._set(layer, "call", self._wrapper(layer, path, layer.call))
        check = getattr(layer, _INPUT_CHECK, None)
        if callable(check):
            self._set(layer, _INPUT_CHECK, self._check_wrapper(layer, path, check))

    def _set(self, layer: Any, name: str, value: Any) -> None:
        instance_dict = layer.__dict__
        self._saved.append((layer, name, name in instance_dict, instance_dict.get(name)))
        object.__setattr__(layer, name, value)

    @protected
    def _restore(self) -> None:
        with uninterruptible():  # (every wrapper is taken off, whatever interrupts it)
            while self._saved:
                layer, name, had, value = self._saved[-1]
                if had:
                    object.__setattr__(layer, name, value)
                else:
                    layer.__dict__.pop(name, None)
                self._saved.pop()
            self._thread = None

    def _recording(self) -> bool:
        return threading.get_ident() == self._thread

    def _wrapper(self, layer: Any, path: str, original: Callable) -> Callable:
        recorder = self

        @functools.wraps(original)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not recorder._recording():  # another thread, or after the recording: not ours
                return original(*args, **kwargs)
            return recorder._run(layer, path, original, args, kwargs)

        return call

    def _check_wrapper(self, layer: Any, path: str, original: Callable) -> Callable:
        recorder = self

        @functools.wraps(original)
        def check(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except BaseException as exc:
                if recorder._recording():
                    recorder._failed(exc, lambda: recorder._record(layer, path, args, kwargs, -1))
                raise

        return check

    # -- recording --------------------------------------------------------------------------
    def _record(self, layer: Any, path: str, args: tuple, kwargs: dict, index: int) -> CallRecord:
        parent = self._stack[-1] if self._stack else -1
        return CallRecord(index, layer, path, parent, self._to_specs(args), self._to_specs(kwargs))

    def _failed(self, exc: BaseException, make: Callable[[], CallRecord]) -> None:
        if id(exc) not in self._failures:  # the first record to see it is the innermost
            self._failures[id(exc)] = (exc, make())
            self._failure_order.append(id(exc))

    def _handled(self, mark: int) -> None:
        """A call returned normally: the failures seen inside it were caught there; forget them.

        (Keeping a caught exception would keep its traceback's frames, and their tensors, alive.)
        """
        while len(self._failure_order) > mark:
            self._failures.pop(self._failure_order.pop(), None)

    def _run(self, layer: Any, path: str, original: Callable, args: tuple, kwargs: dict) -> Any:
        mark = len(self._failure_order)
        if not self._keep:
            try:
                outputs = original(*args, **kwargs)
            except BaseException as exc:
                self._failed(exc, lambda: self._record(layer, path, args, kwargs, -1))
                raise
            self._handled(mark)
            return outputs
        if self._is_symbolic((args, kwargs)):
            return original(*args, **kwargs)
        record = self._record(layer, path, args, kwargs, len(self.records))
        self.records.append(record)
        if record.parent >= 0:
            self.records[record.parent].children += 1
        self._stack.append(record.index)
        if self._marker is not None:
            record.start_mark = self._marker()
        try:
            outputs = original(*args, **kwargs)
        except BaseException as exc:
            self._failed(exc, lambda: record)
            raise
        finally:
            self._stack.pop()
            if self._marker is not None:
                record.end_mark = self._marker()
        record.outputs = self._to_specs(outputs)
        record.finished = True
        self._handled(mark)
        return outputs

    def failed_record(self, exc: BaseException) -> CallRecord | None:
        """The innermost recorded call that ``exc`` (or an exception it was raised from) went through.

        A call that failed its input check has ``index == -1`` (it never reached ``call``).
        """
        found, seen, cause = None, set(), exc
        while cause is not None and id(cause) not in seen:  # Keras re-raises new exceptions "from None"
            seen.add(id(cause))
            entry = self._failures.get(id(cause))
            if entry is not None and entry[0] is cause:
                found = entry[1]
            cause = cause.__cause__ or cause.__context__
        return found


# -- recorded tensors: specs, and specs described for people ------------------------------
class SpecMaker:
    """Tensors -> ``TensorSpec`` (shape, standardised dtype, Keras mask) across nested structures."""

    def __init__(self, keras: Any):
        self._keras = keras
        self._standardize = keras.backend.standardize_dtype
        self._keras_tensor = keras.KerasTensor

    def leaf(self, value: Any) -> Any:
        if isinstance(value, (bool, int, float, str, bytes)) or value is None:
            return value
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is None or dtype is None:
            return value
        try:
            dims = tuple(None if d is None else int(d) for d in shape)
            dtype_name = self._standardize(dtype)
        except (TypeError, ValueError):
            return value
        return TensorSpec(dims, dtype_name, getattr(value, "_keras_mask", None) is not None)

    def tree(self, structure: Any) -> Any:
        """``structure`` with every tensor replaced by its ``TensorSpec``."""
        return self._keras.tree.map_structure(self.leaf, structure)

    def is_symbolic(self, structure: Any) -> bool:
        """A shape-inference call (Keras building a layer): symbolic tensors, or unknown sizes.

        On TensorFlow, Keras infers output specs by tracing ``call`` on placeholders whose batch
        is unknown: such a call is not part of the forward that runs.
        """
        for leaf in self._keras.tree.flatten(structure):
            if isinstance(leaf, self._keras_tensor):
                return True
            shape = getattr(leaf, "shape", None)
            if shape is not None and not isinstance(leaf, (int, float)) and any(d is None for d in shape):
                return True
        return False

    def is_keras_tensor(self, structure: Any) -> bool:
        """Keras' own symbolic tensors only (a traced ``tf.function`` call is not symbolic here)."""
        return any(isinstance(leaf, self._keras_tensor) for leaf in self._keras.tree.flatten(structure))


def spec_bytes(tree: Any) -> int:
    """Bytes of the ``TensorSpec``s in ``tree`` (elements x itemsize; 0 for an unknown size)."""
    return sum(nbytes(spec.shape, spec.dtype) for spec in specs_in(tree))


def shapes_text(tree: Any) -> str:
    """``'2x8, 2x1'``: the shapes of the specs in ``tree`` for display."""
    return format_shapes(spec.shape for spec in specs_in(tree))


def describe(value: Any) -> str:
    """``Tensor[float32, 2x5]`` for specs (``?`` for an unknown dimension), recursively for
    containers: for error messages, spelled as every other message spells a tensor."""
    if isinstance(value, TensorSpec):
        dims = "x".join("?" if d is None else str(d) for d in value.shape) if value.shape else "scalar"
        return f"Tensor[{value.dtype}, {dims}]"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in value.items()) + "}"
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__}(...)"


def describe_call(record: Any) -> str:
    """``(Tensor[float32, 2x5], training=False)``: the arguments of a recorded call."""
    parts = [describe(a) for a in record.args] + [f"{k}={describe(v)}" for k, v in record.kwargs.items()]
    return "(" + ", ".join(parts) + ")"
