"""Turning ``count_ops``' ``inputs_or_shape`` into the inputs of one real forward pass.

Accepted: a tensor or array; a list/tuple/dict of them; a shape (a tuple or list of ints,
the batch first; ``None`` for the batch takes ``batch_size``, default 1); a list/tuple/dict
of shapes. Inputs made from shapes are deterministic: floating inputs are standard-normal
draws from a fixed seed, integer and boolean inputs are zeros (valid indices for
``Embedding``), in the dtype of the model's matching ``Input`` when it has one, else
``keras.config.floatx()``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..tensors import batch_size_of


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
    """``(inputs for model(...), batch size)`` from a tensor, shape, or container of either."""
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
