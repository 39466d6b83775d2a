"""Parameters of a Keras 3 model (counts and sizes, in elements and bytes), and the per-layer table.

Keras has one kind of weight; PyTorch has parameters and buffers. So that a Keras model and
the same architecture in PyTorch report the same ``total_params``, weights are sorted the way
PyTorch sorts them (rules tested row by row in ``tests/keras/test_params.py``):

* A weight created trainable (it is in its layer's own trainable list) is a **parameter**,
  also after the layer was frozen (``layer.trainable = False``): it is then a non-trainable
  (frozen) parameter, as a ``requires_grad=False`` tensor is in PyTorch.
* A weight created non-trainable is **state** (PyTorch's buffer): batch-norm moving mean and
  variance, a ``Normalization`` layer's statistics. Exception: in a quantized layer
  (``layer.quantize('int8')``) the quantized kernel is a frozen parameter, as a packed int8
  weight is in PyTorch; its ``*_scale`` / ``*zero_point`` weights are state.
* RNG seed states (``SeedGenerator``), optimizer and metric variables are not weights
  (``model.weights`` omits them) and are not counted.
* A weight shared by several layers (a layer called twice, a tied weight) counts once.
* Bytes are ``elements x itemsize`` of each weight's own dtype. Under a mixed-precision
  policy (``mixed_float16``) the variables stay float32 and count 4 bytes each; only the
  computation runs in float16.

Keras' own ``model.summary()`` calls frozen parameters *and* state "non-trainable params";
``ParamStats.keras_non_trainable`` gives that figure for comparison. The profiler's
``total_params`` metric follows Keras' convention (``model.count_params()``: parameters +
state, ``compute.ComputeParams``), with this split in its details.

The per-layer summary (``layerwise_summary``, ``layer_table``): one row per layer with shapes,
params, MACs, FLOPs and bytes. Its facts come from one recorded forward pass (the counting
engine's ``observe``): its records are priced exactly as ``count_ops`` prices them, and the
same records give each layer's input and output shapes and output bytes (first call) and its
number of calls. Rows, counts and params are keyed by the same qualified layer names
(``counting.recorder.named_layers``), so they cannot disagree. The rendering is a
``TableReport`` with the same columns as the PyTorch backend's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.counting.engine import Observation, observe, warn_if_untracked
from deeplite_like.backends.keras.counting.recorder import CallRecord, named_layers, shapes_text, spec_bytes
from deeplite_like.backends.keras.inputs import add_failure_note
from deeplite_like.backends.keras.tensors import dtype_bytes, prepare_inputs
from deeplite_like.results import ParamStats as SharedParamStats
from deeplite_like.reports import TableReport
from deeplite_like.units import format_bytes, format_share

keras = import_keras()

__all__ = ["COLUMNS", "HEADERS", "ParamStats", "WeightInfo", "dtype_bytes", "layer_table", "layerwise_summary",
           "parameter_stats", "params_by_layer", "weight_table"]

_STATE_SUFFIXES = ("scale", "zero_point")


@dataclass(frozen=True)
class WeightInfo:
    """One weight: its path, kind (``'parameter'`` or ``'state'``), trainable now, elements, bytes.

    ``layer`` is the qualified name of the layer that created it (``counting.recorder.
    named_layers``, as ``OpCount.by_module``; ``""``: the model itself).
    """

    path: str
    kind: str
    trainable: bool
    elements: int
    nbytes: int
    dtype: str
    layer: str


@dataclass(frozen=True)
class ParamStats(SharedParamStats):
    """The shared ``ParamStats``; ``buffer_count`` / ``buffer_bytes`` are the state weights
    (batch-norm moving statistics)."""

    @property
    def keras_non_trainable(self) -> int:
        """What ``model.summary()`` calls non-trainable params: frozen parameters plus state."""
        return self.non_trainable_params + self.buffer_count


def _is_layer(x: Any) -> bool:
    return isinstance(x, keras.layers.Layer)


def _layers(model: keras.layers.Layer) -> list[keras.layers.Layer]:
    """``model`` and every layer under it, each once (Keras' own recursive walk)."""
    return list(model._flatten_layers(include_self=True, recursive=True))


def _check_model(model: Any, who: str) -> None:
    if not _is_layer(model):
        raise TypeError(f"{who} expects a Keras model or layer, got {type(model).__module__}."
                        f"{type(model).__qualname__}")


def weight_table(model: keras.layers.Layer) -> list[WeightInfo]:
    """Every weight of ``model`` once, classified (see the module docstring), in ``model.weights`` order."""
    _check_model(model, "weight_table")
    return [info for _, info in _classified(model)]


def _classified(model: keras.layers.Layer) -> list[tuple[Any, WeightInfo]]:
    """``(variable, WeightInfo)`` for every weight of ``model`` once, in ``model.weights`` order.

    Paths are not unique (two sibling layers with the same name give ``dup/kernel`` twice), so
    callers that need to find a variable again key by the variable object.
    """
    created_trainable: set[int] = set()
    owner: dict[int, keras.layers.Layer] = {}
    for layer in _layers(model):
        for variable in getattr(layer, "_trainable_variables", ()):
            created_trainable.add(id(variable))
            owner.setdefault(id(variable), layer)
        for variable in getattr(layer, "_non_trainable_variables", ()):
            owner.setdefault(id(variable), layer)
    trainable_now = {id(v) for v in model.trainable_weights}  # Keras' own answer (frozen layers excluded)
    paths = {id(obj): path for path, obj in named_layers(model)}
    rows: list[tuple[Any, WeightInfo]] = []
    seen: set[int] = set()
    for variable in model.weights:
        if id(variable) in seen:
            continue
        seen.add(id(variable))
        layer = owner.get(id(variable))
        quantized = layer is not None and getattr(layer, "quantization_mode", None) is not None
        short = variable.path.rsplit("/", 1)[-1]
        if id(variable) in created_trainable:
            kind = "parameter"
        elif quantized and not short.endswith(_STATE_SUFFIXES):
            kind = "parameter"
        else:
            kind = "state"
        elements = math.prod(int(d) for d in variable.shape)
        dtype = keras.backend.standardize_dtype(variable.dtype)
        trainable = kind == "parameter" and id(variable) in trainable_now
        rows.append((variable, WeightInfo(path=variable.path, kind=kind, trainable=trainable, elements=elements,
                                          nbytes=elements * dtype_bytes(dtype), dtype=dtype,
                                          layer=paths.get(id(layer), layer.name) if layer is not None else "")))
    return rows


def parameter_stats(model: keras.layers.Layer) -> ParamStats:
    """Count ``model``'s parameters and state (elements) and their bytes; see the module docstring.

    Raises ``ValueError`` for a model that is not built yet (it has no weights to count).
    Reads shapes and dtypes only.
    """
    _check_model(model, "parameter_stats")
    if not model.built:
        raise ValueError(
            f"Keras model {model.name!r} is not built yet, so it has no weights to count. Call it once on a "
            f"batch, or model.build(input_shape), or compute a data-driven metric (macs) first")
    trainable = frozen = param_bytes = buffer_count = buffer_bytes = 0
    by_dtype: dict[str, int] = {}
    buffer_by_dtype: dict[str, int] = {}
    for weight in weight_table(model):
        if weight.kind == "parameter":
            if weight.trainable:
                trainable += weight.elements
            else:
                frozen += weight.elements
            param_bytes += weight.nbytes
            by_dtype[weight.dtype] = by_dtype.get(weight.dtype, 0) + weight.nbytes
        else:
            buffer_count += weight.elements
            buffer_bytes += weight.nbytes
            buffer_by_dtype[weight.dtype] = buffer_by_dtype.get(weight.dtype, 0) + weight.nbytes
    return ParamStats(total_params=trainable + frozen, trainable_params=trainable, non_trainable_params=frozen,
                      param_bytes=param_bytes, buffer_count=buffer_count, buffer_bytes=buffer_bytes,
                      by_dtype=by_dtype, buffer_by_dtype=buffer_by_dtype)


def params_by_layer(model: keras.layers.Layer) -> dict[int, int]:
    """``id(layer) -> parameter elements`` of each layer and its sublayers (state excluded, shared once).

    Weights are classified once, for the whole model (``weight_table``), so a layer's figure
    is the sum of the parameters ``parameter_stats`` counts in its part of the model. An
    unbuilt layer has none.
    """
    _check_model(model, "params_by_layer")
    kinds = {id(variable): info for variable, info in _classified(model)}
    totals: dict[int, int] = {}
    for layer in _layers(model):
        seen: set[int] = set()
        total = 0
        for variable in layer.weights:
            info = kinds.get(id(variable))
            if id(variable) in seen or info is None or info.kind != "parameter":
                continue
            seen.add(id(variable))
            total += info.elements
        totals[id(layer)] = total
    return totals


# -- the per-layer table -----------------------------------------------------------------------
COLUMNS = ("module", "type", "input_shapes", "output_shapes", "params", "macs", "flops", "activation_bytes",
           "macs_share", "calls")
HEADERS = {"module": "Layer", "type": "Type", "input_shapes": "Input shapes", "output_shapes": "Output shapes",
           "params": "Params", "macs": "MACs", "flops": "FLOPs", "activation_bytes": "Output bytes",
           "macs_share": "MACs %", "calls": "Calls"}


def layerwise_summary(model: keras.layers.Layer, inputs: Any, training: bool = False, causal_half: bool = False,
                      max_depth: int | None = None) -> TableReport:
    """A ``TableReport`` with one row per layer that ran (a nested model's row includes its layers).

    ``input_shapes`` are the tensors the layer's ``call`` received (a mask Keras passes
    included), ``activation_bytes`` the size of its output tensors (first call); ``macs_share``
    is the layer's MACs over the whole model's, in percent. ``module`` is the qualified layer
    name as in the torch backend (``""`` for the model, shown as ``(model)``);
    ``max_depth`` hides deeper layers (their cost stays in their parents). The counts are
    ``count_ops``' analytic ones: its ``method='graph'`` has no per-layer breakdown. A failing
    forward raises its own exception, with a note naming the layer that failed.
    """
    inputs, batch = prepare_inputs(model, inputs, None, keras)
    seen = observe(model, inputs, batch, training=bool(training), causal_half=bool(causal_half),
                   on_failure=lambda error, rec: add_failure_note(model, inputs, error, rec))
    warn_if_untracked(seen.counts, stacklevel=2)
    return layer_table(model, seen, max_depth)


def layer_table(model: keras.layers.Layer, seen: Observation, max_depth: int | None = None) -> TableReport:
    """The per-layer table of one observation of ``model`` (``layerwise_summary``)."""
    recorder, counted, batch = seen.recorder, seen.counts, seen.counts.batch_size
    first: dict[str, CallRecord] = {}  # path -> first finished call, in call order (a parent before its layers)
    calls: dict[str, int] = {}
    for record in recorder.records:
        if record.finished:
            first.setdefault(record.path, record)
            calls[record.path] = calls.get(record.path, 0) + 1
    params = params_by_layer(model)
    position = {path: index for index, path in enumerate(first)}
    layers = [(path, layer) for path, layer in recorder.layers if isinstance(layer, keras.layers.Layer)]
    total_macs = counted.macs
    rows = []
    # Rows in call order; layers that did not run last.
    for name, layer in sorted(layers, key=lambda item: (position.get(item[0], len(position)), item[0])):
        record = first.get(name)
        stats = counted.by_module.get(name)
        if record is None and stats is None:
            continue  # never ran (an InputLayer)
        depth = 0 if name == "" else name.count(".") + 1
        if max_depth is not None and depth > max_depth:
            continue
        macs = stats.macs if stats else 0
        rows.append({
            "module": name,
            "type": type(layer).__name__,
            "input_shapes": shapes_text((record.args, record.kwargs)) if record else "",
            "output_shapes": shapes_text(record.outputs) if record else "",
            "params": params.get(id(layer), 0),
            "macs": macs,
            "flops": stats.flops if stats else 0,
            "activation_bytes": spec_bytes(record.outputs) if record else 0,
            "macs_share": 100.0 * macs / total_macs if total_macs else 0.0,
            "calls": stats.calls if stats else calls.get(name, 0),
        })
    notes = [f"batch size {batch}; MACs and FLOPs of a layer include its sublayers'" if batch else
             "MACs and FLOPs of a layer include its sublayers'"]
    if counted.untracked:
        notes.append("untracked (counted 0): " + ", ".join(f"{k} x{v}" for k, v in counted.untracked.items()))
    formatters = {"module": lambda v: v or "(model)", "params": lambda v: f"{v:,}", "macs": lambda v: f"{v:,}", "flops": lambda v: f"{v:,}",
                  "activation_bytes": format_bytes, "macs_share": format_share}
    return TableReport(f"Per-layer summary: {type(model).__name__} {model.name!r}", COLUMNS, rows,
                       formatters=formatters, headers=HEADERS, notes=notes)
