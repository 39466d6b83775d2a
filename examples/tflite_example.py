"""Profile the ``.tflite`` file that ships, as deeplite-profiler's ``tflite_example.py`` did, offline.

deeplite's example read ``models/cifar10.tflite`` and CIFAR-10 from the network; this one builds its
model and data here: a small Keras CNN on 32x32x3 images, trained for a moment on a synthetic task
(the label is the image's colour under the noise), converted with ``tf.lite.TFLiteConverter`` (float,
and full-integer int8 with ``--int8``). Then, as deeplite did: the bytes and the data splits go to
``TFLiteProfiler``, with ``ComputeFlops`` and ``ComputeEvalMetric(get_accuracy, 'accuracy',
unit_name='%')`` registered, and ``compute_network_status`` logs the report.

The file's MACs are checked against the live Keras model's (``deeplite_like.backends.keras``): the
converter fuses each ReLU into its convolution, and the count stays the same. By hand, per image:
conv1 32x32x8 outputs x 3x3x3 = 221,184; conv2 16x16x16 x 3x3x8 = 294,912; dense 16 x 10 = 160:
516,256 MACs.

    python examples/tflite_example.py [--int8] [--samples 512] [--epochs 2] [--output report.json]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

import numpy as np

from deeplite_like.backends.keras.counting import count_ops as count_keras
from deeplite_like.backends.tflite import ComputeEvalMetric, ComputeFlops, TFLiteProfiler

MACS_BY_HAND = 32 * 32 * 8 * 27 + 16 * 16 * 16 * 72 + 16 * 10  # 516,256


def synthetic_splits(samples: int, seed: int = 0) -> dict:
    """``{"train": (x, y), "test": [(x, y), ...]}``: 32x32x3 images of noise over one of ten colours; the
    label is the colour (a task the global average pool keeps). The test split comes in batches of 32."""
    rng = np.random.default_rng(seed)
    colours = rng.uniform(0.0, 1.0, (10, 3)).astype(np.float32)
    y = rng.integers(0, 10, samples)
    x = (0.3 * rng.standard_normal((samples, 32, 32, 3)) + colours[y][:, None, None, :]).astype(np.float32)
    split = samples * 3 // 4
    test = [(x[i:i + 32], y[i:i + 32]) for i in range(split, samples, 32)]
    return {"train": (x[:split], y[:split]), "test": test}


def make_model(keras):
    layers = keras.layers
    return keras.Sequential([
        keras.Input((32, 32, 3)),
        layers.Conv2D(8, 3, padding="same", activation="relu", name="conv1"),
        layers.MaxPooling2D(2, name="pool1"),
        layers.Conv2D(16, 3, padding="same", activation="relu", name="conv2"),
        layers.GlobalAveragePooling2D(name="gap"),
        layers.Dense(10, name="fc"),
    ], name="cifar_like")


def convert(model, train_x: np.ndarray, int8: bool) -> bytes:
    from deeplite_like.zoo.keras_models import to_tflite

    return to_tflite(model, int8=int8, calibration=(train_x[i:i + 1] for i in range(16)))


def get_accuracy(model, data_loader) -> float:
    """Top-1 accuracy in % through the LiteRT interpreter (``model.predict``: float in, int8 quantized by the
    backend for an int8 file); labels as class ids or one-hot rows, as deeplite's loaders gave them."""
    hits = total = 0
    for x, y in data_loader:
        labels = np.argmax(y, axis=1) if np.ndim(y) == 2 else np.asarray(y)
        hits += int((np.argmax(model.predict(x), axis=1) == labels).sum())
        total += len(labels)
    return 100.0 * hits / total


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--int8", action="store_true", help="full-integer quantization")
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--output", help="write the figures as JSON here")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")

    import keras

    # Step 1: the data splits and the model (deeplite read CIFAR-10 and a stored .tflite file)
    keras.utils.set_random_seed(0)
    splits = synthetic_splits(options.samples)
    train_x, train_y = splits["train"]
    model = make_model(keras)
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(train_x, train_y, epochs=options.epochs, batch_size=32, verbose=0)
    native_teacher = convert(model, train_x, options.int8)

    # Step 2: the profiler on the file's bytes, and the functions deeplite registered
    data_loader = TFLiteProfiler.enable_forward_pass_data_splits({"test": splits["test"]})
    profiler = TFLiteProfiler(native_teacher, data_loader, name="int8 model" if options.int8 else "Original Model")
    profiler.register_profiler_function(ComputeFlops())
    profiler.register_profiler_function(ComputeEvalMetric(get_accuracy, "accuracy", unit_name="%"))

    # Step 3: compute every registered figure for the file (logged at INFO, as deeplite's print_mode='info')
    status = profiler.compute_network_status(print_mode="info", short_print=False, num_threads=1)
    values = {key: getattr(value, "value", value) for key, value in status.items()}

    live = count_keras(model, (1, 32, 32, 3))
    if not values["macs"] == live.macs == MACS_BY_HAND:
        raise SystemExit(f"MACs differ: file {values['macs']:,}, Keras {live.macs:,}, by hand {MACS_BY_HAND:,}")
    print(f"MACs per image: {values['macs']:,} in the file, {live.macs:,} in the live Keras model")
    figures = {key: values[key] for key in ("macs", "flops", "total_params", "model_size", "accuracy")}
    if options.output:
        with open(options.output, "w") as stream:
            json.dump(figures, stream, indent=1)
    return figures


if __name__ == "__main__":
    main()
