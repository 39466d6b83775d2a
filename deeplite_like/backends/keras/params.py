"""Parameter and state counts and sizes of a Keras 3 model, in elements and bytes.

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
state, ``functions.ComputeParams``), with this split in its details.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.counting.recorder import named_layers
from deeplite_like.backends.keras.tensors import dtype_bytes
from deeplite_like.measurements import ParamStats as SharedParamStats

keras = import_keras()


__all__ = ["ParamStats", "WeightInfo", "dtype_bytes", "parameter_stats", "params_by_layer", "weight_table"]

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
