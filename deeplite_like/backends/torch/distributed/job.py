"""``profile_job``: count one step on every rank, gather the figures to one rank, add them up.

Each rank counts its own work with ``count_ops`` (local shards of DTensor ops, its own batch,
its collectives) and its parameters with ``parameter_stats`` (local shards); the figures
travel through the process group (``gather_object``, one small Python object per rank, after
the count: the counted step itself runs no extra collective). The ``JobProfile`` holds a row
per rank and the whole-job figures, and renders through ``deeplite_like.reports``.

A pipeline schedule (``torch.distributed.pipelining``: ``ScheduleGPipe``, ``Schedule1F1B``) is
profiled by its step: each rank counts its stage's forwards, loss and backwards as the schedule
interleaves them (``recording.PipelineCounting``), and reports what its stage holds between a
microbatch's forward and its backward, times the microbatches the schedule keeps in flight
(``PipelineStageProfile``).
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import torch

from deeplite_like.errors import model_inputs
from deeplite_like.reports import TableReport
from deeplite_like.reports.base import strict_json
from deeplite_like.results import parent_names, roll_up_containers

from ..counting import count_ops
from ..counting.recorder import make
from ..counting.registry import CountOptions
from ..params import parameter_stats
from ..state import preserved_model_state
from ..tensors import tensors_in
from .recording import PipelineCounting

__all__ = ["JobProfile", "PipelineStageProfile", "RankProfile", "profile_job"]


@dataclass
class PipelineStageProfile:
    """One rank's pipeline stage in the counted step (bytes on this rank).

    ``in_flight``: the most microbatches whose forward has run and whose backward has not, as the
    schedule orders them: GPipe all ``microbatches`` (every forward before any backward), 1F1B
    ``min(microbatches, num_stages - stage_index)`` (its warm-up), 0 without a ``loss_fn`` (no
    backward). ``microbatch_bytes``: what one microbatch holds from its forward to its backward -
    the tensors autograd saved for backward in the stage's forward and in the schedule's loss, the
    stage's output and, on the last stage, its loss - each storage once; not the parameters, the
    step's own inputs and target, or the receive buffers. ``kept_bytes``: the part of it the step
    keeps after that backward, to its end (the last stage's output, merged into the step's output,
    and its loss): 0 on the other stages. ``activation_bytes``: the stage's activations at their
    peak, when the microbatch forwarded last starts its backward: ``in_flight`` x
    ``microbatch_bytes`` + (``microbatches`` - ``in_flight``) x ``kept_bytes``.
    ``recv_buffer_bytes``: the receive buffers the stage keeps for every microbatch, made at its
    first step and kept (activations from the previous stage, gradients from the next).
    Not counted: the backward's own transients (the last stage's seed ``ones_like(loss)``, the
    gradients flowing through a backward), and the last tensor a stage sent (an output forward, a
    received activation's gradient backward), which a 1F1B schedule still references through its
    pending send until its next exchange (``tests/distributed/test_pipeline.py``: one of each
    microbatch size, at the peak).
    """

    schedule: str
    stage_index: int
    num_stages: int
    microbatches: int
    in_flight: int
    microbatch_bytes: int
    kept_bytes: int
    activation_bytes: int
    recv_buffer_bytes: int


@dataclass
class RankProfile:
    """What one rank executes, holds and sends in the counted step (ints; bytes per rank).

    ``phases``: phase -> ``[macs, flops]``. ``logical_macs``/``logical_flops``: the rank's share
    of the logical (unsharded) model's cost (``recording.LogicalShare``). ``params``/``param_bytes``:
    parameters this rank holds (local shards). ``unsharded_params``: elements of the whole model's
    parameters (global shapes), the same on every rank. ``communication``: ``CommStats.as_dict()``
    rows. ``step_time_s``: the measured time of the counted step (seconds), for MFU.
    ``collective_buffers``: bytes this rank holds for its data-parallel wrapper's collectives
    (``collective_buffers``): DDP's gradient buckets, FSDP2's all-gather and reduce-scatter buffers.
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
    pipeline: PipelineStageProfile | None = None
    collective_buffers: dict[str, int] = field(default_factory=dict)

    @property
    def collective_buffer_bytes(self) -> int:
        """The ``collective_buffers``, summed."""
        return sum(self.collective_buffers.values())


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
        """Elements of the whole model's parameters: rank 0's (every rank sees all of them, a DTensor by its
        global shape), or under pipeline parallel the sum over stages, each stage once (its replicas hold
        the same parameters)."""
        if self.ranks[0].pipeline is None:
            return self.ranks[0].unsharded_params
        stages = {r.pipeline.stage_index: r.unsharded_params for r in reversed(self.ranks)}
        return sum(stages.values())

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
                   "bus bytes", "collective buffers"]
        rows = [{"rank": str(r.rank), "MACs": r.macs, "FLOPs": r.flops, "logical FLOPs": r.logical_flops,
                 "params held": r.params, "comm calls": r.comm_calls, "payload bytes": r.comm_payload_bytes,
                 "bus bytes": r.comm_bus_bytes, "collective buffers": r.collective_buffer_bytes} for r in self.ranks]
        rows.append({"rank": "job", "MACs": self.total_macs, "FLOPs": self.total_flops,
                     "logical FLOPs": self.logical_flops, "params held": self.held_params,
                     "comm calls": sum(r.comm_calls for r in self.ranks), "payload bytes": self.comm_payload_bytes,
                     "bus bytes": self.comm_bus_bytes,
                     "collective buffers": sum(r.collective_buffer_bytes for r in self.ranks)})
        exact = {column: (lambda v: "" if v is None else f"{v:,}") for column in columns[1:]}
        notes = [f"{self.world_size} ranks; unsharded parameters {self.unsharded_params:,}; logical MACs "
                 f"{self.logical_macs:,}; imbalance (max/mean FLOPs) {self.imbalance:.3f}",
                 "bytes: a rank's own, summed in the job row; payload = NCCL-tests size S, bus = ring bytes "
                 "(2(n-1)/n S for all_reduce, (n-1)/n S for all_gather / reduce_scatter)"]
        stages = [r for r in self.ranks if r.pipeline is not None]
        if stages:
            p = stages[0].pipeline
            notes.append(f"pipeline {p.schedule}, {p.num_stages} stages, {p.microbatches} microbatches; in flight "
                         "(activation bytes) by rank: " + ", ".join(
                             f"{r.rank}: {r.pipeline.in_flight} ({r.pipeline.activation_bytes:,} B)" for r in stages))
        buffers = self.ranks[0].collective_buffers
        if buffers:
            notes.append("collective buffers (rank 0): " + ", ".join(f"{name} {n:,} B" for name, n in buffers.items()))
        if self.mfu is not None:
            notes.append(f"MFU {self.mfu:.1%} of {self.peak_flops:.4g} FLOP/s per device")
        return TableReport("Distributed job profile (one step)", columns, rows, formatters=exact, notes=notes)


def profile_job(model: Any, *inputs: Any, args: Any = None, kwargs: Mapping[str, Any] | None = None,
                backward: bool = False, loss_fn: Any = None, causal_half: bool = False, group: Any = None,
                dst: int | None = 0, peak_flops: float | None = None, step_time_s: float | None = None,
                target: Any = None, **model_kwargs: Any) -> JobProfile | None:
    """Count one step of ``model(*args, **kwargs)`` on every rank of ``group`` and gather the figures.

    ``model`` may be a pipeline schedule (``ScheduleGPipe`` / ``Schedule1F1B`` of
    ``torch.distributed.pipelining``): then the step is ``schedule.step(*args, target=target,
    **kwargs)`` (the whole batch on the first stage, ``target`` on the last, nothing on the others),
    counted with its backward when the schedule has a ``loss_fn`` (``backward`` and ``loss_fn`` are
    the schedule's: not given here); each rank reports its stage (``RankProfile.pipeline``), and
    the job's unsharded parameters are the stages' sum. The stage's module is left as found
    (``preserved_model_state``: its gradients too); the schedule keeps the state a step leaves.

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
    stage = _pipeline_stage(model)
    pipeline = None
    if stage is not None:
        if backward or loss_fn is not None:
            raise ValueError(f"profile_job({type(model).__name__}): a pipeline schedule runs its own loss and backward "
                             "(its loss_fn); leave backward and loss_fn out")
        counted, pipeline = _count_schedule(model, stage, args, kwargs, target, causal_half)
        model = stage.submod
    elif target is not None:
        raise ValueError("profile_job(target=...) is the loss target of a pipeline schedule's step; for a module, "
                         "pass a loss_fn that holds its target")
    else:
        counted = count_ops(model, args=args, kwargs=kwargs, backward=backward, loss_fn=loss_fn,
                            causal_half=causal_half)
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
        step_time_s=step_time_s, pipeline=pipeline, collective_buffers=collective_buffers(model))
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


# -- collective buffers -----------------------------------------------------------------------
def collective_buffers(model: Any) -> dict[str, int]:
    """Bytes one rank holds for the collectives of its data-parallel wrapper, read from the wrapper itself.

    * ``DistributedDataParallel``: ``"gradient buckets"``, the reducer's flat buckets, each the bytes of
      its parameters' gradients (``bucket_cap_mb``, 25 MiB by default, the first bucket 1 MiB until DDP
      rebuilds its buckets in gradient order after the first step), summed: the sizes the reducer logs
      (``rebuilt_bucket_sizes`` once rebuilt, else ``bucket_sizes``). They live for the whole run.
    * FSDP2 (``fully_shard``): per unit, the flat all-gather output is the unit's parameters padded to
      ``world_size`` rows per tensor on dim 0 in ``param_dtype``; the reduce-scatter input is its trainable
      parameters' padded gradients in ``reduce_dtype`` and its output one shard of them
      (``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``). ``"all-gather buffers"``: two units'
      outputs, the largest (FSDP2 keeps a unit's output until the next unit's copy-out in the forward, and
      prefetches the next unit's in the backward); ``"reduce-scatter buffers"``: the largest unit's input
      and output (one input is kept until the next reduce-scatter). What the step holds beside them at its
      peak, operator by operator, is ``estimate_training_memory(..., sharding='fsdp')``'s.
    * anything else: ``{}``.
    """
    reducer_logs = getattr(model, "_get_ddp_logging_data", None)
    if reducer_logs is not None and hasattr(model, "reducer"):
        logged = reducer_logs()
        sizes = logged.get("rebuilt_bucket_sizes") or logged.get("bucket_sizes") or ""
        return {"gradient buckets": sum(int(n) for n in str(sizes).split(",") if n.strip())}
    gathers, reduces = [], []
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)
        group = state()._fsdp_param_group if state is not None else None
        if group is None:
            continue
        world = group.mesh_info.shard_mesh_size
        policy = group.mp_policy
        gather = reduce = 0
        for fsdp_param in group.fsdp_params:
            sharded = fsdp_param.sharded_param
            numel = fsdp_param.padded_sharded_param_size.numel() * world
            gather += numel * (policy.param_dtype or sharded.dtype).itemsize
            if sharded.requires_grad:
                reduce += numel * (policy.reduce_dtype or policy.param_dtype or sharded.dtype).itemsize
        gathers.append(gather)
        reduces.append(reduce + reduce // world)
    if not gathers:
        return {}
    return {"all-gather buffers": sum(sorted(gathers)[-2:]), "reduce-scatter buffers": max(reduces)}


# -- pipeline parallel ------------------------------------------------------------------------
def _pipeline_stage(model: Any) -> Any:
    """The stage of a single-stage pipeline schedule (``None``: ``model`` is no schedule)."""
    schedules = sys.modules.get("torch.distributed.pipelining.schedules")
    if schedules is None or not isinstance(model, schedules._PipelineSchedule):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"profile_job expects a torch.nn.Module or a pipeline schedule, got {type(model).__name__}")
        return None
    if type(model) not in (schedules.ScheduleGPipe, schedules.Schedule1F1B):
        raise NotImplementedError(f"profile_job counts the ScheduleGPipe and Schedule1F1B pipeline schedules (one stage "
                                  f"per rank), not {type(model).__name__}: its microbatches in flight are not modelled")
    return model._stage


def in_flight(schedule: str, microbatches: int, num_stages: int, stage_index: int) -> int:
    """Most microbatches between their forward and their backward on a stage (``PipelineStageProfile``)."""
    if schedule == "ScheduleGPipe":
        return microbatches
    return min(microbatches, num_stages - stage_index)  # 1F1B's warm-up forwards


class _HeldPerMicrobatch:
    """Storages each microbatch holds for its backward, by forward call of the stage's module.

    ``pack`` is a ``saved_tensors_hooks`` pack hook (identity: the tensor is saved as autograd saves it);
    ``output`` a global forward hook that keeps the stage's outputs. Sizes only are kept, by storage
    address: every storage of one microbatch is alive until its backward, so no two share an address.
    """

    def __init__(self, root: torch.nn.Module, calls: Any, last: bool, setting_up: Any):
        self.root, self._calls, self._last, self._setting_up = root, calls, last, setting_up
        self.held: dict[int, dict[int, int]] = {}  # microbatch -> storage address -> bytes
        self.kept: dict[int, dict[int, int]] = {}  # the same, of what the step keeps to its end

    def _keep(self, tensor: torch.Tensor, microbatch: int | None = None, to_the_end: bool = False) -> None:
        if isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided and tensor.device.type != "meta" \
                and not self._setting_up():  # (not the schedule's shape inference at its first step)
            storage = tensor.untyped_storage()
            microbatch = self._calls() - 1 if microbatch is None else microbatch
            for table in (self.held, self.kept) if to_the_end else (self.held,):
                table.setdefault(microbatch, {})[storage.data_ptr()] = storage.nbytes()

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        if torch._C._current_autograd_node() is None:  # (not a recomputation in backward: transient)
            self._keep(tensor)
        return tensor

    def output(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if module is self.root:
            for tensor in tensors_in(output):
                self._keep(tensor, to_the_end=self._last)

    def losses(self, losses: list) -> None:
        """The last stage's loss of each microbatch (kept by the schedule to the step's end)."""
        for microbatch, loss in enumerate(losses):
            self._keep(loss, microbatch, to_the_end=True)

    @staticmethod
    def largest(tables: dict[int, dict[int, int]], excluded: set[int]) -> int:
        """The most bytes one microbatch holds in ``tables``, leaving out the storages at ``excluded`` addresses."""
        return max((sum(n for ptr, n in held.items() if ptr not in excluded) for held in tables.values()), default=0)


def _count_schedule(schedule: Any, stage: Any, args: tuple, kwargs: dict, target: Any,
                    causal_half: bool) -> tuple[Any, PipelineStageProfile]:
    """Count one ``schedule.step`` on this rank's stage, and what its microbatches hold."""
    schedules = sys.modules["torch.distributed.pipelining.schedules"]  # (loaded: ``schedule`` is one of its classes)
    module = stage.submod
    modules = list(module.named_modules())
    mode = make(PipelineCounting, CountOptions(causal_half=causal_half), track_backward=True)
    mode._loss_code = schedules._PipelineSchedule._compute_loss.__code__
    mode._setup_code = schedules._PipelineSchedule._initialize_pp_stages.__code__
    mode.ready = lambda: schedule._stage_forward_initialized and (
        schedule._stage_backward_initialized or not schedule._has_backward)
    kwargs = dict(kwargs)
    held = _HeldPerMicrobatch(module, lambda: mode.result.by_module[""].calls,
                              stage.is_last and kwargs.get("return_outputs", True), mode.setting_up)
    theirs = kwargs.pop("losses", None)
    losses: list = []  # the schedule's loss of each microbatch (kept to the end of its step)
    with preserved_model_state(module), contextlib.ExitStack() as stack:
        stack.callback(mode.detach)
        mode.attach(modules)
        hook = torch.nn.modules.module.register_module_forward_hook(held.output)
        stack.callback(hook.remove)
        stack.enter_context(mode)
        stack.enter_context(torch.autograd.graph.saved_tensors_hooks(held.pack, lambda tensor: tensor))
        mode.set_phase("forward")
        schedule.step(*args, target=target, losses=losses, **kwargs)
    counted = mode.finish()
    held.losses(losses)
    if theirs is not None:
        theirs[:] = losses
    roll_up_containers(counted.by_module, parent_names(name for name, _ in modules))
    buffers = [info.buffer for infos in (*stage.args_recv_info.values(), *stage.grad_recv_info.values())
               for info in infos if getattr(info, "buffer", None) is not None]
    persistent = [*module.parameters(), *module.buffers(), *tensors_in((args, kwargs, target)), *buffers]
    excluded = {t.untyped_storage().data_ptr() for t in persistent}
    name = type(schedule).__name__
    flight = in_flight(name, schedule._n_microbatches, stage.num_stages, stage.stage_index) \
        if schedule._has_backward else 0
    per_microbatch, kept = held.largest(held.held, excluded), held.largest(held.kept, excluded)
    microbatches = schedule._n_microbatches
    recv = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in buffers}
    return counted, PipelineStageProfile(name, stage.stage_index, stage.num_stages, microbatches, flight,
                                         per_microbatch, kept, flight * per_microbatch + (microbatches - flight) * kept,
                                         sum(recv.values()))
