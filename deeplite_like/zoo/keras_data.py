"""Tiny deterministic synthetic data for the zoo's Keras models (NumPy arrays, channels-last).

The same contract as ``zoo.torch_data`` (the PyTorch side): a split is a list of ``(x, y)`` batches,
inputs follow the entry's spec, labels are uniform random class ids, nothing carries signal.
Arrays are NumPy so that they feed Keras on any backend; everything is drawn from a
``numpy.random.Generator`` seeded explicitly, never from a global RNG.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from deeplite_like.zoo import ZooEntry

_SPLITS = ("train", "test")


def _check_positive(**values: int) -> None:
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}")


def _inputs(entry: "ZooEntry", batch_size: int, rng: np.random.Generator) -> np.ndarray:
    shape = (batch_size, *entry.input_shape)
    if entry.input_dtype == "int64":
        return rng.integers(0, entry.vocab_size, shape, dtype=np.int64)
    return rng.standard_normal(shape, dtype=np.float32)


def _labels(entry: "ZooEntry", batch_size: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, entry.num_classes, (batch_size, *entry.output_shape[:-1]), dtype=np.int64)


def example_input(entry: "ZooEntry", batch_size: int = 1, seed: int = 0) -> np.ndarray:
    """A deterministic input batch, shape ``(batch_size, *input_shape)`` (standard normal floats)."""
    _check_positive(batch_size=batch_size)
    return _inputs(entry, batch_size, np.random.default_rng(seed))


def synthetic_split(entry: "ZooEntry", batch_size: int = 8, batches: int = 4,
                    seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``batches`` deterministic ``(x, y)`` batches of ``batch_size`` samples."""
    _check_positive(batch_size=batch_size, batches=batches)
    rng = np.random.default_rng(seed)
    return [(_inputs(entry, batch_size, rng), _labels(entry, batch_size, rng)) for _ in range(batches)]


def synthetic_splits(entry: "ZooEntry", batch_size: int = 8, batches: int = 4,
                     seed: int = 0) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """``{"train": [...], "test": [...]}``, split ``i`` drawn with seed ``2 * seed + i`` (as ``zoo.torch_data``)."""
    return {split: synthetic_split(entry, batch_size, batches, seed=2 * seed + i) for i, split in enumerate(_SPLITS)}
