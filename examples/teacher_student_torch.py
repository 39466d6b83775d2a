"""Teacher vs student in PyTorch: train both on a small synthetic task, then compare cost AND accuracy.

Run it from the repository root (needs torch)::

    python examples/teacher_student_torch.py [--epochs 4] [--samples 768] [--output compare.html]

The task: 16x16 RGB images of noise with one bright 4x4 patch; the class (0-3) is the quadrant
the patch is in. The teacher is the zoo's ``resnet_small`` (widths 16/32/64), the student its
half-width ``resnet_small_student`` (8/16/32), trained by distillation: cross-entropy on the
labels plus the KL divergence to the teacher's softened outputs. Both are then profiled with
the same profiler options and an accuracy metric (``ComputeEvalMetric``) on a held-out split,
and the compare report says how much smaller and faster the student is and how many points of
accuracy it gave up.

Both ResNets end in a global average pool, so they take 16x16 images as well as the zoo's
32x32 ones. Every convolution's output is then a quarter of the size (16x16 -> 8x8 -> 4x4
instead of 32 -> 16 -> 8), so it costs a quarter of the MACs; the final ``fc`` becomes 64 x 4
classes = 256 MACs instead of 64 x 10 = 640. The teacher's 12,501,632 MACs per 32x32 image
(docs/zoo.rst) become (12,501,632 - 640) / 4 + 256 = 3,125,504 MACs per 16x16 image.
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch import nn
from torch.nn import functional as F

from deeplite_like import ComputeEvalMetric, compare
from deeplite_like.backends.torch import TorchProfiler, accuracy
from deeplite_like.cli.progress import track
from deeplite_like.zoo import get

IMAGE, CLASSES = 16, 4
TEACHER_MACS = (12_501_632 - 640) // 4 + 64 * CLASSES  # per 16x16 image, derived in the module docstring


def make_split(samples: int, seed: int, batch_size: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of (images, labels): noise plus a bright patch in the quadrant named by the label."""
    generator = torch.Generator().manual_seed(seed)
    images = 0.5 * torch.randn(samples, 3, IMAGE, IMAGE, generator=generator)
    labels = torch.randint(0, CLASSES, (samples,), generator=generator)
    offsets = torch.randint(0, IMAGE // 2 - 4 + 1, (samples, 2), generator=generator)
    for i in range(samples):
        row = (labels[i] // 2) * (IMAGE // 2) + offsets[i, 0]
        col = (labels[i] % 2) * (IMAGE // 2) + offsets[i, 1]
        images[i, :, row:row + 4, col:col + 4] += 2.0
    return [(images[i:i + batch_size], labels[i:i + batch_size]) for i in range(0, samples, batch_size)]


def train(model: nn.Module, batches: list, epochs: int, teacher: nn.Module | None = None, label: str = "") -> None:
    """Adam on cross-entropy; with a teacher, half of the loss is the KL to its softened outputs (T = 2)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for epoch in range(epochs):
        for images, labels in track(batches, f"{label} epoch {epoch + 1}/{epochs}"):
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            if teacher is not None:
                with torch.no_grad():
                    soft = F.softmax(teacher(images) / 2.0, dim=1)
                loss = 0.5 * loss + 0.5 * 4.0 * F.kl_div(F.log_softmax(logits / 2.0, dim=1), soft,
                                                          reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--samples", type=int, default=768, help="training images (the test split has half as many)")
    parser.add_argument("--min-run-time", type=float, default=0.2, help="seconds of timed runs per model")
    parser.add_argument("--output", help="also save the report (.html, .md, .json, .csv, .txt)")
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    teacher = get("resnet_small").build(num_classes=CLASSES)
    student = get("resnet_small_student").build(num_classes=CLASSES)
    data = {"train": make_split(args.samples, seed=1), "test": make_split(args.samples // 2, seed=2)}
    train(teacher, data["train"], args.epochs, label="teacher")
    train(student, data["train"], args.epochs, teacher=teacher, label="student")

    profilers = []
    for name, model in (("teacher", teacher), ("student", student)):
        profiler = TorchProfiler(model, data, name=name)
        profiler.register_profiler_function(ComputeEvalMetric(accuracy, key="accuracy", unit_name="%",
                                                              friendly_name="Top-1 accuracy"))
        profilers.append(profiler)
    report = compare(profilers, batch_size=1, min_run_time=args.min_run_time, split="test")
    print(report)
    macs = report.to_dict()["metrics"][0]["values"]["teacher"]["value"]
    assert macs == TEACHER_MACS, f"teacher MACs {macs:,} != {TEACHER_MACS:,} derived by hand"
    if args.output:
        print(f"saved {report.save(args.output)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
