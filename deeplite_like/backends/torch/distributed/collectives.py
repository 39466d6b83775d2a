"""The table of ``torch.distributed`` collective operators: their kind and payload.

Every collective reaches the dispatcher as an operator: the functional collectives DTensor and
FSDP2 issue (``_c10d_functional.*``, ``_c10d_functional_autograd.*``, ``_dtensor.*``), and the
``c10d.*`` operators behind ``torch.distributed.all_reduce`` & co. and DDP's gradient buckets.
The counting mode prices them at 0 FLOPs and records them (``CommStats``); this module says, by
operator name, what kind each is and which argument is its payload ``S``
(``deeplite_like.results`` states the convention).

No ``torch.distributed`` import here: the group of a call is resolved only when a collective
runs, and then the process group exists.
"""
from __future__ import annotations

import sys
from typing import Any, NamedTuple

import torch

__all__ = ["COLLECTIVES", "FREE_COMM_OPS", "Collective", "collective_call"]


class Collective(NamedTuple):
    """``kind`` of the collective; ``payload``: the argument whose bytes are ``S``; ``times_n``:
    ``S`` is ``n`` x those bytes (an all-gather's input is ``1/n`` of what it gathers)."""

    kind: str
    payload: str
    times_n: bool = False


_FUNCTIONAL = {
    "all_reduce": Collective("all_reduce", "input"),
    "all_reduce_": Collective("all_reduce", "input"),
    "all_reduce_coalesced": Collective("all_reduce", "inputs"),
    "all_reduce_coalesced_": Collective("all_reduce", "inputs"),
    "all_gather_into_tensor": Collective("all_gather", "input", times_n=True),
    "all_gather_into_tensor_out": Collective("all_gather", "input", times_n=True),
    "all_gather_into_tensor_coalesced": Collective("all_gather", "inputs", times_n=True),
    "reduce_scatter_tensor": Collective("reduce_scatter", "input"),
    "reduce_scatter_tensor_out": Collective("reduce_scatter", "input"),
    "reduce_scatter_tensor_coalesced": Collective("reduce_scatter", "inputs"),
    "all_to_all_single": Collective("all_to_all", "input"),
    "broadcast": Collective("broadcast", "input"),
    "broadcast_": Collective("broadcast", "input"),
    "isend": Collective("p2p", "input"),
    "irecv": Collective("p2p", "output"),
    "batch_p2p_ops": Collective("p2p", "tensors"),
}
_C10D = {
    "allreduce_": Collective("all_reduce", "tensors"),
    "allreduce_coalesced_": Collective("all_reduce", "tensors"),
    "allgather_": Collective("all_gather", "output_tensors"),
    "_allgather_base_": Collective("all_gather", "output_tensor"),
    "allgather_coalesced_": Collective("all_gather", "output_lists"),
    "allgather_into_tensor_coalesced_": Collective("all_gather", "outputs"),
    "reduce_scatter_": Collective("reduce_scatter", "input_tensors"),
    "_reduce_scatter_base_": Collective("reduce_scatter", "input_tensor"),
    "reduce_scatter_tensor_coalesced_": Collective("reduce_scatter", "inputs"),
    "broadcast_": Collective("broadcast", "tensors"),
    "reduce_": Collective("reduce", "tensors"),
    "gather_": Collective("gather", "input_tensors", times_n=True),
    "scatter_": Collective("scatter", "output_tensors", times_n=True),
    "alltoall_": Collective("all_to_all", "input_tensors"),
    "alltoall_base_": Collective("all_to_all", "input"),
    "send": Collective("p2p", "tensors"),
    "recv_": Collective("p2p", "tensors"),
    "recv_any_source_": Collective("p2p", "tensors"),
    "barrier": Collective("barrier", ""),
    "monitored_barrier_": Collective("barrier", ""),
}
COLLECTIVES: dict[str, Collective] = {
    **{f"_c10d_functional.{name}": c for name, c in _FUNCTIONAL.items()},
    **{f"_c10d_functional_autograd.{name}": c for name, c in _FUNCTIONAL.items()},
    **{f"c10d.{name}": c for name, c in _C10D.items()},
    "_dtensor.shard_dim_alltoall": Collective("all_to_all", "input"),
}
# Free (0 FLOPs, no record): waits, checks and look-ups that move no data of their own, and
# FSDP2's copies into and out of its all-gather / reduce-scatter buffers (``torch.ops.fsdp``).
FREE_COMM_OPS = frozenset({"_c10d_functional.wait_tensor", "c10d.check_for_nan",
                           "_c10d_functional._wrap_tensor_autograd", "_dtensor.mesh_get_process_group",
                           "fsdp.all_gather_copy_in", "fsdp.split_with_sizes_copy", "fsdp.chunk_cat", "fsdp.copy_"})


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def _bound(func: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by their schema names."""
    names = [arg.name for arg in func._schema.arguments]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


def _group(bound: dict[str, Any]) -> tuple[str, int]:
    """``(group, group size)`` of a collective call, from its ``process_group`` or ``group_name``.

    The group reads ``name:description``: ``0:default_pg`` for the world, ``1:mesh_tp`` for the
    ``tp`` dimension of a ``DeviceMesh`` (which describes its groups as ``mesh_<dim name>``).
    """
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    group = bound.get("process_group")
    if group is not None:
        group = torch._C._distributed_c10d.ProcessGroup.unbox(group)
    elif "group_name" in bound and c10d is not None:
        group = c10d._resolve_process_group(bound["group_name"])
    if group is None:
        size = bound.get("group_size")
        return str(bound.get("group_name", "")), int(size) if size is not None else 1
    description = getattr(group, "group_desc", "")
    return f"{group.group_name}:{description}" if description else str(group.group_name), int(group.size())


def collective_call(collective: Collective, func: Any, args: tuple, kwargs: dict) -> tuple[str, int, int]:
    """``(group name, group size n, payload bytes S)`` of one call of a collective operator."""
    bound = _bound(func, args, kwargs)
    group, size = _group(bound)
    payload = _nbytes(bound.get(collective.payload)) if collective.payload else 0
    return group, size, payload * size if collective.times_n else payload
