"""Local shards: what one rank holds of a ``DTensor`` (tensor parallel, FSDP2 parameters).

``torch.distributed.tensor`` is looked up in ``sys.modules``, never imported: when it is not
loaded no DTensor exists, and every tensor is its own local shard.
"""
from __future__ import annotations

import sys

import torch

__all__ = ["is_dtensor", "is_fully_sharded", "local_numel", "local_tensor"]


def _dtensor_class() -> type | None:
    api = sys.modules.get("torch.distributed.tensor._api")
    return getattr(api, "DTensor", None) if api is not None else None


def is_dtensor(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a ``DTensor`` (a parameter sharded or replicated over a device mesh)."""
    cls = _dtensor_class()
    return cls is not None and isinstance(tensor, cls)


def local_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a ``DTensor`` (a plain tensor); any other tensor itself.

    The DTensor's own local tensor, not ``to_local()``: that makes a new view at each call, and
    callers tell tensors apart by identity (``params._Counter``).
    """
    return tensor._local_tensor if is_dtensor(tensor) else tensor


def local_numel(tensor: torch.Tensor) -> int:
    """Elements this rank holds of ``tensor``: its local shard's for a ``DTensor``, else ``numel()``."""
    return local_tensor(tensor).numel()


def is_fully_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` or a submodule is an FSDP2 unit (``torch.distributed.fsdp.fully_shard``).

    Between steps such a unit holds sharded ``DTensor`` parameters; its forward gathers them
    into plain unsharded parameters, which are what autograd differentiates.
    """
    fsdp = sys.modules.get("torch.distributed.fsdp._fully_shard._fully_shard")
    unit = getattr(fsdp, "FSDPModule", None) if fsdp is not None else None
    return unit is not None and any(isinstance(module, unit) for module in model.modules())
