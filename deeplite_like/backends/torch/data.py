"""The torch side of data binding: a ``TensorAdapter`` for ``torch.Tensor`` and a split check.

Importing this module registers both with ``deeplite_like.data`` (the core also imports it by
itself the first time it meets a torch tensor).

``torch.utils.data.DataLoader`` splits need nothing special: a loader is re-iterable, and each
item it yields is one batch. The default collate turns ``(x, y)`` samples into a list
``[x, y]`` and dict samples into a dict of batched tensors; both fit ``ForwardPass``. With
``batch_size=None`` (automatic batching off) the loader yields the dataset's items unchanged,
so they must already be whole batches. A bare map-style ``Dataset`` yields single samples and
is refused with a hint to wrap it in a ``DataLoader``; an ``IterableDataset`` is accepted and
its items are taken as batches.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from deeplite_like.data import (
    DataError,
    cyclic_indices,
    format_shape,
    register_adapter,
    register_split_check,
)

__all__ = ["TorchAdapter", "check_torch_split"]

# (memory format, rank) pairs that ``take`` keeps when the source tensor uses them, so that
# timing a resized channels-last input measures the same kernels as the original.
_MEMORY_FORMATS = ((torch.channels_last, 4), (torch.channels_last_3d, 5))


class TorchAdapter:
    """``torch.Tensor`` (and subclasses such as ``nn.Parameter``)."""

    name = "torch"

    def is_tensor(self, x: object) -> bool:
        return isinstance(x, torch.Tensor)

    def describe(self, x: torch.Tensor) -> str:
        dtype = str(x.dtype).removeprefix("torch.")
        device = "" if x.device.type == "cpu" else f", {x.device}"
        if x.is_nested:  # no single shape: its components' (``torch.nested``)
            parts = ", ".join(format_shape(tuple(part.shape)) for part in x.unbind())
            return f"NestedTensor[{dtype}, {parts}{device}]"
        return f"{type(x).__name__}[{dtype}, {format_shape(tuple(x.shape))}{device}]"

    def batch_dim(self, x: torch.Tensor) -> int | None:
        return int(x.size(0)) if x.dim() > 0 else None  # (size(0): a nested tensor has no .shape)

    def take(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """``n`` samples of ``x`` along dim 0: ``x[:n]`` (a view) or rows ``i % len(x)`` (a copy).

        The result has ``x``'s dtype, device, per-sample shape and channels-last layout; when
        ``x`` requires grad the result is a new leaf that requires grad too.
        """
        batch = self.batch_dim(x)
        if batch is None:
            raise ValueError(f"cannot take samples from a 0-d tensor {self.describe(x)}")
        if n == batch:
            return x
        source = x.detach()
        if x.is_nested:  # components chosen as below, nested again (nested tensors have no index_select)
            parts = source.unbind()
            chosen = parts[:n] if n < batch else [parts[i] for i in cyclic_indices(batch, n)]
            return torch.nested.as_nested_tensor(list(chosen), layout=x.layout).requires_grad_(x.requires_grad)
        if n < batch:
            out = source[:n]
        else:
            index = torch.arange(n, dtype=torch.long, device=x.device) % batch  # cyclic_indices, no Python list
            out = source.index_select(0, index)
            for memory_format, rank in _MEMORY_FORMATS:
                if x.dim() == rank and not x.is_contiguous() and x.is_contiguous(memory_format=memory_format):
                    out = out.contiguous(memory_format=memory_format)
        return out.requires_grad_(x.requires_grad)


def check_torch_split(split: str, obj: object) -> None:
    """Refuse a bare map-style ``Dataset`` as a split: iterating it yields single samples."""
    if isinstance(obj, Dataset) and not isinstance(obj, (DataLoader, IterableDataset)):
        raise DataError(
            f"split {split!r}: it is a {type(obj).__name__} (a map-style Dataset), which yields "
            f"single samples, not batches; wrap it: DataLoader(dataset, batch_size=...)"
        )


register_adapter(TorchAdapter())
register_split_check(check_torch_split)
