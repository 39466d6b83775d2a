"""The tensors the Keras backend is given: what they are, how big, how a split serves them, and
tensors made from shapes.

Facts about nested structures (leaves, shapes, batch size, bytes per dtype) are answered here
once, for the counting engine, the layer-wise summary, memory, timing and the profiles. Nested
structures are walked with ``keras.tree`` (tuples, lists, dicts, namedtuples). Batches of
TensorFlow tensors are resized (``ForwardPass.inputs_for(batch_size=...)``) by
``TensorFlowAdapter``, registered with the core when this module is imported; NumPy arrays by
the core's ``NumpyAdapter``; torch tensors (Keras on its torch backend) by the torch backend's
adapter. Whole arrays given as a split are served in batches (``normalise_splits``), and
``count_ops``' shapes become tensors (``prepare_inputs``).

Importing this module imports no framework (the core imports it to handle a TensorFlow tensor,
and the counting package imports it): Keras is imported on first use, and TensorFlow only to
handle a TensorFlow tensor, which exists only when TensorFlow is already loaded.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Iterable

import numpy as np

from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.data import _type_names, adapter_for, cyclic_indices, format_shape, register_adapter

__all__ = ["ITEMSIZE", "ArraySplit", "TensorFlowAdapter", "batch_size_of", "dtype_bytes", "expected_inputs_text",
           "format_shapes", "is_shape", "model_input_dtypes", "model_input_tensors", "nbytes", "normalise_splits",
           "prepare_inputs", "shape_of", "tensor_leaves", "to_backend"]


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


# -- TensorFlow tensors and array splits (the data binding) --------------------------------------
# (module, class) names of TensorFlow's tensor types: eager tensors and graph tensors.
_TF_TENSOR_TYPES = {("tensorflow.python.framework.ops", "EagerTensor"),
                    ("tensorflow.python.framework.ops", "_EagerTensorBase"),
                    ("tensorflow.python.framework.tensor", "Tensor")}
_DEFAULT_ARRAY_BATCH = 32


class TensorFlowAdapter:
    """``tf.Tensor`` (eager). ``take`` slices or gathers with TensorFlow ops."""

    name = "tensorflow"

    def is_tensor(self, x: object) -> bool:
        return bool(_type_names(x) & _TF_TENSOR_TYPES)

    def describe(self, x: Any) -> str:
        device = getattr(x, "device", "") or ""
        where = "" if not device or "CPU" in device else f", {device.rsplit('/', 1)[-1]}"
        return f"Tensor[{x.dtype.name}, {format_shape(tuple(x.shape))}{where}]"

    def batch_dim(self, x: Any) -> int | None:
        return int(x.shape[0]) if len(x.shape) > 0 else None

    def take(self, x: Any, n: int) -> Any:
        """``n`` samples along dim 0: ``x[:n]``, or rows ``i % len(x)`` (``tf.gather``) when more."""
        import tensorflow as tf  # already loaded: x is a TensorFlow tensor

        batch = self.batch_dim(x)
        if batch is None:
            raise ValueError(f"cannot take samples from a 0-d tensor {self.describe(x)}")
        if n == batch:
            return x
        if n < batch:
            return x[:n]
        return tf.gather(x, tf.constant(cyclic_indices(batch, n), dtype=tf.int32), axis=0)


def _leading_dims(x: Any) -> list[int | None]:
    """Leading dimensions of the array leaves of ``x`` (an array, or a tuple / list / dict of them)."""
    adapter = adapter_for(x)
    if adapter is not None:
        return [adapter.batch_dim(x)]
    if isinstance(x, Mapping):
        return [d for v in x.values() for d in _leading_dims(v)]
    if isinstance(x, (tuple, list)):
        return [d for v in x for d in _leading_dims(v)]
    return [None]


def _slice(x: Any, start: int, stop: int) -> Any:
    if adapter_for(x) is not None:
        return x[start:stop]
    if isinstance(x, Mapping):
        return {k: _slice(v, start, stop) for k, v in x.items()}
    return type(x)(_slice(v, start, stop) for v in x)


class ArraySplit:
    """Whole arrays served as batches: ``(x[i:i+b], y[i:i+b])`` (or ``x[i:i+b]`` without ``y``).

    ``x`` and ``y`` are arrays or tensors (or tuples / lists / dicts of them, for several
    inputs), all with the same number of samples. Re-iterable and sized like a data loader;
    nothing is copied (each batch is a slice).
    """

    def __init__(self, x: Any, y: Any = None, batch_size: int = _DEFAULT_ARRAY_BATCH) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"ArraySplit batch_size must be an int >= 1, got {batch_size!r}")
        dims = _leading_dims(x) + ([] if y is None else _leading_dims(y))
        if any(d is None for d in dims) or len(set(dims)) != 1:
            raise ValueError(f"ArraySplit needs arrays with one common leading (sample) dimension; got leading "
                             f"dimensions {dims} (None: not an array, or 0-d)")
        self.x, self.y, self.batch_size = x, y, batch_size
        self.samples = dims[0]

    def __len__(self) -> int:
        return -(-self.samples // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        for start in range(0, self.samples, self.batch_size):
            stop = min(start + self.batch_size, self.samples)
            x = _slice(self.x, start, stop)
            yield x if self.y is None else (x, _slice(self.y, start, stop))

    def __repr__(self) -> str:
        return f"ArraySplit({self.samples} samples, batch_size={self.batch_size}, targets={self.y is not None})"


def _is_whole_arrays(split: Any) -> bool:
    """A single array, or a *tuple* ``(x, y)`` of arrays with one common leading dimension."""
    if adapter_for(split) is not None:
        return True
    if type(split) is tuple and len(split) == 2 and all(adapter_for(part) is not None for part in split):
        dims = _leading_dims(split)
        return None not in dims and len(set(dims)) == 1
    return False


def normalise_splits(data_splits: Mapping[str, Any] | None,
                     array_batch_size: int = _DEFAULT_ARRAY_BATCH) -> Mapping[str, Any] | None:
    """``data_splits`` with whole-array splits wrapped in ``ArraySplit``.

    What a Keras profiler accepts as a data split (``{"test": split}``):

    * a batched ``tf.data.Dataset`` (``ds.batch(n)``): re-iterable, each element is one batch.
      An unbatched dataset yields single samples: batch it first;
    * a ``keras.utils.PyDataset``: ``ds[i]`` is batch ``i`` (it is iterated through Keras' own
      ``__iter__``, over ``num_batches``);
    * a list of batches, e.g. ``[(x, y), ...]`` of NumPy arrays or backend tensors;
    * a zero-argument function returning a fresh iterable (a generator function);
    * **whole arrays**, as Keras' ``fit(x, y)`` and ``validation_data=(x, y)`` take them: a
      *tuple* ``(x, y)`` of arrays with one leading dimension, or a single array ``x``. They are
      wrapped in an ``ArraySplit`` that yields ``(x[i:i+b], y[i:i+b])`` batches of
      ``array_batch_size`` samples (Keras' default 32); the last batch may be smaller. A *list*
      is always a list of batches, never ``[x, y]`` arrays.

    Other splits are kept as they are (the same objects); a mapping without array splits is
    returned unchanged.
    """
    if not isinstance(data_splits, Mapping):
        return data_splits  # the core reports a non-mapping when a split is read
    if not any(_is_whole_arrays(split) for split in data_splits.values()):
        return data_splits
    wrapped = {}
    for name, split in data_splits.items():
        if not _is_whole_arrays(split):
            wrapped[name] = split
        elif isinstance(split, tuple):
            wrapped[name] = ArraySplit(split[0], split[1], batch_size=array_batch_size)
        else:
            wrapped[name] = ArraySplit(split, batch_size=array_batch_size)
    return wrapped


register_adapter(TensorFlowAdapter())


# -- tensors from shapes: count_ops' inputs_or_shape ---------------------------------------------
def is_shape(value: Any) -> bool:
    """A non-empty tuple or list of ints and ``None``s (not bools)."""
    return (isinstance(value, (tuple, list)) and len(value) > 0
            and all(d is None or (isinstance(d, int) and not isinstance(d, bool)) for d in value))


def model_input_tensors(model: Any) -> list[Any]:
    """The symbolic inputs of a functional model or built ``Sequential`` (empty for a subclassed model)."""
    try:
        return list(model.inputs or [])
    except (AttributeError, ValueError):
        return []


def expected_inputs_text(model: Any) -> str:
    """``"model 'net' expects an input of shape (None, 8)"`` for error messages (``""`` when unknown)."""
    tensors = model_input_tensors(model)
    if not tensors:
        return ""
    shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
    return f"model {model.name!r} expects {'inputs' if len(tensors) > 1 else 'an input'} of shape {shapes}"


def model_input_dtypes(model: Any, keras: Any) -> tuple[list[str], dict[str, str]]:
    """dtypes of a functional model's inputs, by position and by name (empty when unknown)."""
    tensors = model_input_tensors(model)
    dtypes = [keras.backend.standardize_dtype(t.dtype) for t in tensors]
    names = {str(tensor.name): dtype for tensor, dtype in zip(tensors, dtypes) if getattr(tensor, "name", None)}
    return dtypes, names


def _concrete_shape(shape: Any, batch_size: int | None, where: str) -> tuple[int, ...]:
    shape = tuple(shape)
    batch = shape[0]
    if batch is None:
        batch = 1 if batch_size is None else int(batch_size)
    elif batch_size is not None and int(batch_size) != batch:
        raise ValueError(f"{where}: the shape {shape} has batch {batch} but batch_size={batch_size} was given; "
                         "give the batch in one place (use None as the first dimension to take batch_size)")
    rest = shape[1:]
    for i, d in enumerate(rest, start=1):
        if d is None:
            raise ValueError(f"{where}: dimension {i} of the shape {shape} is None; count_ops runs a real forward "
                             "pass and needs every size but the batch (give it, e.g. a sequence length)")
        if d < 0:
            raise ValueError(f"{where}: the shape {shape} has a negative size")
    return (int(batch),) + tuple(int(d) for d in rest)


def _make(shape: tuple[int, ...], dtype: str, keras: Any, rng: np.random.Generator) -> Any:
    if "float" in dtype or "complex" in dtype:
        array = rng.standard_normal(shape).astype("float32")
    else:
        array = np.zeros(shape, dtype="int32" if "int" in dtype else "bool")
    return keras.ops.convert_to_tensor(array, dtype=dtype)


def prepare_inputs(model: Any, inputs_or_shape: Any, batch_size: int | None, keras: Any) -> tuple[Any, int | None]:
    """``(inputs for model(...), batch size)`` from a tensor, shape, or container of either.

    Accepted (``count_ops``' ``inputs_or_shape``): a tensor or array; a list/tuple/dict of them;
    a shape (a tuple or list of ints, the batch first; ``None`` for the batch takes
    ``batch_size``, default 1); a list/tuple/dict of shapes. Inputs made from shapes are
    deterministic: floating inputs are standard-normal draws from a fixed seed, integer and
    boolean inputs are zeros (valid indices for ``Embedding``), in the dtype of the model's
    matching ``Input`` when it has one, else ``keras.config.floatx()``.
    """
    positional, by_name = model_input_dtypes(model, keras)
    floatx = keras.config.floatx()
    rng = np.random.default_rng(0)

    def build(value: Any, position: int | None, name: str | None) -> Any:
        if is_shape(value):
            dtype = by_name.get(name) if name is not None else None
            if dtype is None and position is not None and position < len(positional):
                dtype = positional[position]
            where = f"input {name!r}" if name is not None else f"input {position or 0}"
            return _make(_concrete_shape(value, batch_size, where), dtype or floatx, keras, rng)
        return value

    if is_shape(inputs_or_shape):
        inputs = build(inputs_or_shape, 0, None)
    elif isinstance(inputs_or_shape, dict):
        inputs = {key: build(value, None, str(key)) for key, value in inputs_or_shape.items()}
    elif isinstance(inputs_or_shape, (list, tuple)):
        inputs = [build(value, i, None) for i, value in enumerate(inputs_or_shape)]
    else:
        inputs = inputs_or_shape
    batch = batch_size_of(inputs)
    if batch_size is not None and batch is not None and batch != int(batch_size):
        raise ValueError(f"the inputs have batch size {batch} but batch_size={batch_size} was given; "
                         "leave batch_size out when passing tensors (it applies to shapes)")
    return inputs, batch
