"""Recorded tensors: real tensors turned into ``TensorSpec``s, and specs described for people.

A recorded layer call keeps ``TensorSpec``s (shape, standardised dtype, whether a Keras mask
rode along), never the tensors: nothing of the run is kept alive. ``SpecMaker`` makes them
and tells a shape-inference call (Keras building a layer) from a real one; the counting
engine, the layer-wise summary, failure notes and the profiles all record through it.
"""
from __future__ import annotations

from typing import Any

from ..tensors import format_shapes, nbytes
from .registry import TensorSpec, specs_in

__all__ = ["SpecMaker", "describe", "describe_call", "shapes_text", "spec_bytes"]


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
    """``Tensor[2, 5] float32`` for specs, recursively for containers: for error messages."""
    if isinstance(value, TensorSpec):
        dims = ", ".join("?" if d is None else str(d) for d in value.shape)
        return f"Tensor[{dims}] {value.dtype}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in value.items()) + "}"
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__}(...)"


def describe_call(record: Any) -> str:
    """``(Tensor[2, 5] float32, training=False)``: the arguments of a recorded call."""
    parts = [describe(a) for a in record.args] + [f"{k}={describe(v)}" for k, v in record.kwargs.items()]
    return "(" + ", ".join(parts) + ")"
