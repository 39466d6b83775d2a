"""The records every backend returns (no framework imports): counts, communication, measurements.

Backends fill these; ``Compute*`` functions turn them into status values. Keeping one
definition means a field means the same thing whichever framework measured it.

``OpCount`` is the result of a counting pass.

``CommStats`` records which collectives ran, how often, how many bytes (``OpCount.communication``).

``ParamStats``, ``ActivationMemory`` and ``TimingStats`` are the measurements of parameters,
memory and time; ``percentile`` is the interpolation their quartiles use (NumPy's default).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple


# op kind -> (numerator, denominator) of the bus-bytes factor as functions of the group size n
_FACTORS = {
    "all_reduce": lambda n: (2 * (n - 1), n),
    "all_gather": lambda n: (n - 1, n),
    "reduce_scatter": lambda n: (n - 1, n),
    "all_to_all": lambda n: (n - 1, n),
    "gather": lambda n: (n - 1, n),
    "scatter": lambda n: (n - 1, n),
    "broadcast": lambda n: (1, 1),
    "reduce": lambda n: (1, 1),
    "p2p": lambda n: (1, 1),
    "barrier": lambda n: (0, 1),
}


def bus_factor(kind: str, group_size: int) -> tuple[int, int]:
    """``(numerator, denominator)`` of the bus-bytes factor of a collective ``kind`` on ``group_size`` ranks."""
    try:
        factor = _FACTORS[kind]
    except KeyError:
        raise ValueError(f"unknown collective kind {kind!r}; expected one of {sorted(_FACTORS)}") from None
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    return factor(group_size)


def bus_bytes(kind: str, payload_bytes: int, group_size: int) -> int:
    """Bus bytes (ints, rounded down) of ``payload_bytes`` moved by a ``kind`` collective on ``group_size`` ranks."""
    num, den = bus_factor(kind, group_size)
    return payload_bytes * num // den


@dataclass
class CommStats:
    """The calls of one collective operator from one module in one phase on one process group.

    Attributes:
        op: operator name (``_c10d_functional.all_reduce``, ``c10d.allreduce_``).
        kind: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``all_to_all``,
            ``reduce``, ``gather``, ``scatter``, ``p2p`` or ``barrier``.
        group: the process group, ``name:description`` (``0:default_pg``; a ``DeviceMesh``
            dimension's reads ``mesh_<dim name>``, e.g. ``1:mesh_tp``); ``""`` when unknown.
        group_size: ranks in that group.
        module: qualified name of the module that issued it (``""``: the root).
        phase: ``forward``, ``loss`` or ``backward``.
        calls: how many times it ran.
        payload_bytes: sum of the payload sizes ``S`` of those calls, per rank, in bytes.
        bus_bytes: sum of their bus bytes, per rank, in bytes.

    Bytes follow the NCCL-tests convention (``docs/distributed.rst``):

    * ``payload_bytes``: the size ``S`` of the operation's buffer on one rank, as NCCL-tests calls
      it: the tensor reduced (``all_reduce``), the *gathered* output (``all_gather``: ``n`` x the
      rank's input), the *input* that is scattered (``reduce_scatter``: ``n`` x the rank's
      output), the tensor sent (``broadcast``, ``send``/``recv``), the input (``all_to_all``).
    * ``bus_bytes``: what a ring algorithm moves through each rank's link, ``S x factor``:
      ``2(n-1)/n`` for ``all_reduce``; ``(n-1)/n`` for ``all_gather``, ``reduce_scatter``,
      ``all_to_all``, ``gather``, ``scatter``; ``1`` for ``broadcast``, ``reduce`` and point-to-point.
      Rounded down to whole bytes (exact whenever ``S`` is a multiple of ``n``).

    Collectives cost 0 FLOPs: the reduction arithmetic of ``all_reduce`` is not counted.
    """

    op: str
    kind: str
    group: str
    group_size: int
    module: str
    phase: str
    calls: int = 0
    payload_bytes: int = 0
    bus_bytes: int = 0

    def as_dict(self) -> dict:
        return {"op": self.op, "kind": self.kind, "group": self.group, "group_size": self.group_size,
                "module": self.module, "phase": self.phase, "calls": self.calls,
                "payload_bytes": self.payload_bytes, "bus_bytes": self.bus_bytes}


class Cost(NamedTuple):
    """What one op or layer call costs: MACs of contractions, and total FLOPs (2 x MACs + the rest).

    Shared by every backend's formula table, so a formula means the same thing everywhere.
    """

    macs: int = 0
    flops: int = 0

    @classmethod
    def contraction(cls, macs: int, extra_flops: int = 0) -> "Cost":
        """A contraction of ``macs`` multiply-accumulates, plus ``extra_flops`` (e.g. a bias add)."""
        return cls(int(macs), 2 * int(macs) + int(extra_flops))

    @classmethod
    def elementwise(cls, flops: int) -> "Cost":
        """Arithmetic that is not a contraction: FLOPs only."""
        return cls(0, int(flops))

    def __add__(self, other: "Cost") -> "Cost":  # type: ignore[override]
        return Cost(self.macs + other.macs, self.flops + other.flops)


class OpRecord(NamedTuple):
    """One operator call as a roofline sees it (``OpCount.records``, kept when bytes are counted).

    ``module`` is the qualified name of the innermost module running (``""``: the root);
    ``bytes_read``/``bytes_written``: the distinct storages the op read and wrote at their
    dtype (the unfused convention, ``docs/conventions.rst``); ``dtype``: the widest floating
    (else the first) dtype among its inputs, as torch spells it (``float32``, ``bfloat16``, ``int8``);
    ``fused_bytes``: what the op moves in the fused view (a chain of non-contraction ops between
    two contractions moves only its ends), filled in when the pass finishes.
    """

    op: str
    module: str
    phase: str
    macs: int
    flops: int
    bytes_read: int
    bytes_written: int
    dtype: str
    fused_bytes: int = 0

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass
class OpStats:
    """MACs, FLOPs and calls accumulated under one name (a module or an operator)."""

    macs: int = 0
    flops: int = 0
    calls: int = 0
    bytes: int = 0  # read + written, when the pass counted bytes moved (``OpCount.bytes_counted``)

    def add(self, macs: int, flops: int, calls: int = 1) -> None:
        self.macs += int(macs)
        self.flops += int(flops)
        self.calls += int(calls)

    def as_dict(self, with_bytes: bool = False) -> dict:
        row = {"macs": self.macs, "flops": self.flops, "calls": self.calls}
        if with_bytes:
            row["bytes"] = self.bytes
        return row


@dataclass
class OpCount:
    """Totals and breakdowns of one counting pass.

    Attributes:
        macs, flops: totals (ints) for the batch that ran.
        by_module: qualified module name -> ``OpStats``, nested (parents include children).
        by_operator: operator name (``aten.mm``, ``Conv2D``) -> ``OpStats``.
        untracked: operator name -> calls, for ops that ran with no formula and are not known
            to be free (counted as 0).
        module_ops: module name -> operator name -> ``OpStats`` of ops run directly inside it.
        phases: phase (``forward``, ``backward``) -> ``OpStats`` when several were counted.
        batch_size: the batch size that ran, when known (per-sample figures divide by it).
        communication: the collectives that ran (``torch.distributed``), one ``CommStats`` per
            operator, process group, module and phase; they cost 0 FLOPs (``docs/distributed.rst``).
        logical_macs, logical_flops: under tensor parallel, this rank's share of what the unsharded
            model computes (``None`` when no sharded op ran: then they are ``macs``/``flops``).
        records: one ``OpRecord`` per operator call, in the order they ran, when bytes moved were
            counted (``bytes_moved=True``); empty otherwise.
        bytes_counted: whether they were; then every ``OpStats`` row has its ``bytes`` (read +
            written, the unfused convention) and ``bytes`` / ``fused_bytes`` are the model's.

    Counts are per the batch that ran. ``by_module``
    is nested: a parent's figures include its children's; ``""`` is the root module.
    ``module_ops`` holds, per module, the operators that ran directly inside it (not inside a
    child), which is what a detailed view shows as the gap between a parent and the sum of its
    children.
    """

    macs: int = 0
    flops: int = 0
    by_module: dict[str, OpStats] = field(default_factory=dict)
    by_operator: dict[str, OpStats] = field(default_factory=dict)
    untracked: dict[str, int] = field(default_factory=dict)
    module_ops: dict[str, dict[str, OpStats]] = field(default_factory=dict)
    phases: dict[str, OpStats] = field(default_factory=dict)
    batch_size: int | None = None
    communication: list[CommStats] = field(default_factory=list)
    logical_macs: int | None = None
    logical_flops: int | None = None
    records: list[OpRecord] = field(default_factory=list)
    bytes_counted: bool = False

    @property
    def comm_payload_bytes(self) -> int:
        """Payload bytes (``S``, per rank) of every collective that ran."""
        return sum(c.payload_bytes for c in self.communication)

    @property
    def comm_bus_bytes(self) -> int:
        """Ring-algorithm bus bytes (per rank) of every collective that ran."""
        return sum(c.bus_bytes for c in self.communication)

    def per_sample(self, what: str = "flops") -> float:
        """``macs`` or ``flops`` divided by the batch size (raises if it is unknown)."""
        if not self.batch_size:
            raise ValueError("this OpCount does not know its batch size; divide the totals yourself")
        return getattr(self, what) / self.batch_size

    @property
    def bytes(self) -> int:
        """Bytes read and written by every operator (unfused); 0 unless ``bytes_counted``."""
        return sum(r.bytes for r in self.records)

    @property
    def fused_bytes(self) -> int:
        """Bytes moved in the fused view (``OpRecord.fused_bytes``); 0 unless ``bytes_counted``."""
        return sum(r.fused_bytes for r in self.records)

    def as_dict(self) -> dict:
        b = self.bytes_counted
        return {
            "macs": self.macs,
            "flops": self.flops,
            **({"bytes": self.bytes, "fused_bytes": self.fused_bytes} if b else {}),
            "batch_size": self.batch_size,
            "by_module": {k: v.as_dict(b) for k, v in self.by_module.items()},
            "by_operator": {k: v.as_dict(b) for k, v in self.by_operator.items()},
            "untracked": dict(self.untracked),
            "module_ops": {m: {k: v.as_dict(b) for k, v in ops.items()} for m, ops in self.module_ops.items()},
            "phases": {k: v.as_dict(b) for k, v in self.phases.items()},
            "communication": [c.as_dict() for c in self.communication],
            **({"logical_macs": self.logical_macs, "logical_flops": self.logical_flops}
               if self.logical_macs is not None else {}),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent)

    def __repr__(self) -> str:
        extra = f", untracked={self.untracked}" if self.untracked else ""
        return f"OpCount(macs={self.macs:,}, flops={self.flops:,}{extra})"


Moves = list[tuple[int, int]]  # (storage serial, bytes) an operator call read or wrote


def fused_bytes(records: list[OpRecord], reads: list[Moves], writes: list[Moves]) -> list[int]:
    """Each record's bytes in the fused view (``docs/conventions.rst``, "Bytes moved").

    A chain of consecutive records without MACs (in one phase) between two contractions moves
    only its ends: a storage (``serial``: one per storage made, as the backend tells them apart)
    read by the chain from outside it is read once, at its first reader; one the chain writes is
    written once, at its last writer, only if a record after the chain reads it or nothing reads it
    again. A contraction moves what it moves.
    """
    readers: dict[int, list[int]] = {}
    for index, row in enumerate(reads):
        for serial, _ in row:
            readers.setdefault(serial, []).append(index)
    fused = [0] * len(records)
    start = 0
    while start < len(records):
        first = records[start]
        if first.macs:  # a contraction moves what it moves
            fused[start] = first.bytes
            start += 1
            continue
        end = start
        while end + 1 < len(records) and not records[end + 1].macs and records[end + 1].phase == first.phase:
            end += 1
        made: set[int] = set()  # storages written so far in the chain
        seen: set[int] = set()  # storages already read from memory by the chain
        last_write: dict[int, tuple[int, int]] = {}  # serial -> (record, bytes) of its last write
        for index in range(start, end + 1):
            for serial, nbytes in reads[index]:
                if serial not in made and serial not in seen:
                    seen.add(serial)
                    fused[index] += nbytes
            for serial, nbytes in writes[index]:
                made.add(serial)
                last_write[serial] = (index, nbytes)
        for serial, (index, nbytes) in last_write.items():
            later = [r for r in readers.get(serial, ()) if r > index]
            if not later or later[-1] > end:  # read after the chain, or never read again: kept
                fused[index] += nbytes
        start = end + 1
    return fused


def attach_records(result: "OpCount", records: list[OpRecord], reads: list[Moves], writes: list[Moves],
                   enclosing: list[tuple[str, ...]]) -> None:
    """Give ``result`` its records with their fused bytes, and every row its bytes.

    ``enclosing[i]``: the modules record ``i`` ran in, outermost first (each gets its bytes, as
    ``by_module`` nests MACs); the innermost is the record's ``module`` (its ``module_ops`` row).
    """
    result.records = [rec._replace(fused_bytes=b) for rec, b in zip(records, fused_bytes(records, reads, writes))]
    by_module, by_operator, module_ops = result.by_module, result.by_operator, result.module_ops
    for record, modules in zip(result.records, enclosing):
        moved = record.bytes
        if not moved:
            continue
        for module in modules:
            if module in by_module:
                by_module[module].bytes += moved
        for row in (by_operator.get(record.op), module_ops.get(record.module, {}).get(record.op),
                    result.phases.get(record.phase)):
            if row is not None:
                row.bytes += moved
    result.bytes_counted = True


def module_ancestors(module: str) -> list[str]:
    """``a.b.c`` -> ``["", "a", "a.b", "a.b.c"]``: the module and every scope around it, the root first."""
    parts = module.split(".") if module else []
    return [""] + [".".join(parts[:i + 1]) for i in range(len(parts))]


class GraphCount:
    """A file backend's counting pass (ONNX nodes, TFLite operators) accumulated into an ``OpCount``.

    ``add`` one operator after another with its module (the scopes its name carries) and cost:
    ``by_module`` is nested (a module's figures include its children's; ``calls`` counts the
    operators directly in it), as the live backends'. With ``bytes_moved``, an operator that moves
    data also gives its ``moves`` (what it reads and writes, and its dtype), and ``finish``
    attaches the records (``attach_records``).
    """

    def __init__(self, bytes_moved: bool = False) -> None:
        self.result = OpCount()
        self.bytes_moved = bytes_moved
        self._by_module: dict[str, OpStats] = {}
        self._records: list[OpRecord] = []
        self._reads: list[Moves] = []
        self._writes: list[Moves] = []
        self._enclosing: list[tuple[str, ...]] = []

    def untracked(self, op: str) -> None:
        self.result.untracked[op] = self.result.untracked.get(op, 0) + 1

    def add(self, op: str, module: str, cost: Cost, moves: tuple[Moves, Moves, str] | None = None) -> None:
        result = self.result
        result.by_operator.setdefault(op, OpStats()).add(cost.macs, cost.flops)
        result.module_ops.setdefault(module, {}).setdefault(op, OpStats()).add(cost.macs, cost.flops)
        enclosing = module_ancestors(module)
        for name in enclosing:
            self._by_module.setdefault(name, OpStats()).add(cost.macs, cost.flops, 1 if name == module else 0)
        result.macs += cost.macs
        result.flops += cost.flops
        if self.bytes_moved and moves is not None:
            read, written, dtype = moves
            self._reads.append(read)
            self._writes.append(written)
            self._enclosing.append(tuple(enclosing))
            self._records.append(OpRecord(op, module, "forward", int(cost.macs), int(cost.flops),
                                          sum(b for _, b in read), sum(b for _, b in written), dtype))

    def finish(self, batch_sizes: Iterable[int]) -> "OpCount":
        """The ``OpCount``; its ``batch_size`` is the inputs' one first dimension (``None`` if they differ)."""
        result = self.result
        result.by_module = self._by_module
        batches = set(batch_sizes)
        result.batch_size = batches.pop() if len(batches) == 1 else None
        if self.bytes_moved:
            attach_records(result, self._records, self._reads, self._writes, self._enclosing)
        return result


@dataclass
class LifetimeStats:
    """Live-tensor bytes of one run of a graph (all in bytes): ``TensorLifetimes.stats``.

    Attributes:
        peak_bytes: the largest total of live activation bytes at any step.
        peak_at: the step (node / operator label) where the peak happens.
        input_bytes / output_bytes: bytes of the graph's inputs / outputs.
        tensors: activation storages counted (views of one storage count once).
        by_step: step label -> live bytes while it runs, in graph order.
        arena_bytes: the arena a static planner lays them out in (``TensorLifetimes.plan``: offsets
            64-byte aligned; at least the peak, the difference being alignment and fragmentation).
    """

    peak_bytes: int = 0
    peak_at: str = ""
    input_bytes: int = 0
    output_bytes: int = 0
    tensors: int = 0
    by_step: dict[str, int] = field(default_factory=dict)
    arena_bytes: int = 0
    alignment: int = 64


@dataclass(frozen=True)
class ArenaPlan:
    """One arena for a graph's activations, each storage at an offset (``TensorLifetimes.plan``).

    ``arena_bytes``: the arena's size (the highest offset + size); ``offsets``: storage -> byte offset;
    ``alignment``: every offset is a multiple of it and every size is rounded up to it. The arena is at
    least the live-tensor peak (with each storage rounded up): the difference is fragmentation.
    """

    arena_bytes: int
    offsets: dict[Any, int]
    alignment: int


class TensorLifetimes:
    """The storages of one run of a file's graph (ONNX nodes, TFLite operators), step by step.

    A storage is born at the step that writes it (``born``; the graph's inputs at step 0) and lives
    to the last step that reads it (``read``), or to the end when the graph returns it (``keep``); a
    view (``view``: Reshape, Squeeze, ...) is the storage it views, so its readers keep that one
    alive. ``stats`` sums the live bytes of each step (a difference array: one pass).
    """

    def __init__(self, steps: int) -> None:
        self.last = max(steps - 1, 0)
        self._root: dict[Any, Any] = {}  # value -> the storage it is (itself, or the value it views)
        self._start: dict[Any, int] = {}
        self._end: dict[Any, int] = {}
        self._size: dict[Any, int] = {}

    def __contains__(self, key: Any) -> bool:
        return key in self._root

    def born(self, key: Any, step: int, nbytes: int) -> None:
        self._root[key] = key
        self._start[key], self._size[key] = step, nbytes
        self._end[key] = max(self._end.get(key, step), step)

    def view(self, key: Any, of: Any, step: int) -> None:
        self._root[key] = self._root.get(of, of)
        self.read(key, step)

    def read(self, key: Any, step: int) -> None:
        storage = self._root.get(key, key)
        self._end[storage] = max(self._end.get(storage, step), step)

    def keep(self, key: Any) -> None:
        self.read(key, self.last)

    def storages(self, keys: Iterable[Any]) -> int:
        """Bytes of the distinct storages of ``keys`` (two outputs viewing one storage count once)."""
        return sum(self._size[s] for s in {self._root[k] for k in keys if k in self._root})

    def plan(self, alignment: int = 64) -> ArenaPlan:
        """An arena with offsets, as a static planner makes one (greedy by size, best fit, as LiteRT's
        ``GreedyMemoryPlanner``): the largest storages first (the earlier born first among equals), each
        at the smallest gap between storages already placed whose lifetimes overlap its own where it
        fits, else above them all. Sizes and offsets are rounded up to ``alignment`` (64 bytes: LiteRT's
        and ONNX Runtime's CPU alignment)."""
        import numpy as np

        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1:
            raise ValueError(f"alignment must be a positive int, got {alignment!r} (bytes)")
        keys = sorted(self._size, key=lambda k: (-self._size[k], self._start[k]))
        count = len(keys)
        starts, ends = np.empty(count, np.int64), np.empty(count, np.int64)
        lows, highs = np.empty(count, np.int64), np.empty(count, np.int64)
        offsets: dict[Any, int] = {}
        arena = 0
        for placed, key in enumerate(keys):
            size = -(-self._size[key] // alignment) * alignment
            start, end = self._start[key], self._end[key]
            live = np.flatnonzero((starts[:placed] <= end) & (ends[:placed] >= start))
            live = live[np.argsort(lows[live], kind="stable")]  # the overlapping storages, lowest offset first
            best, best_gap, top = None, None, 0
            for low, high in zip(lows[live].tolist(), highs[live].tolist()):
                gap = low - top
                if gap >= size and (best_gap is None or gap < best_gap):
                    best, best_gap = top, gap
                top = max(top, high)
            offset = top if best is None else best
            starts[placed], ends[placed], lows[placed], highs[placed] = start, end, offset, offset + size
            offsets[key] = offset
            arena = max(arena, offset + size)
        return ArenaPlan(arena, offsets, alignment)

    def arena_size(self, alignment: int = 64) -> int:
        """Bytes of the arena ``plan`` lays out (0 with no storage)."""
        return self.plan(alignment).arena_bytes

    def stats(self, labels: list[str], input_bytes: int, output_bytes: int, alignment: int = 64) -> LifetimeStats:
        """Live bytes at each step (``labels``, one per step; none: one step labelled ``"(no nodes)"``), the
        peak, and the planned arena (``plan`` at ``alignment``)."""
        delta = [0] * (self.last + 2)
        for key, nbytes in self._size.items():
            delta[self._start[key]] += nbytes
            delta[self._end[key] + 1] -= nbytes
        result = LifetimeStats(input_bytes=input_bytes, output_bytes=output_bytes, tensors=len(self._size),
                               arena_bytes=self.arena_size(alignment), alignment=alignment)
        live = 0
        for step, label in enumerate(labels or ["(no nodes)"]):
            live += delta[step]
            result.by_step[label] = live
            if live > result.peak_bytes:
                result.peak_bytes, result.peak_at = live, label
        return result


def parent_names(names: Iterable[str], sep: str = ".") -> dict[str, str | None]:
    """Qualified name -> the nearest enclosing name that is also listed (``None`` for the root ``""``)."""
    known = list(names)
    present = set(known)
    parents: dict[str, str | None] = {}
    for name in known:
        if name == "":
            parents[name] = None
            continue
        parent = name.rpartition(sep)[0]
        while parent and parent not in present:
            parent = parent.rpartition(sep)[0]
        parents[name] = parent
    return parents


def roll_up_containers(by_module: dict[str, OpStats], parents: dict[str, str | None]) -> list[str]:
    """Give each container that never ran itself the sum of its children's figures; return their names.

    A module that is never called (``nn.ModuleList``, ``nn.ModuleDict``, a plain holder of
    layers) runs no operator of its own, so a counting pass has no row for it, and its parent's
    figures minus its children's would show a false gap. Its figures are by definition those
    of its children: this adds that row (``calls`` 0: it was not called), innermost containers
    first, so nested containers add up too. ``parents`` maps every module's qualified name to
    its parent's (``parent_names``).
    """
    return roll_up(by_module, parents,
                   lambda kids: OpStats(sum(k.macs for k in kids), sum(k.flops for k in kids), 0,
                                       sum(k.bytes for k in kids)))


def roll_up(values: dict[str, Any], parents: dict[str, str | None], total: Callable[[list[Any]], Any]) -> list[str]:
    """Give each name of ``parents`` missing from ``values`` ``total`` of its children's values, innermost first.

    Names none of whose descendants has a value stay missing. ``values`` keeps the order of
    ``parents`` (registration order). Returns the names added.
    """
    children: dict[str, list[str]] = {}
    for name, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(name)
    depth: dict[str, int] = {}

    def depth_of(name: str) -> int:
        if name not in depth:
            parent = parents.get(name)
            depth[name] = 0 if parent is None else depth_of(parent) + 1
        return depth[name]

    added: list[str] = []
    for name in sorted(children, key=depth_of, reverse=True):  # innermost containers first
        if name in values:
            continue
        kids = [values[k] for k in children[name] if k in values]
        if not kids:
            continue  # nothing below it ran either
        values[name] = total(kids)
        added.append(name)
    if added:  # keep the modules' registration order
        ordered = {name: values[name] for name in parents if name in values}
        ordered.update((name, value) for name, value in values.items() if name not in ordered)
        values.clear()
        values.update(ordered)
    return added


@dataclass(frozen=True)
class ParamStats:
    """Counts in elements, sizes in bytes.

    ``by_dtype`` maps a dtype name (``'float32'``, ``'qint8'``) to the bytes of *parameters*
    of that dtype (its values sum to ``param_bytes``); ``buffer_by_dtype`` does the same for
    buffers (PyTorch buffers; Keras state weights such as batch-norm moving statistics).
    ``buffer_count`` is the number of buffer *elements* (BatchNorm2d(16): 16 + 16 + 1).
    """

    total_params: int
    trainable_params: int
    non_trainable_params: int
    param_bytes: int
    buffer_count: int
    buffer_bytes: int
    by_dtype: dict[str, int] = field(default_factory=dict)
    buffer_by_dtype: dict[str, int] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        """Parameter plus buffer bytes: what loading the model's state costs."""
        return self.param_bytes + self.buffer_bytes


@dataclass(frozen=True)
class ActivationMemory:
    """Activation memory of one forward pass, in bytes; each backend's ``MemoryStats`` adds how it measured.

    ``peak_bytes``: largest live total (inputs + activations + outputs) at any operator.
    ``input_bytes``: bytes the inputs cover (a view of a larger batch counts its own samples
    only). ``output_bytes``: what the outputs keep alive. ``end_bytes``: live total when the
    forward returned. ``allocated_bytes``: sum of every allocation made during the forward.
    ``per_sample_peak_bytes`` = ``peak_bytes / batch_size``. ``peak_op`` / ``peak_module``: the
    operator that reached the peak and the qualified name of the innermost module (layer)
    running it (``''`` is the model itself).
    """

    peak_bytes: int
    input_bytes: int
    output_bytes: int
    end_bytes: int
    allocated_bytes: int
    batch_size: int
    per_sample_peak_bytes: float
    peak_op: str
    peak_module: str

    @property
    def peak_at(self) -> str:
        """Where the peak happened, e.g. ``"aten.relu.default in '1'"``."""
        return f"{self.peak_op} in '{self.peak_module}'"

    @property
    def activation_peak_bytes(self) -> int:
        """Peak bytes beyond the inputs: what the forward itself added at its worst."""
        return self.peak_bytes - self.input_bytes


@dataclass(frozen=True)
class TimingStats:
    """Forward-pass time of one batch, in seconds.

    ``median_s``, ``iqr_s`` (75th - 25th percentile), ``mean_s``, ``min_s`` are statistics over
    ``times`` measurements; each measurement is the mean time of ``number_per_run``
    back-to-back forwards. ``per_sample_s`` = ``median_s / batch_size``; ``throughput`` =
    ``batch_size / median_s`` in samples per second. ``compiled`` says how the forward ran
    (``''`` for a plain eager call).

    ``q1_s`` and ``q3_s`` are the 25th and 75th percentiles (``iqr_s = q3_s - q1_s``);
    ``forwards`` is every forward the measurement ran, ``warmup_forwards`` of them not kept as
    measurements (the warm-up, and with ``num_threads='auto'`` a measurement it discarded).
    ``threads_reason`` says why ``num_threads`` was used when it was picked (``num_threads='auto'``);
    ``spread_warning`` is ``''``, or why the figure may be noise and what to do (``timing.noise_note``).
    """

    median_s: float
    iqr_s: float
    mean_s: float
    min_s: float
    times: int
    number_per_run: int
    batch_size: int
    per_sample_s: float
    throughput: float
    num_threads: int
    device: str
    raw_s: tuple[float, ...]
    compiled: str = ""
    q1_s: float = 0.0
    q3_s: float = 0.0
    forwards: int = 0
    warmup_forwards: int = 0
    threads_reason: str = ""
    spread_warning: str = ""

    @property
    def quartiles_s(self) -> tuple[float, float]:
        """``(q1, q3)``: the 25th and 75th percentiles of the measurements (linear interpolation,
        as NumPy's default), in seconds; ``(median, median)`` without raw measurements."""
        if self.q1_s or self.q3_s:  # measured by the timing loop
            return (self.q1_s, self.q3_s)
        if not self.raw_s:
            return (self.median_s, self.median_s)
        return (percentile(self.raw_s, 25), percentile(self.raw_s, 75))

    def throughput_interval(self) -> tuple[float, float]:
        """Samples per second at the third and first quartile times: the throughput's spread."""
        q1, q3 = self.quartiles_s
        return (self.batch_size / q3 if q3 else float("inf"), self.batch_size / q1 if q1 else float("inf"))


def percentile(values: list[float] | tuple[float, ...], q: float) -> float:
    """Linear-interpolated percentile (NumPy's default method), ``q`` in [0, 100]."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
