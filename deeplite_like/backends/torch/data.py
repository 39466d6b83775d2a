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

from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree
from torch.utils.data import DataLoader, Dataset, IterableDataset

from deeplite_like.data import (
    DataError,
    ForwardPass,
    Inputs,
    cyclic_indices,
    format_shape,
    register_adapter,
    register_split_check,
)
from deeplite_like.device import Device
from deeplite_like.loaders import DataLoader as LoaderBase, TensorInfo, TensorSampler

__all__ = ["TorchAdapter", "TorchDataLoader", "TorchForwardPass", "TorchTensorSampler", "check_torch_split"]

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


# -- deeplite-profiler's torch data-loader classes ---------------------------------------------
class TorchTensorSampler(TensorSampler):
    """deeplite's ``TorchTensorSampler``: describes torch tensors (numpy arrays are converted), per sample."""

    def _standardize_tensor(self, x: Any) -> torch.Tensor:
        if isinstance(x, np.ndarray):
            return torch.from_numpy(x)
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"TorchTensorSampler: {type(x).__name__} is not a torch.Tensor or a numpy array")
        return x

    def _create_random_tensor(self, x_info: TensorInfo, batch_size: int) -> torch.Tensor:
        if x_info.dtype.is_complex:
            raise RuntimeError(f"TorchTensorSampler makes no random {x_info.dtype} tensors (complex numbers)")
        return torch.rand(batch_size, *x_info.shp).to(x_info.dtype)

    def _get_info(self, x: torch.Tensor) -> tuple[torch.Size, torch.dtype]:
        return x.shape[1:], x.dtype  # (the batch axis stripped)

    def to_device(self, tensors_tuple: tuple, device: Any, standardize: bool = True) -> tuple:
        """The tensors moved to ``device`` (a ``Device``, or a name); the model is not moved."""
        target = torch.device(str(Device(device)) if not isinstance(device, torch.device) else device)
        if standardize:
            tensors_tuple = self.standardize_tensors(tensors_tuple)
        return self._loop_over_tensors_tuple(tensors_tuple, lambda x: x.to(target))


class TorchForwardPass(ForwardPass):
    """deeplite's ``TorchForwardPass``: a ``ForwardPass`` whose ``model_call`` feeds torch tensors.

    Unlike deeplite's, ``model_call`` never moves the model: the inputs go to the device the
    model's parameters are on, and a ``device`` other than that one is an error that says so.
    """

    @property
    def _tensor_sampler_cls(self) -> type[TorchTensorSampler]:
        return TorchTensorSampler

    def model_call(self, model: Any, x: Any, device: Any = None) -> Any:
        if not self.expecting_common_inputs:
            raise TypeError(f"{type(self).__name__}.model_call: with expecting_common_inputs=False, define model_call "
                            "in the subclass (the default feeds tensors, or tuples / lists / dicts of tensors)")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"{type(self).__name__}.model_call: the model must be a torch.nn.Module, got "
                            f"{type(model).__name__}")
        where = next((t.device for t in (*model.parameters(), *model.buffers())), torch.device("cpu"))
        if device is not None and torch.device(str(Device(device))).type != where.type:
            raise ValueError(f"{type(self).__name__}.model_call(device={device}): the model is on {where}; move the "
                             f"model there yourself (the profiler never moves a model), or pass device={where.type!r}")
        inputs = x if isinstance(x, Inputs) else Inputs(x if isinstance(x, (tuple, list)) else (x,))

        def to(leaf: Any) -> Any:
            return leaf.to(where) if isinstance(leaf, torch.Tensor) else leaf

        return model(*pytree.tree_map(to, inputs.args), **pytree.tree_map(to, dict(inputs.kwargs)))


class TorchDataLoader(LoaderBase):
    """deeplite's ``TorchDataLoader``: wraps a ``torch.utils.data.DataLoader`` (or any sized iterable)."""

    def dump_native_info(self) -> None:
        return None

    def load_native_info(self, native_state: Any) -> "TorchDataLoader":
        return self

    def __len__(self) -> int:
        return len(self.native_dl)

    def _create_iter(self) -> Any:
        return iter(self.native_dl)

    @property
    def batch_size(self) -> int:
        size = getattr(self.native_dl, "batch_size", None)
        if size is None:
            raise TypeError(f"TorchDataLoader.batch_size: the wrapped {type(self.native_dl).__name__} has no "
                            "batch_size")
        return size
