"""What the counting mode does under ``torch.distributed``: count each rank's local work, log collectives.

The counting core does not import this module: importing it registers ``_Recording`` at the
recorder's hook point (``counting.recorder.register_distributed``), and the backend's package root
imports it. The mode asks it only about tensor subclasses and collective operators, so a count of
plain tensors runs nothing of it. DTensor operators: ``subclass_dispatch``; collectives: ``CommLog``;
a pipeline schedule's step, whose forwards and backwards interleave: ``PipelineCounting``.

**The table of collective operators** (``COLLECTIVES``): their kind and payload. Every collective
reaches the dispatcher as an operator: the functional collectives DTensor and FSDP2 issue
(``_c10d_functional.*``, ``_c10d_functional_autograd.*``, ``_dtensor.*``), and the ``c10d.*``
operators behind ``torch.distributed.all_reduce`` & co. and DDP's gradient buckets. The counting
mode prices them at 0 FLOPs and records them (``CommStats``); the table says, by operator name,
what kind each is and which argument is its payload ``S`` (``deeplite_like.results`` states the
convention). No ``torch.distributed`` import here: the group of a call is resolved only when a
collective runs, and then the process group exists.
"""
from __future__ import annotations

import sys
from fractions import Fraction
from typing import Any, Callable, NamedTuple

import torch
from torch.utils import _pytree as pytree

from deeplite_like.errors import FormulaError
from deeplite_like.results import CommStats, Cost, bus_bytes

from ..counting.recorder import CountingMode, PLAIN, register_distributed
from ..counting.registry import OpCall, lookup

__all__ = ["COLLECTIVES", "FREE_COMM_OPS", "PLAIN", "CommLog", "Collective", "LogicalShare", "PipelineCounting",
           "collective_call", "issuing_module", "subclass_dispatch"]


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


# -- Recording: DTensor dispatch and the log of collectives --------------------------------------------------


def _class(module: str, name: str) -> type | None:
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def subclass_dispatch(mode: Any, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    """Run an op whose arguments hold tensor subclasses (``types``) so that ``mode`` counts local work.

    Returns ``PLAIN`` when the op is to be counted as usual, else the op's result (or
    ``NotImplemented``, which hands it to the subclass). ``mode._in_dtensor`` is True while a
    DTensor op runs.

    DTensor
        A ``TorchDispatchMode`` sees an operator on ``DTensor`` arguments first, as the *logical*
        op on global shapes (``aten.addmm`` of the whole layer). Counting that would give every
        rank the whole job's FLOPs. ``subclass_dispatch`` has DTensor run it instead: DTensor
        propagates the sharding, redistributes (functional collectives) and runs the op on its
        local shards; those local ops and collectives reach the mode again as plain tensors and
        are counted. The sharding propagation runs the op on ``FakeTensor``\\ s to learn the output
        shape; inside a DTensor op those fake ops run uncounted (the fake mode below runs them).

        The check costs plain tensors nothing beyond ``if types:`` in the mode: an operator on
        plain tensors has an empty ``types``. ``torch.distributed.tensor`` is never imported here:
        when it is not loaded, no DTensor exists.
    """
    dtensor = _class("torch.distributed.tensor._api", "DTensor")
    if dtensor is not None and any(issubclass(t, dtensor) for t in types):
        if mode._in_dtensor:  # the second arrival, with the mode pushed again below: DTensor runs it
            return NotImplemented
        if mode._logical is None:
            mode._logical = LogicalShare()
        before = mode._logical.counted(mode)
        mode._in_dtensor = True
        try:
            with mode:  # back on the stack, so the local ops and collectives DTensor runs are seen
                out = func(*args, **(kwargs or {}))
        finally:
            mode._in_dtensor = False
        mode._logical.add(mode, before, func, types, args, kwargs, out)
        return out
    if mode._in_dtensor:
        fake = _class("torch._subclasses.fake_tensor", "FakeTensor")
        if fake is not None and any(issubclass(t, fake) for t in types):
            return func(*args, **(kwargs or {}))  # DTensor's sharding propagation: shapes only, run uncounted
    return PLAIN


def issuing_module(names: dict[int, str], default: str) -> str:
    """The qualified name of the innermost module call on this thread's Python stack, else ``default``.

    A module call here is ``nn.Module._call_impl``: the module's forward *and its hooks*, where
    tensor parallel redistributes inputs and outputs and FSDP2 gathers parameters. Only modules
    in ``names`` (``id(module) -> name``) count. Walking the stack costs microseconds, paid per
    collective call only.
    """
    code = torch.nn.Module._call_impl.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            name = names.get(id(frame.f_locals.get("self")))
            if name is not None:
                return name
        frame = frame.f_back
    return default


class LogicalShare:
    """This rank's share of the *logical* model's cost: what the unsharded model computes.

    A DTensor op is priced twice: by its local ops (what this rank executes, the count) and by
    its formula on the DTensor's global shapes, divided by the size of its device mesh (every
    rank of the mesh runs the same op: the shares of the mesh add up to the logical op once).
    Ops outside DTensor ops are the rank's own and count in full. Summed over ranks, the shares
    give the logical model's MACs/FLOPs of the job's global batch (``profile_job``): under data
    parallel the replicas' sum, under tensor parallel the unsharded op once, without the work
    that sharding repeats on every rank (a replicated bias, its division).
    """

    def __init__(self) -> None:
        self.ran = False  # a DTensor op ran
        self.local = [0, 0]  # MACs, FLOPs of the local ops inside DTensor ops
        self.share = [Fraction(0), Fraction(0)]  # their formula on global shapes / mesh size

    @staticmethod
    def counted(mode: Any) -> tuple[int, int]:
        """MACs and FLOPs the mode has counted so far (flushed)."""
        mode._flush()
        phases = list(mode.result.phases.values())
        if mode._phase not in phases:
            phases.append(mode._phase)
        return sum(p.macs for p in phases), sum(p.flops for p in phases)

    def add(self, mode: Any, before: tuple[int, int], func: Any, types: tuple, args: tuple, kwargs: dict,
            out: Any) -> None:
        """Account one DTensor op: its local ops' cost since ``before``, and its logical share."""
        self.ran = True
        macs, flops = self.counted(mode)
        self.local[0] += macs - before[0]
        self.local[1] += flops - before[1]
        formula = lookup(func)
        if formula is None or mode._opaque:
            return
        try:
            cost = formula(OpCall(func, args, kwargs or {}, out, mode.options))
        except Exception as exc:
            raise FormulaError(f"the formula {getattr(formula, '__qualname__', formula)!r} failed on the global "
                               f"shapes of a DTensor op ({func}): {type(exc).__name__}: {exc}. A formula must read "
                               "only shapes, dtypes and scalars of its arguments.") from exc
        size = _mesh_size(args, kwargs)
        self.share[0] += Fraction(int(cost[0]), size)
        self.share[1] += Fraction(int(cost[1]), size)

    def totals(self, macs: int, flops: int) -> tuple[int, int]:
        """The rank's logical MACs and FLOPs, given its counted totals (rounded to the nearest integer)."""
        return (round(macs - self.local[0] + self.share[0]), round(flops - self.local[1] + self.share[1]))


def _mesh_size(args: tuple, kwargs: dict | None) -> int:
    for leaf in pytree.tree_leaves((args, kwargs)):
        mesh = getattr(leaf, "device_mesh", None)
        if mesh is not None:
            return int(mesh.size())
    return 1


class CommLog:
    """``CommStats`` rows of one count, filled by the formulas ``formula`` makes.

    ``where()`` tells the module the op runs in (qualified name) and the phase.

    Collectives
        ``CommLog.formula`` is the formula the mode uses for a collective operator: 0 MACs and 0
        FLOPs, and one ``CommStats`` row per (operator, group, module, phase) that adds the call's
        payload and bus bytes (``deeplite_like.results``). A collective belongs to the module
        whose call issued it, hooks included (``issuing_module``): tensor parallel's output
        all-reduce runs in a forward hook of the row-wise layer, FSDP2's all-gather in a pre-hook of
        the unit. In backward, where no module code runs, it belongs to the module whose forward
        created the autograd node running (the count's backward attribution); DDP's bucket
        all-reduces run in ``AccumulateGrad`` hooks, which belong to the root.
    """

    def __init__(self, where: Callable[[], tuple[str, str]]):
        self._where = where
        self.rows: dict[tuple[str, str, str, str], CommStats] = {}

    def formula(self, name: str, default: Any) -> Any:
        """The formula of operator ``name`` if it is a collective (logs the call, costs 0 FLOPs),
        ``None`` (free) for a wait on one, else ``default``."""
        if name in FREE_COMM_OPS:
            return None
        collective = COLLECTIVES.get(name)
        if collective is None:
            return default

        def communication(call: Any) -> Cost:
            group, size, payload = collective_call(collective, call.op, call.args, call.kwargs)
            module, phase = self._where()
            key = (name, group, module, phase)
            row = self.rows.get(key)
            if row is None:
                row = self.rows[key] = CommStats(name, collective.kind, group, size, module, phase)
            row.calls += 1
            row.payload_bytes += payload
            row.bus_bytes += bus_bytes(collective.kind, payload, size)
            return Cost(0, 0)

        communication.__qualname__ = f"communication[{name}]"
        return communication


class PipelineCounting(CountingMode):
    """A counting mode whose phase follows a pipeline schedule's step, operator by operator.

    ``count_ops`` runs forward, loss and backward one after the other and says when each begins;
    a schedule (``torch.distributed.pipelining``) interleaves them, microbatch by microbatch
    (GPipe: every forward, then every backward; 1F1B: one of each in the steady state). Here each
    priced operator finds its own phase: ``backward`` while the autograd engine runs a node (the
    stage's backward, ``torch.autograd.backward`` in ``stage_backward``), ``forward`` while a module
    of the stage runs, ``loss`` while the schedule computes its loss (``_compute_loss`` on the
    stack), else the phase of what ran before (a send after a forward, the gradient scaling after
    the last backward). Backward operators are placed in modules as ``count_ops`` places them.

    A schedule's first step sets its stages up first (``_initialize_pp_stages``): it runs the stage
    on meta tensors to learn the shapes it sends and receives. That is no part of a step: it runs
    uncounted, the stage's module calls too (only while ``ready()`` says the set-up is not done).
    """

    _loss_code: Any = None  # ``_PipelineSchedule._compute_loss.__code__``, set by the caller
    _setup_code: Any = None  # ``_PipelineSchedule._initialize_pp_stages.__code__``, set by the caller
    ready: Callable[[], bool] = staticmethod(lambda: True)  # the schedule's stages are set up

    def _on_stack(self, code: Any) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code is code:
                return True
            frame = frame.f_back
        return False

    def setting_up(self) -> bool:
        """Whether the schedule is setting its stage up (its first step's shape inference), not stepping."""
        return not self.ready() and self._on_stack(self._setup_code)

    def _hook_enter(self, module: torch.nn.Module, args: tuple) -> None:
        if not self.setting_up():
            super()._hook_enter(module, args)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        if self.setting_up():
            return func(*args, **(kwargs or {}))
        node = torch._C._current_autograd_node()
        phase = "backward" if node is not None else "forward" if self._hooked else self._outside_modules()
        if phase != self._phase_name:
            self.set_phase(phase)
        return super().__torch_dispatch__(func, types, args, kwargs)

    def _outside_modules(self) -> str:
        return "loss" if self._on_stack(self._loss_code) else self._phase_name or "forward"

    def finish(self) -> Any:
        result = super().finish()
        result.phases = {name: stats for name, stats in result.phases.items() if stats.calls}
        return result


class _Recording:
    """This module's behaviour, as the counting mode's hook point asks for it (``recorder.DistributedRecording``)."""

    comm_ops = frozenset(COLLECTIVES) | frozenset(FREE_COMM_OPS)

    @staticmethod
    def comm_formula(mode: CountingMode, name: str, default: Any) -> Any:
        if mode._comm is None:  # the count's first collective: its log, attributed where the mode runs
            mode._comm = CommLog(lambda: (issuing_module(mode._names, mode.module_running()), mode._phase_name))
        return mode._comm.formula(name, default)

    subclass_dispatch = staticmethod(subclass_dispatch)


register_distributed(_Recording())
