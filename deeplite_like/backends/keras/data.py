"""The Keras side of data binding: a ``TensorAdapter`` for TensorFlow tensors, and array splits.

What a Keras profiler accepts as a data split (``{"test": split}``):

* a batched ``tf.data.Dataset`` (``ds.batch(n)``): re-iterable, each element is one batch.
  An unbatched dataset yields single samples: batch it first;
* a ``keras.utils.PyDataset``: ``ds[i]`` is batch ``i`` (it is iterated through Keras' own
  ``__iter__``, over ``num_batches``);
* a list of batches, e.g. ``[(x, y), ...]`` of NumPy arrays or backend tensors;
* a zero-argument function returning a fresh iterable (a generator function);
* **whole arrays**, as Keras' ``fit(x, y)`` and ``validation_data=(x, y)`` take them: a
  *tuple* ``(x, y)`` of arrays with one leading dimension, or a single array ``x``. The
  profiler wraps them in an ``ArraySplit`` that yields ``(x[i:i+b], y[i:i+b])`` batches of
  ``array_batch_size`` samples (Keras' default 32); the last batch may be smaller. A *list*
  is always a list of batches, never ``[x, y]`` arrays.

Batches of TensorFlow tensors are resized (``ForwardPass.inputs_for(batch_size=...)``) by the
adapter below; NumPy arrays by the core's ``NumpyAdapter``; torch tensors (Keras on its torch
backend) by the torch backend's adapter. Importing this module registers the TensorFlow
adapter; it imports TensorFlow only when it handles a TensorFlow tensor, and a TensorFlow
tensor exists only when TensorFlow is already loaded.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from deeplite_like.data import _type_names, adapter_for, cyclic_indices, format_shape, register_adapter

__all__ = ["ArraySplit", "TensorFlowAdapter", "normalise_splits"]

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
    """``data_splits`` with whole-array splits wrapped in ``ArraySplit`` (see the module docstring).

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
