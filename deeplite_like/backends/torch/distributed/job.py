"""``profile_job``: count one step on every rank, gather the figures to one rank, add them up.

Each rank counts its own work with ``count_ops`` (local shards of DTensor ops, its own batch,
its collectives) and its parameters with ``parameter_stats`` (local shards); the figures
travel through the process group (``gather_object``, one small Python object per rank, after
the count: the counted step itself runs no extra collective). The ``JobProfile`` holds a row
per rank and the whole-job figures, and renders through ``deeplite_like.reports``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import torch

from deeplite_like.errors import model_inputs
from deeplite_like.reports import TableReport
from deeplite_like.reports.base import strict_json

from ..counting import count_ops
from ..params import parameter_stats

__all__ = ["JobProfile", "RankProfile", "profile_job"]


@dataclass
class RankProfile:
    """What one rank executes, holds and sends in the counted step (ints; bytes per rank).

    ``phases``: phase -> ``[macs, flops]``. ``logical_macs``/``logical_flops``: the rank's share
    of the logical (unsharded) model's cost (``recording.LogicalShare``). ``params``/``param_bytes``:
    parameters this rank holds (local shards). ``unsharded_params``: elements of the whole model's
    parameters (global shapes), the same on every rank. ``communication``: ``CommStats.as_dict()``
    rows. ``step_time_s``: the measured time of the counted step (seconds), for MFU.
    """

    rank: int
    macs: int
    flops: int
    phases: dict[str, list[int]]
    logical_macs: int
    logical_flops: int
    params: int
    param_bytes: int
    unsharded_params: int
    comm_calls: int
    comm_payload_bytes: int
    comm_bus_bytes: int
    communication: list[dict] = field(default_factory=list)
    step_time_s: float | None = None


def _total(name: str) -> property:
    """A read-only ``JobProfile`` figure: the sum over its ranks of ``RankProfile.<name>`` (an int)."""
    return property(lambda self: sum(getattr(r, name) for r in self.ranks), doc=f"The ranks' ``{name}``, summed.")


@dataclass
class JobProfile:
    """Per-rank rows and whole-job figures of one counted step.

    Whole job: ``total_macs``/``total_flops`` (what all ranks execute, redundant work included),
    ``logical_macs``/``logical_flops`` (what the unsharded model computes on the global batch;
    under pure data parallel: per-replica FLOPs x data-parallel size), ``unsharded_params``,
    ``held_params`` (the sum of what the ranks hold: replicas count each copy),
    ``imbalance`` (max / mean of the ranks' FLOPs; 1.0 is balanced), communication totals.
    """

    world_size: int
    ranks: list[RankProfile]
    peak_flops: float | None = None

    total_macs = _total("macs")
    total_flops = _total("flops")
    logical_macs = _total("logical_macs")
    logical_flops = _total("logical_flops")
    held_params = _total("params")
    comm_payload_bytes = _total("comm_payload_bytes")
    comm_bus_bytes = _total("comm_bus_bytes")

    @property
    def unsharded_params(self) -> int:
        return self.ranks[0].unsharded_params

    @property
    def imbalance(self) -> float:
        """Max over mean of the ranks' FLOPs (1.0: every rank does the same work)."""
        mean = self.total_flops / len(self.ranks)
        return max(r.flops for r in self.ranks) / mean if mean else 1.0

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilisation: logical FLOPs / (slowest rank's step time x world size x ``peak_flops``)."""
        times = [r.step_time_s for r in self.ranks]
        if self.peak_flops is None or any(t is None or t <= 0 for t in times):
            return None
        return self.logical_flops / (max(times) * self.world_size * self.peak_flops)

    def as_dict(self) -> dict:
        return {"world_size": self.world_size, "ranks": [asdict(r) for r in self.ranks],
                "job": self._job_row(), "peak_flops": self.peak_flops}

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`as_dict` as strict JSON (a non-finite float is ``"NaN"`` / ``"Infinity"``: ``strict_json``)."""
        return strict_json(self.as_dict(), indent=indent)

    def _job_row(self) -> dict:
        return {"total_macs": self.total_macs, "total_flops": self.total_flops, "logical_macs": self.logical_macs,
                "logical_flops": self.logical_flops, "unsharded_params": self.unsharded_params,
                "held_params": self.held_params, "imbalance": self.imbalance,
                "comm_payload_bytes": self.comm_payload_bytes, "comm_bus_bytes": self.comm_bus_bytes,
                "mfu": self.mfu}

    def report(self) -> TableReport:
        """Rows per rank and a whole-job row (``to_text``, ``to_json``, ``to_csv``, ``to_markdown``)."""
        columns = ["rank", "MACs", "FLOPs", "logical FLOPs", "params held", "comm calls", "payload bytes",
                   "bus bytes"]
        rows = [{"rank": str(r.rank), "MACs": r.macs, "FLOPs": r.flops, "logical FLOPs": r.logical_flops,
                 "params held": r.params, "comm calls": r.comm_calls, "payload bytes": r.comm_payload_bytes,
                 "bus bytes": r.comm_bus_bytes} for r in self.ranks]
        rows.append({"rank": "job", "MACs": self.total_macs, "FLOPs": self.total_flops,
                     "logical FLOPs": self.logical_flops, "params held": self.held_params,
                     "comm calls": sum(r.comm_calls for r in self.ranks), "payload bytes": self.comm_payload_bytes,
                     "bus bytes": self.comm_bus_bytes})
        exact = {column: (lambda v: "" if v is None else f"{v:,}") for column in columns[1:]}
        notes = [f"{self.world_size} ranks; unsharded parameters {self.unsharded_params:,}; logical MACs "
                 f"{self.logical_macs:,}; imbalance (max/mean FLOPs) {self.imbalance:.3f}",
                 "bytes: a rank's own, summed in the job row; payload = NCCL-tests size S, bus = ring bytes "
                 "(2(n-1)/n S for all_reduce, (n-1)/n S for all_gather / reduce_scatter)"]
        if self.mfu is not None:
            notes.append(f"MFU {self.mfu:.1%} of {self.peak_flops:.4g} FLOP/s per device")
        return TableReport("Distributed job profile (one step)", columns, rows, formatters=exact, notes=notes)


def profile_job(model: torch.nn.Module, *inputs: Any, args: Any = None, kwargs: Mapping[str, Any] | None = None,
                backward: bool = False, loss_fn: Any = None, causal_half: bool = False, group: Any = None,
                dst: int | None = 0, peak_flops: float | None = None, step_time_s: float | None = None,
                **model_kwargs: Any) -> JobProfile | None:
    """Count one step of ``model(*args, **kwargs)`` on every rank of ``group`` and gather the figures.

    Call it on every rank (it is collective), with each rank's own inputs, inside a process
    group (``torchrun`` / ``torch.multiprocessing.spawn`` + ``init_process_group``). The count
    is ``count_ops(model, args=args, kwargs=kwargs, backward=backward, loss_fn=loss_fn,
    causal_half=causal_half)``; the inputs follow ``count_ops``'s convention (positional inputs
    after the model or ``args=``, keyword inputs in ``kwargs=``).

    Args:
        group: the process group (default: the world).
        dst: the group rank that receives the ``JobProfile``; the others get ``None``.
            ``dst=None``: every rank gets it (``all_gather_object``).
        peak_flops: one device's peak FLOP/s, to report model FLOPs utilisation (with ``step_time_s``).
        step_time_s: this rank's measured time of the same step, in seconds.

    Raises:
        RuntimeError: ``torch.distributed`` is not initialised.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("profile_job needs an initialised process group: call "
                           "torch.distributed.init_process_group(...) in every rank first (torchrun sets the "
                           "environment it reads); for one process use count_ops")
    args, kwargs = model_inputs("profile_job", inputs, args, kwargs, model_kwargs)
    counted = count_ops(model, args=args, kwargs=kwargs, backward=backward, loss_fn=loss_fn, causal_half=causal_half)
    held = parameter_stats(model)
    mine = RankProfile(
        rank=dist.get_rank(group), macs=counted.macs, flops=counted.flops,
        phases={name: [p.macs, p.flops] for name, p in counted.phases.items()},
        logical_macs=counted.macs if counted.logical_macs is None else counted.logical_macs,
        logical_flops=counted.flops if counted.logical_flops is None else counted.logical_flops,
        params=held.total_params, param_bytes=held.param_bytes,
        unsharded_params=sum(p.numel() for p in model.parameters()),  # a DTensor's numel is its global one
        comm_calls=sum(c.calls for c in counted.communication), comm_payload_bytes=counted.comm_payload_bytes,
        comm_bus_bytes=counted.comm_bus_bytes, communication=[c.as_dict() for c in counted.communication],
        step_time_s=step_time_s)
    world = dist.get_world_size(group)
    if dst is None:
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, mine, group=group)
    else:
        gathered = [None] * world if dist.get_rank(group) == dst else None
        dist.gather_object(mine, gathered, dst=dist.get_global_rank(group, dst) if group is not None else dst,
                           group=group)
        if gathered is None:
            return None
    return JobProfile(world, sorted(gathered, key=lambda r: r.rank), peak_flops)
