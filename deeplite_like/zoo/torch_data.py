"""Tiny deterministic synthetic data for the zoo's models (PyTorch tensors).

A split is a plain list of ``(x, y)`` batches: iterable, sized and re-iterable like a
``DataLoader``, so it can be passed as a profiler's data split. Inputs follow the model's
spec (float images or int64 token ids); labels are uniform random class ids (one per sample
for classification, one per token for tagging). The data carries no signal: it exists to
drive cost measurements (MACs, memory, latency), not to measure accuracy.

Everything is drawn from a ``torch.Generator`` seeded explicitly; the global RNG is never used.
"""
from __future__ import annotations

import torch

from deeplite_like.zoo import ZooEntry, get

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
