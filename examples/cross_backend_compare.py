"""The same small CNN in PyTorch (channels-first) and Keras (channels-last), profiled side by side.

Run it from the repository root (needs torch, and Keras 3 with TensorFlow or torch)::

    python examples/cross_backend_compare.py

Both models are Conv2D(3 -> 8, 3x3, same) -> ReLU -> MaxPool 2 -> Flatten -> Dense(512 -> 10)
on 16x16 RGB images. By hand, at batch 1:

* params: conv 3*3*3*8 + 8 = 224; fc 8*8*8*10 + 10 = 5,130  -> 5,354
* MACs: conv 16*16*8 outputs x 27 = 55,296; fc 512*10 = 5,120  -> 60,416
* FLOPs: 2 x 60,416 + conv bias 2,048 + ReLU 2,048 + max pool (4 per output) 512*4 = 2,048
  + fc bias 10  -> 126,986

so the compare report shows equal MACs, FLOPs and parameters, and differs only where the
frameworks really differ (memory, latency). Weights are copied from the PyTorch model into the
Keras one, so both also compute the same function.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

try:
    import deeplite_like  # noqa: F401
except ImportError:  # run from a checkout that is not installed: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deeplite_like import compare
from deeplite_like.backends.keras import KerasProfiler
from deeplite_like.backends.torch import TorchProfiler
from deeplite_like.zoo.keras_models import small_cnn

IMAGE, CHANNELS, WIDTH, CLASSES = 16, 3, 8, 10
PARAMS, MACS, FLOPS = 5_354, 60_416, 126_986  # batch 1, derived in the module docstring


class SmallCNN(nn.Module):
    """The PyTorch twin of ``deeplite_like.zoo.keras_models.small_cnn`` (channels-first)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(CHANNELS, WIDTH, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(WIDTH * (IMAGE // 2) ** 2, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(self.pool(self.relu(self.conv(x)))))


def build_pair(seed: int = 0):
    """``(torch_model, keras_model)``: the same network and the same weights in both frameworks."""
    with torch.random.fork_rng():  # the global RNG is left as it was
        torch.manual_seed(seed)
        torch_model = SmallCNN().eval()
    keras_model = small_cnn(num_classes=CLASSES, in_channels=CHANNELS, width=WIDTH, image_size=IMAGE, seed=seed)
    conv_w = torch_model.conv.weight.detach().numpy()  # (out, in, kh, kw) -> Keras (kh, kw, in, out)
    keras_model.get_layer("conv").set_weights([conv_w.transpose(2, 3, 1, 0), torch_model.conv.bias.detach().numpy()])
    # PyTorch flattens (C, H, W), Keras (H, W, C): reorder the fc rows to match.
    fc_w = torch_model.fc.weight.detach().numpy().reshape(CLASSES, WIDTH, IMAGE // 2, IMAGE // 2)
    keras_model.get_layer("fc").set_weights([fc_w.transpose(2, 3, 1, 0).reshape(-1, CLASSES),
                                             torch_model.fc.bias.detach().numpy()])
    return torch_model, keras_model


def images(batch_size: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: channels-last float32 images and int labels (NumPy)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((batch_size, IMAGE, IMAGE, CHANNELS), dtype=np.float32),
            rng.integers(0, CLASSES, batch_size))


def profilers(batch_size: int = 4) -> tuple[TorchProfiler, KerasProfiler]:
    torch_model, keras_model = build_pair()
    x, y = images(batch_size)
    torch_batch = (torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(y))  # NHWC -> NCHW
    return (TorchProfiler(torch_model, {"test": [torch_batch]}, name="small_cnn_torch"),
            KerasProfiler(keras_model, {"test": (x, y)}, name="small_cnn_keras"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--min-run-time", type=float, default=0.2, help="seconds of timed runs per model")
    args = parser.parse_args(argv)
    reference, other = profilers()
    report = compare([reference, other], batch_size=args.batch_size, min_run_time=args.min_run_time)
    print(report)
    torch_model, keras_model = reference.model, other.model
    x, _ = images(2)
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
    got = np.asarray(keras_model(x, training=False))
    print(f"\nlargest output difference between the two models: {np.abs(expected - got).max():.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
