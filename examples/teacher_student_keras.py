"""Teacher vs student in Keras: train both on a small synthetic task, then compare cost AND accuracy.

Run it from the repository root (needs keras with TensorFlow, or Keras on its torch backend)::

    python examples/teacher_student_keras.py [--epochs 3] [--samples 768] [--output compare.html]

The task is the PyTorch example's (``teacher_student_torch.py``): 16x16 RGB images of noise
with one bright 4x4 patch; the class (0-3) is the quadrant the patch is in. Both models are
plain channels-last CNNs: conv 3x3 ('same') + ReLU + 2x2 max pool, twice, then global average
pool and a dense classifier; the teacher has 32 and 64 filters, the student 8 and 16.

MACs of the teacher per 16x16 image, by hand:
    conv1 3->32 on 16x16:  16*16*32 * 3*3*3   =   221,184
    conv2 32->64 on 8x8:   8*8*64 * 3*3*32    = 1,179,648
    dense 64->4:                                     256
    total                                     = 1,401,088
and of the student: 16*16*8*27 + 8*8*16*72 + 16*4 = 55,296 + 73,728 + 64 = 129,088.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deeplite_like import ComputeEvalMetric, compare  # noqa: E402

IMAGE, CLASSES = 16, 4
TEACHER_MACS, STUDENT_MACS = 1_401_088, 129_088  # per image, derived in the module docstring


def make_split(samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels) as whole arrays: noise plus a bright patch in the quadrant named by the label."""
    rng = np.random.default_rng(seed)
    images = (0.5 * rng.standard_normal((samples, IMAGE, IMAGE, 3))).astype("float32")
    labels = rng.integers(0, CLASSES, samples)
    for i, label in enumerate(labels):
        row = (label // 2) * (IMAGE // 2) + rng.integers(0, IMAGE // 2 - 3)
        col = (label % 2) * (IMAGE // 2) + rng.integers(0, IMAGE // 2 - 3)
        images[i, row:row + 4, col:col + 4, :] += 2.0
    return images, labels.astype("int64")


def cnn(filters: tuple[int, int], name: str):
    import keras

    return keras.Sequential([
        keras.Input((IMAGE, IMAGE, 3)),
        keras.layers.Conv2D(filters[0], 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(filters[1], 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(CLASSES),
    ], name=name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=768, help="training images (the test split has half as many)")
    parser.add_argument("--min-run-time", type=float, default=0.2, help="seconds of timed runs per model")
    parser.add_argument("--output", help="also save the report (.html, .md, .json, .csv, .txt)")
    args = parser.parse_args(argv)

    import keras

    from deeplite_like.backends.keras import KerasProfiler, accuracy

    keras.utils.set_random_seed(0)
    train, test = make_split(args.samples, seed=1), make_split(args.samples // 2, seed=2)
    models = {"teacher": cnn((32, 64), "teacher"), "student": cnn((8, 16), "student")}
    for model in models.values():
        model.compile(optimizer=keras.optimizers.Adam(3e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(*train, batch_size=32, epochs=args.epochs, verbose=0)

    # Whole arrays as a split are served in batches, as fit does.
    data = {"train": train, "test": test}
    profilers = []
    for name, model in models.items():
        profiler = KerasProfiler(model, data, name=name)
        profiler.register_profiler_function(ComputeEvalMetric(accuracy, key="accuracy", unit_name="%",
                                                              friendly_name="Top-1 accuracy"))
        profilers.append(profiler)
    report = compare(profilers, batch_size=1, min_run_time=args.min_run_time, split="test")
    print(report)
    macs = {p.name: p.compute_status("macs") for p in profilers}
    assert macs == {"teacher": TEACHER_MACS, "student": STUDENT_MACS}, f"MACs {macs} differ from the hand derivation"
    if args.output:
        print(f"saved {report.save(args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
