"""``OpCount``: the result of a counting pass, shared by every backend (no framework imports).

Counts are per the batch that ran. ``by_module`` is nested: a parent's figures include its
children's; ``""`` is the root module. ``module_ops`` holds, per module, the operators that
ran directly inside it (not inside a child), which is what a detailed view shows as the gap
between a parent and the sum of its children.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple

from deeplite_like.communication import CommStats


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


@dataclass
class OpStats:
    """MACs, FLOPs and calls accumulated under one name (a module or an operator)."""

    macs: int = 0
    flops: int = 0
    calls: int = 0

    def add(self, macs: int, flops: int, calls: int = 1) -> None:
        self.macs += int(macs)
        self.flops += int(flops)
        self.calls += int(calls)

    def as_dict(self) -> dict:
        return {"macs": self.macs, "flops": self.flops, "calls": self.calls}


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

    def as_dict(self) -> dict:
        return {
            "macs": self.macs,
            "flops": self.flops,
            "batch_size": self.batch_size,
            "by_module": {k: v.as_dict() for k, v in self.by_module.items()},
            "by_operator": {k: v.as_dict() for k, v in self.by_operator.items()},
            "untracked": dict(self.untracked),
            "module_ops": {m: {k: v.as_dict() for k, v in ops.items()} for m, ops in self.module_ops.items()},
            "phases": {k: v.as_dict() for k, v in self.phases.items()},
            "communication": [c.as_dict() for c in self.communication],
            **({"logical_macs": self.logical_macs, "logical_flops": self.logical_flops}
               if self.logical_macs is not None else {}),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent)

    def __repr__(self) -> str:
        extra = f", untracked={self.untracked}" if self.untracked else ""
        return f"OpCount(macs={self.macs:,}, flops={self.flops:,}{extra})"


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
                   lambda kids: OpStats(sum(k.macs for k in kids), sum(k.flops for k in kids), 0))


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
