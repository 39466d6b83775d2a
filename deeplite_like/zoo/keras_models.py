"""The Keras 3 models of the zoo: the same networks as their PyTorch twins, channels-last.

Each factory takes ``seed`` and gives every layer its own seeded initializer, so two builds
with one seed have identical weights and no global RNG (Python, NumPy, Keras, TensorFlow) is
touched. The parameter and MAC counts equal the PyTorch twin's (derived in ``docs/zoo.rst``,
asserted in ``tests/keras/test_cross_backend.py``).

This module imports Keras; ``deeplite_like.zoo`` imports it only when a model is built.

Synthetic data:

    Tiny deterministic synthetic data for the zoo's Keras models (NumPy arrays, channels-last).

    The same contract as ``zoo.torch_models`` (the PyTorch side): a split is a list of ``(x, y)`` batches,
    inputs follow the entry's spec, labels are uniform random class ids, nothing carries signal.
    Arrays are NumPy so that they feed Keras on any backend; everything is drawn from a
    ``numpy.random.Generator`` seeded explicitly, never from a global RNG.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from deeplite_like.backends.keras._tf import import_keras


keras = import_keras()

__all__ = ["example_input", "lenet5", "small_cnn", "synthetic_split", "synthetic_splits", "to_tflite"]


class _Seeds:
    """Distinct, reproducible initializer seeds: ``seed * 1000 + i`` for the ``i``-th request."""

    def __init__(self, seed: int) -> None:
        self.base = int(seed) * 1000
        self.count = 0

    def __call__(self) -> dict:
        self.count += 2
        return {"kernel_initializer": keras.initializers.GlorotUniform(seed=self.base + self.count - 1),
                "bias_initializer": keras.initializers.RandomUniform(-0.05, 0.05, seed=self.base + self.count)}


def lenet5(num_classes: int = 10, in_channels: int = 1, seed: int = 0) -> keras.Sequential:
    """LeNet-5 on 32x32x``in_channels`` images, channels-last: the zoo's ``lenet5`` in Keras.

    conv 6@5x5 -> ReLU -> max pool 2 -> conv 16@5x5 -> ReLU -> max pool 2 -> flatten ->
    fc 120 -> ReLU -> fc 84 -> ReLU -> fc ``num_classes`` (61,706 parameters at the defaults,
    as the PyTorch model).
    """
    init = _Seeds(seed)
    layers = keras.layers
    return keras.Sequential([
        keras.Input((32, 32, in_channels)),
        layers.Conv2D(6, 5, name="conv1", **init()),  # 32x32 -> 28x28
        layers.ReLU(name="relu1"),
        layers.MaxPooling2D(2, name="pool1"),  # -> 14x14
        layers.Conv2D(16, 5, name="conv2", **init()),  # -> 10x10
        layers.ReLU(name="relu2"),
        layers.MaxPooling2D(2, name="pool2"),  # -> 5x5
        layers.Flatten(name="flatten"),
        layers.Dense(120, name="fc1", **init()),
        layers.ReLU(name="relu3"),
        layers.Dense(84, name="fc2", **init()),
        layers.ReLU(name="relu4"),
        layers.Dense(num_classes, name="fc3", **init()),
    ], name="lenet5_keras")


def small_cnn(num_classes: int = 10, in_channels: int = 3, width: int = 8, image_size: int = 16,
              seed: int = 0) -> keras.Sequential:
    """Conv2D(``width``, 3x3, same) -> ReLU -> MaxPool 2 -> Flatten -> Dense(``num_classes``), channels-last.

    The smallest CNN with every layer kind the cross-backend example compares; its PyTorch
    twin is written beside it in ``examples/cross_backend_compare.py``.
    """
    init = _Seeds(seed)
    layers = keras.layers
    return keras.Sequential([
        keras.Input((image_size, image_size, in_channels)),
        layers.Conv2D(width, 3, padding="same", name="conv", **init()),
        layers.ReLU(name="relu"),
        layers.MaxPooling2D(2, name="pool"),
        layers.Flatten(name="flatten"),
        layers.Dense(num_classes, name="fc", **init()),
    ], name="small_cnn_keras")


# -- Synthetic data ---------------------------------------------------------------------------------
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


def to_tflite(model: keras.Model, int8: bool = False, calibration: Iterable[np.ndarray] | None = None) -> bytes:
    """``model`` (any built Keras model, a zoo one or not) as the bytes of a ``.tflite`` file, written by
    ``tf.lite.TFLiteConverter``: float, or with ``int8`` full-integer (the int8 op set, int8 input and
    output), calibrated on ``calibration`` (one-sample arrays: batch 1) or, by default, on 8 seeded
    standard-normal samples of the model's input shape. Needs TensorFlow (imported here, not before).
    """
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        if calibration is None:
            shape = (1, *model.input_shape[1:])
            rng = np.random.default_rng(0)
            calibration = [rng.standard_normal(shape).astype(np.float32) for _ in range(8)]
        samples = list(calibration)

        def representative() -> Iterable[list[np.ndarray]]:
            for sample in samples:
                yield [sample]

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()
