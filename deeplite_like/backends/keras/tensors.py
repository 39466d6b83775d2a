"""Facts about the tensors in nested structures: leaves, shapes, batch size, bytes per dtype.

The one place the Keras backend answers "which tensors are in this input/output, how big are
they": the counting engine, the layer-wise summary, memory, timing and the profiles all use
it. Nested structures are walked with ``keras.tree`` (tuples, lists, dicts, namedtuples).

Keras is imported on first use, not when this module is imported, so that the counting
package (which imports this module) stays free of framework imports until it counts.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from deeplite_like.backends.keras._tf import import_keras

__all__ = ["ITEMSIZE", "batch_size_of", "dtype_bytes", "format_shapes", "nbytes", "shape_of", "tensor_leaves",
           "to_backend"]

#: Bytes per element of the dtypes Keras tensors and variables may have
#: (``keras.backend.standardize_dtype`` names). int4 is stored packed two to a byte in an
#: int8 variable, so it never appears here.
ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "complex64": 8, "complex128": 16,
}


def dtype_bytes(dtype: Any) -> int:
    """Bytes per element of a Keras / backend dtype (``'float16'`` -> 2)."""
    name = dtype if isinstance(dtype, str) and dtype in ITEMSIZE else import_keras().backend.standardize_dtype(dtype)
    try:
        return ITEMSIZE[name]
    except KeyError:
        raise ValueError(f"no known element size for dtype {name!r}; known: {', '.join(sorted(ITEMSIZE))}") \
            from None


def _is_tensor_like(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (type, str))


def tensor_leaves(tree: Any) -> list[Any]:
    """Tensor-like leaves (anything with ``shape`` and ``dtype``) of nested tuples / lists / dicts."""
    return [leaf for leaf in import_keras().tree.flatten(tree) if _is_tensor_like(leaf)]


def shape_of(x: Any) -> tuple:
    """``x.shape`` as a tuple of ints, ``None`` for an unknown dimension."""
    return tuple(None if d is None else int(d) for d in x.shape)


def format_shapes(shapes: Iterable[tuple]) -> str:
    """``'2x8, 2x1'``: shapes joined for display (``?`` for an unknown dimension, ``scalar`` for 0-d)."""
    return ", ".join("x".join("?" if d is None else str(d) for d in s) or "scalar" for s in shapes)


def nbytes(shape: tuple, dtype: Any) -> int:
    """``elements x itemsize`` of a tensor of ``shape`` and ``dtype``; 0 when a dimension is unknown."""
    if None in shape:
        return 0
    return math.prod(shape) * dtype_bytes(dtype)


def batch_size_of(tree: Any) -> int | None:
    """Leading dimension of the first tensor leaf that has one (``None`` if there is none)."""
    for leaf in tensor_leaves(tree):
        if len(leaf.shape) > 0 and leaf.shape[0] is not None:
            return int(leaf.shape[0])
    return None


def to_backend(tree: Any) -> Any:
    """``tree`` with every NumPy array (or scalar) converted to a backend tensor of the same dtype.

    Other leaves are kept as they are. A model then gets what ``model.predict`` would feed it.
    """
    keras = import_keras()

    def convert(leaf: Any) -> Any:
        if isinstance(leaf, (np.ndarray, np.generic)):
            return keras.ops.convert_to_tensor(leaf, dtype=str(leaf.dtype))
        return leaf

    return keras.tree.map_structure(convert, tree)
