"""Turn a backend's per-module records into a ``ModelProfile`` (no framework imports).

A backend measures; this module only arranges: it links the records into a tree, removes the
cost of excluded modules (``ignore_modules``) from their ancestors, the phase totals and the
operator totals, and lists them as excluded - their cost is never moved to a parent.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from deeplite_like.results import CommStats, OpStats
from deeplite_like.profiling.result import PHASES, ModelProfile, ModuleNode, PhaseStats


@dataclass
class ModuleRecord:
    """What a backend measured for one module (figures include its children's).

    ``parent`` is the qualified name of the enclosing module (``None`` for the root); records
    come in registration order, parents before children.
    """

    name: str
    type: str
    parent: str | None
    extra_repr: str = ""
    params: int = 0
    calls: int = 0
    phases: dict[str, OpStats] = field(default_factory=dict)
    ops: dict[str, OpStats] = field(default_factory=dict)
    latency_s: float | None = None


def _copy(stats: OpStats) -> OpStats:
    return OpStats(stats.macs, stats.flops, stats.calls)


def _subtract(table: dict[str, OpStats], key: str, stats: OpStats) -> None:
    current = table.get(key)
    if current is None:
        return
    current.add(-stats.macs, -stats.flops, -stats.calls)


def link_tree(records: list[ModuleRecord]) -> ModuleNode:
    """The tree of ``ModuleNode``s from records (parents first); returns the root."""
    if not records or records[0].parent is not None:
        raise ValueError("the first module record must be the root (parent=None)")
    nodes: dict[str, ModuleNode] = {}
    root = None
    for record in records:
        node = ModuleNode(name=record.name, type=record.type, extra_repr=record.extra_repr,
                          params=record.params, calls=record.calls,
                          phases={k: _copy(v) for k, v in record.phases.items()},
                          ops={k: _copy(v) for k, v in record.ops.items()}, latency_s=record.latency_s)
        if record.parent is None:
            if root is not None:
                raise ValueError(f"two roots in the module records: {root.name!r} and {record.name!r}")
            root = node
        else:
            parent = nodes.get(record.parent)
            if parent is None:
                raise ValueError(f"module {record.name!r} names the parent {record.parent!r}, which has no "
                                 "record before it; records must list parents before children")
            node.depth = parent.depth + 1
            parent.children.append(node)
        nodes[record.name] = node
    return root


def _roll_up_containers(root: ModuleNode) -> None:
    """A module never called itself (``nn.ModuleList``, a holder of layers) gets its children's figures.

    It ran no operator of its own, so without this it would show zeros and its parent a false,
    negative gap. Phases and latency are the sums of its children's (latency only when every
    timed child has one); ``calls`` stays 0.
    """
    for node in reversed(list(root.walk())):  # children before their parents
        if node.calls or node.phases or not node.children:
            continue
        phases: dict[str, OpStats] = {}
        for child in node.children:
            for phase, stats in child.phases.items():
                phases.setdefault(phase, OpStats()).add(stats.macs, stats.flops, stats.calls)
        if not phases:
            continue  # nothing below it ran either
        node.phases = phases
        node.container = True
        latencies = [c.latency_s for c in node.children if c.latency_s is not None]
        if latencies:
            node.latency_s = sum(latencies)


def _exclude(root: ModuleNode, excluded_names: set[str]) -> list[ModuleNode]:
    """Mark excluded subtrees; return the outermost excluded nodes (each with its own figures)."""
    outermost: list[ModuleNode] = []

    def visit(node: ModuleNode, ancestors: list[ModuleNode], inside: bool) -> None:
        if not inside and node.name in excluded_names:
            outermost.append(node)
            for anc in ancestors:
                for phase, stats in node.phases.items():
                    _subtract(anc.phases, phase, stats)
            inside = True
        node.excluded = inside
        for child in node.children:
            visit(child, ancestors + [node], inside)

    visit(root, [], False)
    return outermost


def _totals(node: ModuleNode) -> None:
    for each in node.walk():
        each.macs = sum(s.macs for s in each.phases.values())
        each.flops = sum(s.flops for s in each.phases.values())


def build_profile(model: str, backend: str, records: list[ModuleRecord], *,
                  phases: dict[str, PhaseStats], by_operator: dict[str, OpStats],
                  outside: dict[str, OpStats] | None = None, excluded_names: Iterable[str] = (),
                  params: int = 0, trainable_params: int = 0, duration_s: float | None = None,
                  batch_size: int | None = None, untracked: dict[str, int] | None = None,
                  module_latency: bool = False, device: str | None = None, model_parallel_size: int = 1,
                  world_size: int | None = None, step: int | None = None,
                  notes: Iterable[str] = (), communication: Iterable[CommStats] = ()) -> ModelProfile:
    """Assemble a ``ModelProfile``; the cost of modules named in ``excluded_names`` is removed.

    ``phases`` and ``by_operator`` are the backend's totals before exclusion; they are copied,
    never changed in place.
    """
    root = link_tree(records)
    _roll_up_containers(root)
    excluded = _exclude(root, set(excluded_names))
    phases = {k: PhaseStats(v.macs, v.flops, v.calls, v.latency_s) for k, v in phases.items()}
    operators = {k: _copy(v) for k, v in by_operator.items()}
    for node in excluded:
        for phase, stats in node.phases.items():
            if phase in phases:
                phases[phase].macs -= stats.macs
                phases[phase].flops -= stats.flops
                phases[phase].calls -= stats.calls
        for inner in node.walk():
            for op, stats in inner.ops.items():
                _subtract(operators, op, stats)
    operators = {k: v for k, v in operators.items() if v.calls > 0 or v.flops or v.macs}
    _totals(root)
    ordered = {k: phases[k] for k in PHASES if k in phases}
    ordered.update({k: v for k, v in phases.items() if k not in ordered})
    notes = list(notes)
    if excluded:
        kinds = sorted({node.type for node in excluded})
        notes.append(f"Excluded (ignore_modules): {len(excluded)} module(s) of type {', '.join(kinds)}; their "
                     "MACs and FLOPs are removed from their parents and from the totals (parameters and "
                     "measured latency still include them).")
    return ModelProfile(
        model=model, backend=backend, root=root, params=params, trainable_params=trainable_params,
        macs=sum(p.macs for p in ordered.values()), flops=sum(p.flops for p in ordered.values()),
        phases=ordered, duration_s=duration_s, batch_size=batch_size, by_operator=operators,
        outside={k: _copy(v) for k, v in (outside or {}).items()}, excluded=excluded,
        untracked=dict(untracked or {}), module_latency=module_latency, device=device,
        model_parallel_size=model_parallel_size, world_size=world_size, step=step, notes=notes,
        communication=list(communication))
