"""What one rank holds under data-parallel sharding strategies (the model used, stated exactly).

Strategies (``sharding=``), for ``world_size`` ranks that each run the measured step on their
own micro-batch:

* ``None``: one device, nothing divided.
* ``'ddp'``: ``DistributedDataParallel``. Everything is replicated, and the reducer's
  gradient buckets hold a flat copy of every trainable gradient for the whole run (PyTorch's
  DDP documentation: ``gradient_as_bucket_view=True`` "can reduce peak memory usage, where the
  saved memory size will be equal to the total gradients size").
* ``'zero1'``: optimizer states divided among ranks.
* ``'zero2'``: optimizer states and gradients divided; the unsharded gradients of one unit
  exist during backward until they are reduce-scattered.
* ``'zero3'`` / ``'fsdp'``: parameters, gradients and states divided; during forward and
  backward a rank also holds the all-gathered (unsharded) parameters of the root unit (the
  parameters outside every unit: embeddings, final norm, head) and of two units at a time (the
  one running and the one prefetched), and during backward the unsharded gradients of one unit
  before reduce-scatter. This is FSDP2's ``fully_shard`` applied to each unit and to the root.

Units are the modules FSDP would wrap: by default the children of the largest
``nn.ModuleList`` (the repeated blocks of a transformer); the whole model when it has none.
A tensor is divided as FSDP2 divides it: on dim 0, each rank holding ``ceil(dim0 / world_size)``
rows (padded); a 0-dim tensor is not divided.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["ShardPlan", "resolve_sharding", "shard_bytes", "repeated_blocks", "select_modules"]

_STRATEGIES = {
    None: (False, False, False),
    "ddp": (False, False, False),
    "zero1": (False, False, True),
    "zero2": (False, True, True),
    "zero3": (True, True, True),
    "fsdp": (True, True, True),
}


@dataclass(frozen=True)
class ShardPlan:
    """Which model states a strategy divides among ``world_size`` ranks."""

    strategy: str | None
    world_size: int
    params: bool
    grads: bool
    states: bool


def resolve_sharding(sharding: str | None, world_size: int) -> ShardPlan:
    """Check ``sharding`` / ``world_size`` and say what the strategy divides."""
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    key = sharding.lower() if isinstance(sharding, str) else sharding
    if key not in _STRATEGIES:
        raise ValueError(f"sharding={sharding!r} is not known; use one of None, 'ddp', 'zero1', 'zero2', "
                         "'zero3', 'fsdp'")
    if key is None and world_size != 1:
        raise ValueError(f"world_size={world_size} needs a sharding strategy (sharding='ddp', 'zero1', 'zero2', "
                         "'zero3' or 'fsdp'); sharding=None means one device")
    params, grads, states = _STRATEGIES[key]
    return ShardPlan(key, world_size, params, grads, states)


def shard_bytes(tensor: torch.Tensor, world_size: int) -> int:
    """Bytes one rank holds of ``tensor`` divided on dim 0 (``ceil(dim0 / world_size)`` rows)."""
    if tensor.dim() == 0 or world_size == 1:
        return tensor.numel() * tensor.element_size()
    rows = tensor.shape[0]
    row_bytes = (tensor.numel() // rows if rows else 0) * tensor.element_size()
    return math.ceil(rows / world_size) * row_bytes


def repeated_blocks(model: nn.Module) -> list[str]:
    """Qualified names of the children of the ``nn.ModuleList`` holding most parameters ([] if none)."""
    best: tuple[int, str, nn.ModuleList] | None = None
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module):
            size = sum(p.numel() for p in module.parameters())
            if best is None or size > best[0]:
                best = (size, name, module)
    if best is None:
        return []
    prefix = f"{best[1]}." if best[1] else ""
    return [f"{prefix}{child}" for child in best[2]._modules]


def select_modules(model: nn.Module, spec: Any, what: str) -> list[str]:
    """Qualified names of the modules ``spec`` chooses.

    ``spec``: ``True`` (the repeated blocks, see ``repeated_blocks``), a module class or tuple
    of classes, a predicate ``(name, module) -> bool``, or an iterable of qualified names.
    ``what`` names the argument in errors.
    """
    named = dict(model.named_modules())
    if spec is True:
        names = repeated_blocks(model)
        if not names:
            raise ValueError(f"{what}=True chooses the children of the model's largest nn.ModuleList, and "
                             f"{type(model).__name__} has none; pass module classes or qualified names")
        return names
    if isinstance(spec, type) or (isinstance(spec, tuple) and spec and all(isinstance(t, type) for t in spec)):
        names = [name for name, m in named.items() if name and isinstance(m, spec)]
    elif callable(spec):
        predicate: Callable[[str, nn.Module], bool] = spec
        names = [name for name, m in named.items() if name and predicate(name, m)]
    elif isinstance(spec, Iterable) and not isinstance(spec, (str, bytes)):
        names = list(spec)
        missing = [n for n in names if n not in named]
        if missing:
            raise ValueError(f"{what}: no module named {missing[0]!r} in {type(model).__name__}; "
                             f"qualified names look like {list(named)[1:4]}")
    else:
        raise TypeError(f"{what} takes True, module classes, a predicate (name, module) -> bool or qualified "
                        f"names, got {spec!r}")
    if not names:
        raise ValueError(f"{what}={spec!r} chose no module of {type(model).__name__}")
    # Outermost only: a module inside another chosen one is already covered by it.
    chosen = sorted(set(names))
    return [n for n in chosen if not any(n.startswith(f"{o}.") for o in chosen if o != n)]
