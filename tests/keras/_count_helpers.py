"""Helpers of the Keras counting tests: one-layer models and a strict count.

Every test module does ``keras = pytest.importorskip("keras")`` first, so the suite skips
cleanly (with the reason) where Keras is not installed; Keras/TensorFlow is then imported once
per test session (Python's module cache).
"""
from __future__ import annotations

import warnings
from typing import Any

from deeplite_like.backends.keras.counting import count_ops
from deeplite_like.results import OpCount


def count(model: Any, inputs: Any, **kwargs: Any) -> OpCount:
    """``count_ops`` that fails the test if anything is untracked (unless the test expects it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an UntrackedLayerWarning, or any other, fails the test
        return count_ops(model, inputs, **kwargs)


def one_layer(keras: Any, layer: Any, input_shape: tuple, dtype: str = "float32") -> Any:
    """``Sequential([Input(input_shape), layer])`` (input_shape without the batch)."""
    return keras.Sequential([keras.Input(input_shape, dtype=dtype), layer])


def layer_cost(keras: Any, layer: Any, shape: tuple, **kwargs: Any) -> tuple[int, int]:
    """(MACs, FLOPs) of one layer on inputs of ``shape`` (batch first); nothing may be untracked."""
    result = count(one_layer(keras, layer, shape[1:]), shape, **kwargs)
    return result.macs, result.flops
