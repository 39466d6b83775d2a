"""The PyTorch models of the zoo: small, realistic networks with hand-derived costs.

Each model is an ordinary ``nn.Module``, and its class is the zoo's factory. The
parameter and MAC counts of every default configuration are derived layer by layer in
``docs/zoo.rst`` and asserted in ``tests/torch/test_zoo.py``.

This module imports torch; ``deeplite_like.zoo`` imports it only when a model is built.

Synthetic data:

    Tiny deterministic synthetic data for the zoo's models (PyTorch tensors).

    A split is a plain list of ``(x, y)`` batches: iterable, sized and re-iterable like a
    ``DataLoader``, so it can be passed as a profiler's data split. Inputs follow the model's
    spec (float images or int64 token ids); labels are uniform random class ids (one per sample
    for classification, one per token for tagging). The data carries no signal: it exists to
    drive cost measurements (MACs, memory, latency), not to measure accuracy.

    Everything is drawn from a ``torch.Generator`` seeded explicitly; the global RNG is never used.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from deeplite_like.zoo import ZooEntry, get


__all__ = [
    "BasicBlock", "DepthwiseSeparable", "InvertedResidual", "LSTMTagger", "LeNet5", "MobileNetSmall",
    "ResNetSmall", "TransformerClassifier", "example_input", "lenet5", "lstm_tagger", "mobilenet_small",
    "resnet_small", "synthetic_split", "synthetic_splits", "transformer_encoder",
]


# --------------------------------------------------------------------------------- LeNet-5
class LeNet5(nn.Module):
    """LeNet-5 (LeCun et al., 1998) on 1x32x32 images, with ReLU and max pooling.

    conv 6@5x5 -> pool 2 -> conv 16@5x5 -> pool 2 -> fc 120 -> fc 84 -> fc ``num_classes``.
    Input: (batch, 1, 32, 32) float; output: (batch, num_classes) logits. 61,706 parameters at
    the defaults.
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, kernel_size=5),  # 32x32 -> 28x28
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),  # -> 14x14
            nn.Conv2d(6, 16, kernel_size=5),  # -> 10x10
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),  # -> 5x5
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * 5 * 5, 120),
            nn.ReLU(inplace=True),
            nn.Linear(120, 84),
            nn.ReLU(inplace=True),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


# ----------------------------------------------------------------------------- ResNet-small
def _conv_bn(in_ch: int, out_ch: int, kernel_size: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    """Conv (no bias: the BN that follows has one) + BatchNorm, with 'same' padding."""
    return [nn.Conv2d(in_ch, out_ch, kernel_size, stride=stride, padding=kernel_size // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch)]


class BasicBlock(nn.Module):
    """ResNet basic block: 3x3 conv-BN-ReLU, 3x3 conv-BN, plus shortcut, then ReLU.

    The shortcut is the identity when shape is kept, else a 1x1 strided conv + BN projection.
    """

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv_bn(in_ch, out_ch, 3, stride)
        self.relu = nn.ReLU(inplace=True)
        self.conv2, self.bn2 = _conv_bn(out_ch, out_ch, 3)
        if stride != 1 or in_ch != out_ch:
            self.shortcut: nn.Module = nn.Sequential(*_conv_bn(in_ch, out_ch, 1, stride))
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class ResNetSmall(nn.Module):
    """A CIFAR-style ResNet (ResNet-8 shape) for 3x32x32 images.

    stem 3x3 conv-BN-ReLU (``widths[0]``) -> one BasicBlock per width, the first at stride 1,
    each later one at stride 2 with a 1x1 projection shortcut -> global average pool -> fc.
    Input: (batch, 3, 32, 32) float; output: (batch, num_classes) logits. 78,042 parameters at
    the defaults; the student uses ``widths=(8, 16, 32)``.
    """

    def __init__(self, widths: Sequence[int] = (16, 32, 64), num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        if not widths:
            raise ValueError("ResNetSmall needs at least one stage width, e.g. widths=(16, 32, 64)")
        self.stem = nn.Sequential(*_conv_bn(in_channels, widths[0], 3), nn.ReLU(inplace=True))
        blocks = []
        in_ch = widths[0]
        for i, width in enumerate(widths):
            blocks.append(BasicBlock(in_ch, width, stride=1 if i == 0 else 2))
            in_ch = width
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


# -------------------------------------------------------------------------- MobileNet-small
class DepthwiseSeparable(nn.Module):
    """MobileNet-v1 block: depthwise 3x3 conv-BN-ReLU6, then pointwise 1x1 conv-BN-ReLU6."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1) -> None:
        super().__init__()
        self.depthwise = nn.Sequential(*_conv_bn(in_ch, in_ch, 3, stride, groups=in_ch), nn.ReLU6(inplace=True))
        self.pointwise = nn.Sequential(*_conv_bn(in_ch, out_ch, 1), nn.ReLU6(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(x))


class InvertedResidual(nn.Module):
    """MobileNet-v2 block: 1x1 expand-BN-ReLU6, depthwise 3x3-BN-ReLU6, 1x1 project-BN.

    The projection is linear (no activation); the input is added back when the block keeps
    the shape (stride 1, ``in_ch == out_ch``).
    """

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1, expansion: int = 4) -> None:
        super().__init__()
        hidden = in_ch * expansion
        self.use_residual = stride == 1 and in_ch == out_ch
        self.block = nn.Sequential(
            *_conv_bn(in_ch, hidden, 1), nn.ReLU6(inplace=True),
            *_conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(inplace=True),
            *_conv_bn(hidden, out_ch, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return x + out if self.use_residual else out


class MobileNetSmall(nn.Module):
    """A MobileNet-style CNN for 3x32x32 images, scaled by a width multiplier.

    stem 3x3/2 conv-BN-ReLU6 (16) -> depthwise-separable (16->32) -> depthwise-separable
    stride 2 (32->64) -> inverted residual (64->64, expansion 4) -> global average pool -> fc.
    Channel counts are multiplied by ``width_mult`` (0.5 halves every one).
    Input: (batch, 3, 32, 32) float; output: (batch, num_classes) logits. 40,618 parameters at
    the defaults; the student uses ``width_mult=0.5``.
    """

    def __init__(self, width_mult: float = 1.0, num_classes: int = 10, in_channels: int = 3,
                 expansion: int = 4) -> None:
        super().__init__()
        c0, c1, c2 = (max(1, int(round(c * width_mult))) for c in (16, 32, 64))
        self.stem = nn.Sequential(*_conv_bn(in_channels, c0, 3, stride=2), nn.ReLU6(inplace=True))
        self.blocks = nn.Sequential(
            DepthwiseSeparable(c0, c1),
            DepthwiseSeparable(c1, c2, stride=2),
            InvertedResidual(c2, c2, expansion=expansion),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


# ----------------------------------------------------------------------- Transformer encoder
class TransformerClassifier(nn.Module):
    """A small text classifier: token + learned positional embedding, a post-norm
    ``nn.TransformerEncoder``, mean pooling over tokens, and a linear classifier.

    Input: (batch, seq) int64 token ids, ``seq <= max_len``; output: (batch, num_classes) logits.
    132,228 parameters at the defaults.
    """

    def __init__(self, vocab_size: int = 1000, max_len: int = 16, d_model: int = 64, nhead: int = 4,
                 dim_feedforward: int = 128, num_layers: int = 2, num_classes: int = 4,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos_embed = nn.Parameter(torch.zeros(1, max_len, d_model))
        nn.init.normal_(self.pos_embed, std=0.02)
        layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                                           dropout=dropout, batch_first=True)
        # No padding mask is used, so the nested-tensor path would never apply; disabling it
        # also silences its warning.
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(d_model, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        if seq > self.max_len:
            raise ValueError(f"TransformerClassifier: got {seq} tokens per sample but max_len is {self.max_len}; "
                             "build the model with a larger max_len")
        x = self.embed(tokens) + self.pos_embed[:, :seq]
        x = self.encoder(x)
        return self.classifier(x.mean(dim=1))


# ------------------------------------------------------------------------------ LSTM tagger
class LSTMTagger(nn.Module):
    """A sequence tagger: token embedding, one bidirectional LSTM layer, a linear tag head.

    Input: (batch, seq) int64 token ids; output: (batch, seq, num_tags) logits per token.
    50,001 parameters at the defaults; 17 tags as in Universal POS.
    """

    def __init__(self, vocab_size: int = 1000, embed_dim: int = 32, hidden_size: int = 32,
                 num_tags: int = 17) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=1, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden_size, num_tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


# The zoo's factories (``ZooEntry.factory``) are the classes themselves: each builds its model
# from the same keyword arguments, with the same defaults.
lenet5 = LeNet5
resnet_small = ResNetSmall
mobilenet_small = MobileNetSmall
transformer_encoder = TransformerClassifier
lstm_tagger = LSTMTagger


# -- Synthetic data ---------------------------------------------------------------------------------
Batch = tuple[torch.Tensor, torch.Tensor]

_SPLITS = ("train", "test")


def _entry(name_or_entry: "str | ZooEntry") -> "ZooEntry":
    return name_or_entry if isinstance(name_or_entry, ZooEntry) else get(name_or_entry)


def _check_positive(**values: int) -> None:
    for key, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}")


def _inputs(entry: "ZooEntry", batch_size: int, generator: torch.Generator) -> torch.Tensor:
    shape = (batch_size, *entry.input_shape)
    if entry.input_dtype == "int64":  # a ZooEntry checks its dtype, and that token ids have a vocab_size
        return torch.randint(0, entry.vocab_size, shape, generator=generator, dtype=torch.int64)
    return torch.randn(shape, generator=generator, dtype=torch.float32)


def _labels(entry: "ZooEntry", batch_size: int, generator: torch.Generator) -> torch.Tensor:
    # Labels have the output's shape without its last (class) axis: (batch,) or (batch, seq).
    shape = (batch_size, *entry.output_shape[:-1])
    return torch.randint(0, entry.num_classes, shape, generator=generator, dtype=torch.int64)


def example_input(name_or_entry: "str | ZooEntry", batch_size: int = 1, seed: int = 0) -> torch.Tensor:
    """A deterministic input batch for a zoo model: shape ``(batch_size, *input_shape)``.

    Float images are standard normal; token ids are uniform in ``[0, vocab_size)``.
    """
    _check_positive(batch_size=batch_size)
    entry = _entry(name_or_entry)
    generator = torch.Generator().manual_seed(seed)
    return _inputs(entry, batch_size, generator)


def synthetic_split(name_or_entry: "str | ZooEntry", batch_size: int = 8, batches: int = 4,
                    seed: int = 0) -> list[Batch]:
    """``batches`` deterministic ``(x, y)`` batches of ``batch_size`` samples for one split."""
    _check_positive(batch_size=batch_size, batches=batches)
    entry = _entry(name_or_entry)
    generator = torch.Generator().manual_seed(seed)
    return [(_inputs(entry, batch_size, generator), _labels(entry, batch_size, generator)) for _ in range(batches)]


def synthetic_splits(name_or_entry: "str | ZooEntry", batch_size: int = 8, batches: int = 4,
                     seed: int = 0) -> dict[str, list[Batch]]:
    """``{"train": [...], "test": [...]}``: two disjointly seeded splits of ``(x, y)`` batches.

    Split ``i`` (train 0, test 1) is drawn with seed ``2 * seed + i``, so no two seeds share
    a split.
    """
    return {split: synthetic_split(name_or_entry, batch_size, batches, seed=2 * seed + i)
            for i, split in enumerate(_SPLITS)}
