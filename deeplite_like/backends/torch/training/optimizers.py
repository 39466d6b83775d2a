"""The optimizer of a measured training step, and what one rank holds of its states under sharding.

``build_optimizer`` makes the optimizer from a name, an ``Optimizer`` class or a factory.

What one rank holds under data-parallel sharding (``ShardPlan``, from ``resolve_sharding``): the model
used, stated exactly on ``ShardPlan``: DDP, ZeRO 1-3 and FSDP2 with its mixed-precision, resharding
and CPU-offload options.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["ShardPlan", "build_optimizer", "repeated_blocks", "resolve_sharding", "select_modules", "shard_bytes"]


_OPTIMIZERS: dict[str, tuple[str, dict[str, Any]]] = {
    "adamw": ("AdamW", {}),
    "adam": ("Adam", {}),
    "sgd": ("SGD", {"lr": 1e-3, "momentum": 0.9}),
    "adafactor": ("Adafactor", {}),
    "adagrad": ("Adagrad", {}),
    "rmsprop": ("RMSprop", {}),
}


def build_optimizer(optimizer: Any, params: list[torch.Tensor], foreach: bool = True,
                    fused: bool = False) -> tuple[torch.optim.Optimizer, str, str]:
    """An optimizer over ``params`` from a name, an ``Optimizer`` class or a factory; its name and implementation.

    Names: ``adamw``, ``adam``, ``sgd`` (momentum 0.9, so it keeps one state), ``adafactor``,
    ``adagrad``, ``rmsprop``. A name or a class is built with ``foreach=True`` where the class
    takes it (torch's default on CUDA), ``foreach=False`` (the per-tensor loop, torch's default on
    CPU) or ``fused=True`` (which overrides ``foreach``). A factory is called as ``factory(params)`` and used as built.
    The implementation is ``"foreach"``, ``"for-loop"``, ``"fused"`` or, for a factory, what it
    chose (``"default"`` when it passed neither: torch then picks by device).
    """
    if isinstance(optimizer, str):
        key = optimizer.lower()
        if key not in _OPTIMIZERS:
            raise ValueError(f"optimizer={optimizer!r} is not a known name; use one of {sorted(_OPTIMIZERS)}, "
                             "an optimizer class, or a factory params -> optimizer")
        class_name, defaults = _OPTIMIZERS[key]
        cls = getattr(torch.optim, class_name, None)
        if cls is None:
            raise ValueError(f"optimizer={optimizer!r}: torch {torch.__version__} has no torch.optim.{class_name}")
        built = _from_class(cls, params, defaults, foreach, fused)
        return built, key, _implementation(built.defaults)
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        built = _from_class(optimizer, params, {}, foreach, fused)
        return built, optimizer.__name__, _implementation(built.defaults)
    if callable(optimizer):
        if fused or not foreach:  # (not silently ignored)
            raise ValueError("foreach= / fused= choose the implementation of an optimizer given by name or class; "
                             f"the factory {optimizer!r} builds its own: pass foreach=/fused= to the optimizer there")
        built = optimizer(params)
        if not isinstance(built, torch.optim.Optimizer):
            raise TypeError(f"optimizer factory {optimizer!r} returned {type(built).__name__}, not a "
                            "torch.optim.Optimizer; it is called as factory(params)")
        return built, type(built).__name__, _implementation(built.defaults)
    raise TypeError(f"optimizer takes a name ({sorted(_OPTIMIZERS)}), an Optimizer class or a factory "
                    f"params -> optimizer, got {optimizer!r}")


def _from_class(cls: type, params: list[torch.Tensor], defaults: dict[str, Any], foreach: bool,
                fused: bool) -> torch.optim.Optimizer:
    kwargs = dict(defaults)
    takes = inspect.signature(cls.__init__).parameters
    if fused:
        if "fused" not in takes:
            raise ValueError(f"fused=True: torch.optim.{cls.__name__} has no fused implementation (its __init__ takes "
                             "no 'fused'); use foreach=True or foreach=False")
        kwargs["fused"] = True
    if "foreach" in takes:
        kwargs["foreach"] = foreach and not fused
    elif not foreach and not fused:
        raise ValueError(f"foreach=False: torch.optim.{cls.__name__} takes no 'foreach' (it has one implementation); "
                         "leave foreach at its default")
    return cls(params, **kwargs)


def _implementation(defaults: dict[str, Any]) -> str:
    """Which step an optimizer runs, from its defaults: fused, foreach, for-loop, or torch's default."""
    if defaults.get("fused"):
        return "fused"
    if defaults.get("foreach") is None:
        return "default" if "foreach" in defaults else "single"
    return "foreach" if defaults["foreach"] else "for-loop"


# -- sharding -------------------------------------------------------------------------------------
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
    """Which model states a strategy divides among ``world_size`` ranks; FSDP2's policy.

    What one rank holds under data-parallel sharding strategies (the model used, stated exactly).
    Strategies (``sharding=``), for ``world_size`` ranks that each run the measured step on their own
    micro-batch:

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

    FSDP2 options (``'fsdp'`` / ``'zero3'`` only):

    * ``mixed_precision``: FSDP2's ``MixedPrecisionPolicy`` (or a mapping with its fields). The
      sharded parameters stay in their own dtype (the float32 master weights), and so do the sharded
      gradients and the optimizer states; each unit's parameters are all-gathered in ``param_dtype``
      and the forward and backward compute in it (floating inputs cast when ``cast_forward_inputs``);
      one unit's gradients are reduce-scattered from a flat buffer in ``reduce_dtype``. No weight is
      copied by autocast and saved for backward: the gathered ``param_dtype`` parameters are FSDP's
      buffers (``gather_bytes``), freed after each unit.
    * ``reshard_after_forward=False``: each unit keeps its gathered parameters from its forward to
      its backward (no re-gather): ``gather_bytes`` holds every unit's from the forward on, the bound
      reached at the end of the forward and the start of the backward.
    * ``cpu_offload=True``: FSDP2's ``CPUOffloadPolicy``: each rank's shards of the parameters,
      gradients and optimizer states live in host memory and the optimizer step runs there; the
      device holds the gathered units, the activations and one unit's gradients before
      reduce-scatter.

    Units are the modules FSDP would wrap: by default the children of the largest
    ``nn.ModuleList`` (the repeated blocks of a transformer); the whole model when it has none.
    A tensor is divided as FSDP2 divides it: on dim 0, each rank holding ``ceil(dim0 / world_size)``
    rows (padded); a 0-dim tensor is not divided.

    ``param_dtype`` / ``reduce_dtype``: the dtypes of the gathered parameters and of the gradient
    reduce-scatter under a mixed-precision policy (``None``: the parameters' own).
    """

    strategy: str | None
    world_size: int
    params: bool
    grads: bool
    states: bool
    param_dtype: torch.dtype | None = None
    reduce_dtype: torch.dtype | None = None
    cast_forward_inputs: bool = True
    reshard_after_forward: bool = True
    cpu_offload: bool = False


_POLICY_FIELDS = ("param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs")


def _policy_fields(policy: Any) -> dict[str, Any]:
    """The fields of FSDP2's ``MixedPrecisionPolicy`` (read from the object or a mapping), checked."""
    if isinstance(policy, dict):
        unknown = sorted(set(policy) - set(_POLICY_FIELDS))
        if unknown:
            raise ValueError(f"mixed_precision: unknown field {unknown[0]!r}; FSDP2's MixedPrecisionPolicy has "
                             f"{', '.join(_POLICY_FIELDS)}")
        fields = {name: policy.get(name) for name in _POLICY_FIELDS}
        fields["cast_forward_inputs"] = policy.get("cast_forward_inputs", True)
    elif all(hasattr(policy, name) for name in _POLICY_FIELDS):
        fields = {name: getattr(policy, name) for name in _POLICY_FIELDS}
    else:
        raise TypeError("mixed_precision takes FSDP2's torch.distributed.fsdp.MixedPrecisionPolicy(param_dtype=..., "
                        f"reduce_dtype=...) or a dict of its fields, got {policy!r}")
    for name in ("param_dtype", "reduce_dtype", "output_dtype"):
        value = fields[name]
        if value is not None and not (isinstance(value, torch.dtype) and value.is_floating_point):
            raise ValueError(f"mixed_precision: {name}={value!r} is not a floating torch.dtype")
    if fields["output_dtype"] is not None:
        raise ValueError("mixed_precision: output_dtype is not modelled (the output stays in param_dtype); leave it "
                         "None")
    if not isinstance(fields["cast_forward_inputs"], bool):
        raise TypeError(f"mixed_precision: cast_forward_inputs must be a bool, got {fields['cast_forward_inputs']!r}")
    return fields


def resolve_sharding(sharding: str | None, world_size: int, mixed_precision: Any = None,
                     reshard_after_forward: bool = True, cpu_offload: bool = False) -> ShardPlan:
    """Check ``sharding`` / ``world_size`` (and FSDP2's options) and say what the strategy divides."""
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
    if not isinstance(reshard_after_forward, bool):
        raise TypeError(f"reshard_after_forward must be a bool (FSDP2's int form, resharding to a smaller group, is "
                        f"not modelled), got {reshard_after_forward!r}")
    if not isinstance(cpu_offload, bool):
        raise TypeError(f"cpu_offload must be a bool (FSDP2's CPUOffloadPolicy), got {cpu_offload!r}")
    if (mixed_precision is not None or not reshard_after_forward or cpu_offload) and not params:
        option = ("mixed_precision" if mixed_precision is not None else
                  "reshard_after_forward=False" if not reshard_after_forward else "cpu_offload=True")
        raise ValueError(f"{option} is an option of FSDP2 (fully_shard): pass sharding='fsdp' (or 'zero3'), not "
                         f"sharding={sharding!r}")
    if mixed_precision is None:
        return ShardPlan(key, world_size, params, grads, states, reshard_after_forward=reshard_after_forward,
                         cpu_offload=cpu_offload)
    fields = _policy_fields(mixed_precision)
    return ShardPlan(key, world_size, params, grads, states, param_dtype=fields["param_dtype"],
                     reduce_dtype=fields["reduce_dtype"] or fields["param_dtype"],
                     cast_forward_inputs=fields["cast_forward_inputs"], reshard_after_forward=reshard_after_forward,
                     cpu_offload=cpu_offload)


def shard_bytes(tensor: torch.Tensor, world_size: int, element_size: int | None = None) -> int:
    """Bytes one rank holds of ``tensor`` divided on dim 0 (``ceil(dim0 / world_size)`` rows), at
    ``element_size`` bytes per element when given (a shard kept in another dtype than ``tensor``'s)."""
    size = tensor.element_size() if element_size is None else element_size
    if tensor.dim() == 0 or world_size == 1:
        return tensor.numel() * size
    rows = tensor.shape[0]
    row_bytes = (tensor.numel() // rows if rows else 0) * size
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
