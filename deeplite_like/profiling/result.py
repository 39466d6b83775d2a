"""``ModelProfile``: what one profile measured - totals, phases and the module tree (no framework).

Raw values in base units: counts as ints (params, MACs, FLOPs, calls), durations in seconds
(floats), rates in FLOP/s. Renderings (``to_text``, ``to_dict``, ``save``) are drawn by
``profiling.views`` and reached through the methods here; ``check_view_options`` checks the
``module_depth`` and ``top_modules`` every view takes.

Figures of a ``ModuleNode`` include its children's (as ``print(model)`` nests them); the
operators listed on a node (``ops``) are those that ran directly inside it, not inside a child,
so ``node.gap`` (the node minus the sum of its children) is visible and explained.

``build_profile`` turns a backend's per-module records (``ModuleRecord``) into a profile. A
backend measures; this only arranges: it links the records into a tree, removes the cost of
excluded modules (``ignore_modules``) from their ancestors, the phase totals and the operator
totals, and lists them as excluded - their cost is never moved to a parent.
"""
from __future__ import annotations

import html
import numbers
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

import deeplite_like.profiling.views as views
from deeplite_like.errors import check_flag
from deeplite_like.reports.base import strict_json
from deeplite_like.results import CommStats, OpStats


def is_int(value: Any) -> bool:
    """An int, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _as_written(value: Any, fallback: int) -> int:
    """The int a str such as ``"2"`` spells, for the 'e.g.' of a message; else ``fallback``."""
    text = value.strip() if isinstance(value, str) else ""
    return int(text) if text.lstrip("-").isdigit() else fallback


def check_view_options(module_depth: Any, top_modules: Any) -> None:
    """``module_depth``: an int >= -1 (-1 or ``None``: every depth); ``top_modules``: an int >= 1."""
    depth_rule = "module_depth must be an int >= -1 (the deepest module depth shown; -1 shows all)"
    if module_depth is not None and not is_int(module_depth):
        raise TypeError(f"{depth_rule}, got {type(module_depth).__name__} {module_depth!r}; e.g. "
                        f"module_depth={_as_written(module_depth, 2)}")
    if module_depth is not None and module_depth < -1:
        raise ValueError(f"{depth_rule}, got {module_depth}")
    top_rule = "top_modules must be an int >= 1 (how many module types per depth are ranked)"
    if not is_int(top_modules):
        raise TypeError(f"{top_rule}, got {type(top_modules).__name__} {top_modules!r}; e.g. "
                        f"top_modules={_as_written(top_modules, 3)}")
    if top_modules < 1:
        raise ValueError(f"{top_rule}, got {top_modules}")


#: Phases a profile may hold, in the order they are shown.
PHASES = ("forward", "backward", "optimizer", "other")


@dataclass
class PhaseStats:
    """One phase's totals: MACs, FLOPs, operator calls, and its wall time in seconds (or None)."""

    macs: int = 0
    flops: int = 0
    calls: int = 0
    latency_s: float | None = None

    @property
    def flops_per_s(self) -> float | None:
        """Achieved FLOP/s of the phase (FLOPs / latency), None when it was not timed."""
        return self.flops / self.latency_s if self.latency_s else None

    def as_dict(self) -> dict:
        return {"macs": self.macs, "flops": self.flops, "calls": self.calls, "latency_s": self.latency_s,
                "flops_per_s": self.flops_per_s}


@dataclass
class ModuleNode:
    """One module (torch) or layer (Keras) of the tree.

    Attributes:
        name: qualified name (``"features.0"``; ``""`` for the root).
        type: the class name (``Linear``, ``Dense``).
        extra_repr: the constructor summary ``print(model)`` shows (may be empty).
        depth: 0 for the root, 1 for its children, ...
        params: parameters of the module and its children, each tensor counted once.
        macs, flops: every counted phase, children included, excluded modules removed.
        phases: phase name -> ``OpStats`` of this module (children included).
        calls: how many times the module was called.
        latency_s: forward wall time summed over its calls (None: module timing was off).
        ops: operator name -> ``OpStats`` of the operators run directly in it (every phase).
        excluded: listed in ``ignore_modules``: its cost is not in its parents nor the totals.
        container: never called itself (``nn.ModuleList``, a holder of layers): its figures are
            the sums of its children's.
        children: direct submodules, in registration order.
    """

    name: str
    type: str
    extra_repr: str = ""
    depth: int = 0
    params: int = 0
    macs: int = 0
    flops: int = 0
    phases: dict[str, OpStats] = field(default_factory=dict)
    calls: int = 0
    latency_s: float | None = None
    ops: dict[str, OpStats] = field(default_factory=dict)
    excluded: bool = False
    container: bool = False
    children: list["ModuleNode"] = field(default_factory=list)

    @property
    def local_name(self) -> str:
        """The last component of the qualified name (``"0"`` for ``"features.0"``)."""
        return self.name.rsplit(".", 1)[-1].rsplit("/", 1)[-1]

    def walk(self) -> Iterator["ModuleNode"]:
        """This node and every node below it, depth first, in registration order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def phase(self, name: str) -> OpStats:
        """This module's ``OpStats`` in one phase (zeros when nothing ran)."""
        return self.phases.get(name) or OpStats()

    @property
    def gap(self) -> OpStats:
        """This node minus the sum of its counted children: the cost of operators run directly in it.

        Equal to the sum of ``ops`` unless a module shared with another parent ran from here.
        """
        kids = [c for c in self.children if not c.excluded]
        return OpStats(self.macs - sum(c.macs for c in kids), self.flops - sum(c.flops for c in kids),
                       sum(s.calls for s in self.ops.values()))

    @property
    def flops_per_s(self) -> float | None:
        """Forward FLOPs / forward latency (None when the module was not timed)."""
        return self.phase("forward").flops / self.latency_s if self.latency_s else None

    def as_dict(self, children: bool = True) -> dict:
        data = {
            "name": self.name, "type": self.type, "extra_repr": self.extra_repr, "depth": self.depth,
            "params": self.params, "macs": self.macs, "flops": self.flops, "calls": self.calls,
            "latency_s": self.latency_s, "flops_per_s": self.flops_per_s, "excluded": self.excluded,
            "container": self.container,
            "phases": {k: v.as_dict() for k, v in self.phases.items()},
            "ops": {k: v.as_dict() for k, v in self.ops.items()},
            "gap": self.gap.as_dict(),
        }
        if children:
            data["children"] = [child.as_dict() for child in self.children]
        return data


@dataclass
class ModelProfile:
    """Totals, phases and the module tree of one profile of one model.

    It also unpacks as DeepSpeed's tuple: ``flops, macs, params = get_model_profile(...)`` gives
    the raw ints, or DeepSpeed's strings when ``get_model_profile`` was asked ``as_string=True``
    explicitly (``strings``).

    Attributes:
        model: the model's class name.
        backend: ``"torch"`` or ``"keras"``.
        root: the module tree (``root.name == ""``).
        params, trainable_params: parameters per device (elements).
        macs, flops: everything counted (all phases), excluded modules removed, per device.
        phases: phase name -> ``PhaseStats`` (``forward``, ``backward``, ``optimizer``, ``other``).
        duration_s: wall time of everything profiled (the window between start and stop of a
            ``FlopsProfiler``; forward, plus backward when asked, for ``get_model_profile``).
        batch_size: the batch that ran, when known.
        by_operator: operator name -> ``OpStats`` over the whole profile (excluded modules removed).
        outside: operator name -> ``OpStats`` of operators not in the module tree: run outside any
            module call (torch), or counted per operator only (Keras: backward, optimizer, rest).
        excluded: the outermost excluded nodes (``ignore_modules``), with their own figures.
        untracked: operator name -> calls, for operators with no formula (counted as 0).
        module_latency: whether per-module forward latency was measured.
        device: where the model ran (``"cpu"``, ``"cuda:0"``, ``"meta"``), if known.
        model_parallel_size, world_size: parallel layout (figures are per device; the whole
            model's params and FLOPs are ``model_parallel_size`` times them).
        step: the training step profiled, when given.
        communication: the ``torch.distributed`` collectives issued (``CommStats``, bytes per rank).
        notes: lines shown under the report (what was measured and how).
    """

    model: str
    backend: str
    root: ModuleNode
    params: int = 0
    trainable_params: int = 0
    macs: int = 0
    flops: int = 0
    phases: dict[str, PhaseStats] = field(default_factory=dict)
    duration_s: float | None = None
    batch_size: int | None = None
    by_operator: dict[str, OpStats] = field(default_factory=dict)
    outside: dict[str, OpStats] = field(default_factory=dict)
    excluded: list[ModuleNode] = field(default_factory=list)
    untracked: dict[str, int] = field(default_factory=dict)
    module_latency: bool = False
    device: str | None = None
    model_parallel_size: int = 1
    world_size: int | None = None
    step: int | None = None
    notes: list[str] = field(default_factory=list)
    communication: list[CommStats] = field(default_factory=list)
    strings: bool = False  # unpack as formatted strings (get_model_profile(..., as_string=True))

    # -- DeepSpeed's tuple -----------------------------------------------------------------
    def __iter__(self) -> Iterator[int | str]:
        """``flops, macs, params = profile``: DeepSpeed's return value, raw ints (per device), or its
        strings (``1.23 GFLOPs``) when ``strings``."""
        return iter(self._triple())

    def _triple(self) -> tuple:
        if not self.strings:
            return (self.flops, self.macs, self.params)
        return views.count(self.flops, "FLOPs"), views.count(self.macs, "MACs"), views.count(self.params)

    def __len__(self) -> int:
        return 3

    def __eq__(self, other: object) -> bool:
        """Equal to DeepSpeed's tuple ``(flops, macs, params)`` when the figures are; else as a dataclass."""
        if isinstance(other, tuple):
            return self._triple() == other
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self))

    __hash__ = None  # (mutable, compared by value)

    def __getitem__(self, index: int | slice) -> int | tuple:
        """``profile[0]`` is the FLOPs, ``[1]`` the MACs, ``[2]`` the params (DeepSpeed's tuple order)."""
        return self._triple()[index]

    # -- figures --------------------------------------------------------------------------
    def phase(self, name: str) -> PhaseStats:
        """One phase's totals (zeros and no latency when it did not run)."""
        return self.phases.get(name) or PhaseStats()

    @property
    def forward_latency_s(self) -> float | None:
        """Wall time of the model's forward calls, in seconds (None when not timed)."""
        return self.phase("forward").latency_s

    @property
    def forward_flops_per_s(self) -> float | None:
        """Achieved forward FLOP/s per device: forward FLOPs / forward latency."""
        return self.phase("forward").flops_per_s

    @property
    def flops_per_s(self) -> float | None:
        """Achieved FLOP/s per device over everything profiled: FLOPs / ``duration_s``."""
        return self.flops / self.duration_s if self.duration_s else None

    @property
    def data_parallel_size(self) -> int | None:
        """``world_size / model_parallel_size`` when the world size is known."""
        return self.world_size // self.model_parallel_size if self.world_size else None

    @property
    def model_params(self) -> int:
        """Parameters of the whole model: per device x model-parallel size."""
        return self.params * self.model_parallel_size

    @property
    def model_flops(self) -> int:
        """FLOPs of the whole model: per device x model-parallel size."""
        return self.flops * self.model_parallel_size

    @property
    def model_macs(self) -> int:
        """MACs of the whole model: per device x model-parallel size."""
        return self.macs * self.model_parallel_size

    @property
    def max_depth(self) -> int:
        return max(node.depth for node in self.root.walk())

    def modules(self) -> Iterator[ModuleNode]:
        """Every node of the tree, depth first."""
        return self.root.walk()

    def module(self, name: str) -> ModuleNode:
        """The node of qualified name ``name`` (``""`` is the root)."""
        for node in self.root.walk():
            if node.name == name:
                return node
        names = [n.name for n in self.root.walk()][:12]
        raise KeyError(f"no module named {name!r} in the profile of {self.model}; modules are {names}"
                       + (" ..." if len(names) == 12 else ""))

    # -- views ----------------------------------------------------------------------------
    def aggregated(self, module_depth: int = -1, top_modules: int = 3) -> list[dict]:
        """Top-k module types per depth, as data (see ``profiling.views.aggregate``)."""
        check_view_options(module_depth, top_modules)
        return views.aggregate(self, module_depth, top_modules)

    def aggregated_table(self, module_depth: int = -1, top_modules: int = 3, as_string: bool = True):
        """The aggregated view as a ``TableReport`` (text, dict, CSV, Markdown, HTML)."""
        check_view_options(module_depth, top_modules)
        return views.aggregated_report(self, module_depth, top_modules, as_string)

    def tree_text(self, module_depth: int = -1, as_string: bool = True) -> str:
        """The detailed view: the module tree with each module's figures and direct operators."""
        return views.render_tree(self, module_depth, as_string)

    def summary_text(self, as_string: bool = True) -> str:
        """Totals, phases, latency and achieved FLOP/s, per device and for the whole model."""
        return views.render_summary(self, as_string)

    def to_text(self, module_depth: int = -1, top_modules: int = 3, detailed: bool = True,
                as_string: bool = True) -> str:
        """The full report: summary, aggregated top-k per depth, and (``detailed``) the tree.

        Arguments are checked first (``to_text('2', 3)`` is a ``TypeError`` naming ``module_depth``).
        """
        check_view_options(module_depth, top_modules)
        check_flag(detailed, "detailed", "to_text")
        check_flag(as_string, "as_string", "to_text")
        return views.render_report(self, module_depth, top_modules, detailed, as_string)

    def __str__(self) -> str:
        return self.to_text()

    def to_dict(self, module_depth: int = -1, top_modules: int = 3) -> dict:
        """Every view as JSON types: totals, phases, tree, aggregated top-k, operators, notes."""
        return {
            "model": self.model, "backend": self.backend, "device": self.device, "step": self.step,
            "batch_size": self.batch_size,
            "params": self.params, "trainable_params": self.trainable_params, "macs": self.macs,
            "flops": self.flops, "duration_s": self.duration_s, "flops_per_s": self.flops_per_s,
            "forward_latency_s": self.forward_latency_s, "forward_flops_per_s": self.forward_flops_per_s,
            "parallel": {"model_parallel_size": self.model_parallel_size, "world_size": self.world_size,
                         "data_parallel_size": self.data_parallel_size, "model_params": self.model_params,
                         "model_macs": self.model_macs, "model_flops": self.model_flops},
            "phases": {k: v.as_dict() for k, v in self.phases.items()},
            "module_latency": self.module_latency,
            "excluded": [node.as_dict(children=False) for node in self.excluded],
            "outside": {k: v.as_dict() for k, v in self.outside.items()},
            "by_operator": {k: v.as_dict() for k, v in self.by_operator.items()},
            "untracked": dict(self.untracked),
            "communication": [c.as_dict() for c in self.communication],
            "aggregated": self.aggregated(module_depth, top_modules),
            "tree": self.root.as_dict(),
            "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 2, **view: int) -> str:
        """:meth:`to_dict` as strict JSON (a non-finite float is ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``)."""
        return strict_json(self.to_dict(**view), indent=indent)

    def _repr_html_(self) -> str:
        return (f'<div class="deeplite-like-profile"><pre>{html.escape(self.summary_text())}</pre>'
                f"{self.aggregated_table()._repr_html_()}"
                f"<details><summary>module tree</summary><pre>{html.escape(self.tree_text())}</pre></details></div>")

    def save(self, output_file: str | os.PathLike, module_depth: int = -1, top_modules: int = 3,
             detailed: bool = True, as_string: bool = True) -> Path:
        """Write the report: ``.json`` as JSON, ``.html``/``.htm`` as HTML, anything else as text."""
        path = Path(output_file)
        suffix = path.suffix.lower()
        if suffix == ".json":
            text = self.to_json(module_depth=module_depth, top_modules=top_modules)
        elif suffix in (".html", ".htm"):
            text = self._repr_html_()
        else:
            text = self.to_text(module_depth, top_modules, detailed, as_string)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
        return path


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
