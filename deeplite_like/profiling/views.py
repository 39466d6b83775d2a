"""The renderings of a ``ModelProfile`` (no framework imports): how figures are written, and the views.

* **Figures** (``count``, ``seconds``, ``rate``, ``share``): scaled with SI prefixes
  (``as_string=True``) or raw. Counts use 10**3 prefixes (``1.235 kMACs``, ``22.36 GFLOPs``),
  durations s/ms/us/ns, rates ``FLOP/s``; raw mode writes the stored value itself.
* **The tree** (``render_tree``) and **the aggregated view** (``aggregate``, ``aggregated_report``):
  their docstrings say what they show.
* **The summary** (``render_summary``, ``phase_report``) and the full report (``render_report``):
  totals, phases, latency, achieved FLOP/s, parallel layout. Figures are per device, as
  DeepSpeed's profiler reports them; the whole model's params and FLOPs are the per-device
  figures times the model-parallel size (data parallelism does not change them).

The views read a profile's fields and import nothing of ``result`` (which calls them).
"""
from __future__ import annotations

from typing import Any

from deeplite_like.reports.table import TableReport
from deeplite_like.results import OpStats
from deeplite_like.units import format_number, pick_scale

# (``result.py`` imports these views: its ``ModelProfile`` and ``ModuleNode`` are read here by attribute only)
ModelProfile = ModuleNode = Any


def count(value: int | float | None, unit: str = "", as_string: bool = True) -> str:
    """``'144 MACs'``, ``'1.235 kMACs'``, ``'61.71 k'`` (no unit); raw: ``'144'``."""
    if value is None:
        return "n/a"
    if not as_string:
        return str(value)
    scale = pick_scale(value, "count")
    if scale.factor == 1:
        text = str(int(value)) if float(value).is_integer() else format_number(float(value))
    else:
        text = format_number(value / scale.factor)
    return f"{text} {scale.prefix}{unit}".rstrip()


def seconds(value: float | None, as_string: bool = True) -> str:
    """``'12.35 ms'``; raw: seconds (``'0.01235'``); ``'n/a'`` when not measured."""
    return _prefixed(value, "seconds", "s", as_string)


def rate(value: float | None, as_string: bool = True) -> str:
    """Achieved FLOP/s: ``'1.83 TFLOP/s'``; raw: FLOP/s; ``'n/a'`` when not timed."""
    return _prefixed(value, "rate", "FLOP/s", as_string)


def _prefixed(value: float | None, kind: str, unit: str, as_string: bool) -> str:
    if value is None:
        return "n/a"
    if not as_string:
        return f"{value:.6g}"
    scale = pick_scale(value, kind)
    return f"{format_number(value / scale.factor)} {scale.prefix}{unit}"


def share(part: float | None, whole: float | None) -> str:
    """``'66.67%'`` of the whole; ``'-'`` when either is missing or the whole is 0."""
    if part is None or not whole:
        return "-"
    return f"{100.0 * part / whole:.2f}%"


_INDENT = "  "


def _figures(node: "ModuleNode", profile: "ModelProfile", root_latency: float | None, as_string: bool,
             split: bool) -> str:
    parts = [f"params {count(node.params, '', as_string)} ({share(node.params, profile.params)})",
             f"MACs {count(node.macs, 'MACs', as_string)} ({share(node.macs, profile.macs)})",
             f"FLOPs {count(node.flops, 'FLOPs', as_string)} ({share(node.flops, profile.flops)})"]
    counted = [p for p in ("forward", "backward") if node.phase(p).flops or node.phase(p).macs]
    if split and counted:
        split = ", ".join(f"{'fwd' if p == 'forward' else 'bwd'} {count(node.phase(p).flops, '', as_string)}"
                          for p in ("forward", "backward"))
        parts[-1] += f" [{split}]"
    if profile.module_latency:
        latency = seconds(node.latency_s, as_string)
        parts.append(f"fwd latency {latency} ({share(node.latency_s, root_latency)})")
        parts.append(rate(node.flops_per_s, as_string))
    if node.container:
        parts.append("not called itself: the sum of its children")
    elif node.calls != 1:
        parts.append(f"{node.calls} calls")
    return " | ".join(parts)


def _ops(ops: dict[str, OpStats], as_string: bool) -> str:
    ranked = sorted(ops.items(), key=lambda kv: (-kv[1].flops, kv[0]))
    items = []
    for name, stats in ranked:
        cost = count(stats.flops, "FLOPs", as_string)
        if stats.macs:
            cost = f"{count(stats.macs, 'MACs', as_string)}, {cost}"
        items.append(f"{name} x{stats.calls} ({cost})")
    return "; ".join(items)


def _header(node: "ModuleNode", excluded: set[int]) -> str:
    if node.children:  # as print(model): the children follow, then the closing parenthesis
        head = f"{node.type}(" + (f"{node.extra_repr}," if node.extra_repr else "")
    else:
        head = f"{node.type}({node.extra_repr})"
    head = head if node.depth == 0 else f"({node.local_name}): {head}"
    if id(node) in excluded:
        head += "  [excluded: not counted in its parents nor the totals]"
    return head


def render_tree(profile: "ModelProfile", module_depth: int = -1, as_string: bool = True) -> str:
    """The tree down to ``module_depth`` (-1: every depth), one header and one figures line per module.

    The module tree, as ``print(model)`` draws it, each module's
    header line (``(name): Type(extra_repr)``) and under it its figures (params, MACs, FLOPs,
    forward latency, each with its share of the total, and the achieved forward FLOP/s; the
    forward/backward split when backward was counted), the gap between it and the sum of its
    children, and the operators called directly in it. Excluded modules (``ignore_modules``) are
    marked ``[excluded]``; their figures are shown but not counted in their parents or the totals.
    """
    excluded = {id(node) for node in profile.excluded}
    split = any("backward" in node.phases for node in profile.modules())  # backward attributed to modules
    root_latency = profile.root.latency_s
    lines: list[str] = []

    def visit(node: "ModuleNode", indent: str) -> None:
        inner = indent + _INDENT
        lines.append(indent + _header(node, excluded))
        lines.append(inner + _figures(node, profile, root_latency, as_string, split))
        if node.children:
            gap = node.gap
            if gap.macs or gap.flops or node.ops:
                lines.append(inner + f"not in a child: MACs {count(gap.macs, 'MACs', as_string)}, "
                             f"FLOPs {count(gap.flops, 'FLOPs', as_string)}"
                             + (f"; ops: {_ops(node.ops, as_string)}" if node.ops else ""))
        elif node.ops:
            lines.append(inner + "ops: " + _ops(node.ops, as_string))
        if node.children:
            if module_depth is not None and 0 <= module_depth <= node.depth:
                below = sum(1 for _ in node.walk()) - 1
                lines.append(inner + f"... {below} submodule(s) below depth {module_depth} not shown")
            else:
                for child in node.children:
                    visit(child, inner)
            lines.append(indent + ")")

    visit(profile.root, "")
    return "\n".join(lines)


#: Metrics ranked at each depth: key in the data -> displayed header.
METRICS = {"params": "params", "macs": "MACs", "flops": "FLOPs", "latency_s": "fwd latency"}


def depths(profile: "ModelProfile", module_depth: int = -1) -> range:
    """The depths shown for ``module_depth`` (-1: all, down to the deepest inclusive)."""
    deepest = profile.max_depth
    last = deepest if module_depth is None or module_depth < 0 else min(int(module_depth), deepest)
    return range(0, last + 1)


def aggregate(profile: "ModelProfile", module_depth: int = -1, top_modules: int = 3) -> list[dict]:
    """Per depth: ``{"depth", "modules", "top": {metric: [{"type", "value", "modules"}, ...]}}``.

    ``value`` is the sum over the modules of that type at that depth (raw: elements, MACs,
    FLOPs, seconds); ties are broken by type name. ``latency_s`` is ranked only when module
    timing was on (``[]`` otherwise).

    The aggregated view (also ``aggregated_report``'s): at each depth of the tree, the
    top-k module types by cost. Depth 0 is the root; ``module_depth=-1`` shows every depth down to
    the deepest one inclusive (DeepSpeed's profiler stops one level short of it),
    ``module_depth=d`` depths 0..d. Modules of one type at one depth are summed and the types
    ranked per metric; excluded modules and everything below them are left out.
    """
    if top_modules < 1:
        raise ValueError(f"top_modules must be at least 1, got {top_modules}")
    result = []
    nodes = [node for node in profile.modules() if not node.excluded]
    for depth in depths(profile, module_depth):
        groups: dict[str, dict] = {}
        for node in nodes:
            if node.depth != depth:
                continue
            group = groups.setdefault(node.type, {"params": 0, "macs": 0, "flops": 0, "latency_s": None,
                                                  "modules": 0})
            group["params"] += node.params
            group["macs"] += node.macs
            group["flops"] += node.flops
            group["modules"] += 1
            if node.latency_s is not None:
                group["latency_s"] = (group["latency_s"] or 0.0) + node.latency_s
        top = {}
        for metric in METRICS:
            ranked = [(kind, g) for kind, g in groups.items() if g[metric] is not None]
            ranked.sort(key=lambda item: (-item[1][metric], item[0]))
            top[metric] = [{"type": kind, "value": g[metric], "modules": g["modules"]}
                           for kind, g in ranked[:top_modules]]
        result.append({"depth": depth, "modules": sum(g["modules"] for g in groups.values()), "top": top})
    return result


def _cell(entry: dict | None, metric: str, as_string: bool) -> str:
    if entry is None:
        return ""
    value = entry["value"]
    if metric == "latency_s":
        text = seconds(value, as_string)
    else:
        text = count(value, {"params": "", "macs": "MACs", "flops": "FLOPs"}[metric], as_string)
    many = f" x{entry['modules']}" if entry["modules"] > 1 else ""
    return f"{entry['type']}{many}: {text}"


def aggregated_report(profile: "ModelProfile", module_depth: int = -1, top_modules: int = 3,
                      as_string: bool = True) -> TableReport:
    """The aggregated view as a table: one row per depth and rank, one column per metric."""
    data = aggregate(profile, module_depth, top_modules)
    rows = []
    for level in data:
        for rank in range(top_modules):
            cells = {metric: _cell(level["top"][metric][rank] if rank < len(level["top"][metric]) else None,
                                   metric, as_string) for metric in METRICS}
            if not any(cells.values()):
                break
            rows.append({"depth": level["depth"] if rank == 0 else None, "rank": rank + 1, **cells})
    notes = [f"Top {top_modules} module types per depth (0 = the model itself), summed over the modules of a "
             "type at that depth ('xN': N modules of that type)."]
    if not profile.module_latency:
        notes.append("Module timing was off: no latency ranking.")
    if profile.excluded:
        notes.append("Excluded modules (ignore_modules) and their submodules are left out.")
    return TableReport(f"Aggregated profile per device: {profile.model}", ["depth", "rank", *METRICS], rows,
                       headers={"depth": "depth", "rank": "#", **{k: f"by {v}" for k, v in METRICS.items()}},
                       notes=notes)


_RULE = 78


def _banner(text: str) -> str:
    return f" {text} ".center(_RULE, "-")


#: What each phase of a profile holds, for the summary's notes.
PHASE_DESCRIPTIONS = {
    "forward": "operators run inside a call of the model or one of its modules",
    "backward": "operators run by autograd (loss.backward(), torch.autograd.grad, tape.gradient)",
    "optimizer": "operators run inside optimizer.step() (or apply_gradients)",
    "other": "everything else between start and stop: the loss function, gradient clipping, ...",
}


def phase_report(profile: "ModelProfile", as_string: bool = True) -> TableReport:
    """The phases as a table: MACs, FLOPs, their share, operator calls, latency, FLOP/s."""
    figures = [(name, stats.macs, stats.flops, stats.calls, stats.latency_s, stats.flops_per_s)
               for name, stats in profile.phases.items()]
    # the total: its latency is duration_s, its FLOP/s FLOPs / duration_s (ModelProfile.flops_per_s)
    figures.append(("total", profile.macs, profile.flops, sum(p.calls for p in profile.phases.values()),
                    profile.duration_s, profile.flops_per_s))
    rows = []
    for name, macs, flops, calls, latency_s, flops_per_s in figures:
        rows.append({"phase": name, "macs": count(macs, "MACs", as_string),
                     "flops": count(flops, "FLOPs", as_string),
                     "share": share(flops, profile.flops), "calls": calls,
                     "latency": seconds(latency_s, as_string),
                     "rate": rate(flops_per_s, as_string)})
    notes = [f"{name}: {PHASE_DESCRIPTIONS[name]}" for name in profile.phases if name in PHASE_DESCRIPTIONS]
    if "backward" in profile.phases:
        notes.append("backward is measured operator by operator (not estimated as 2x forward).")
    return TableReport("Phases (per device)", ["phase", "macs", "flops", "share", "calls", "latency", "rate"], rows,
                       headers={"macs": "MACs", "flops": "FLOPs", "share": "% FLOPs", "calls": "op calls",
                                "latency": "latency", "rate": "achieved FLOP/s"}, notes=notes)


def render_summary(profile: "ModelProfile", as_string: bool = True) -> str:
    """Totals per device and for the whole model, the phase table, and how things were measured."""
    mp = profile.model_parallel_size
    bound = ">= " if profile.untracked and as_string else ""  # a count missing untracked operators: a lower bound
    c = lambda v, unit="": (bound if unit else "") + str(count(v, unit, as_string))  # noqa: E731
    where = f" at step {profile.step}" if profile.step is not None else ""
    lines = [_banner(f"Flops profile of {profile.model} ({profile.backend}){where}")]
    facts = [("device", profile.device or "unknown"), ("batch size", profile.batch_size)]
    if profile.world_size:
        facts.append(("world size / data parallel / model parallel",
                      f"{profile.world_size} / {profile.data_parallel_size} / {mp}"))
    lines.append(" | ".join(f"{k}: {v}" for k, v in facts if v is not None))
    fwd = profile.phase("forward")
    rows = [
        ("params per device", c(profile.params)),
        (f"params of model = params per device * mp_size ({mp})", c(profile.model_params)),
        ("fwd MACs per device", c(fwd.macs, "MACs")),
        ("fwd FLOPs per device", c(fwd.flops, "FLOPs")),
        (f"fwd FLOPs of model = fwd FLOPs per device * mp_size ({mp})", c(fwd.flops * mp, "FLOPs")),
        ("fwd latency", seconds(fwd.latency_s, as_string)),
        ("fwd FLOP/s per device = fwd FLOPs per device / fwd latency", rate(fwd.flops_per_s, as_string)),
    ]
    if set(profile.phases) - {"forward"}:
        rows += [
            ("FLOPs per device, all phases", c(profile.flops, "FLOPs")),
            (f"FLOPs of model = FLOPs per device * mp_size ({mp})", c(profile.model_flops, "FLOPs")),
            ("duration (start to stop)", seconds(profile.duration_s, as_string)),
            ("FLOP/s per device = FLOPs per device / duration", rate(profile.flops_per_s, as_string)),
        ]
    width = max(len(label) for label, _ in rows) + 2
    lines += [f"{label + ':':<{width}}{value}" for label, value in rows]
    lines += ["", phase_report(profile, as_string).to_text()]
    lines.append(f"- module timing: {_timing_note(profile)}")
    if profile.outside:
        top = sorted(profile.outside.items(), key=lambda kv: (-kv[1].flops, kv[0]))[:5]
        lines.append("- not in the module tree (run outside any module call, or counted per operator only): "
                     + "; ".join(f"{name} x{s.calls} ({count(s.flops, 'FLOPs', as_string)})" for name, s in top)
                     + (" ..." if len(profile.outside) > 5 else ""))
    if profile.excluded:
        lines.append("- excluded (ignore_modules, not in the totals): " + "; ".join(
            f"{node.name} ({node.type}): {count(node.macs, 'MACs', as_string)}, "
            f"{count(node.flops, 'FLOPs', as_string)}" for node in profile.excluded))
    if profile.untracked:
        lines.append("- untracked operators (no formula, counted as 0; '>=' marks the counts they are missing "
                     "from): " + ", ".join(
            f"{name} x{calls}" for name, calls in sorted(profile.untracked.items())))
    if profile.communication:
        lines.append("- communication per rank (payload bytes S / ring bus bytes, docs/distributed.rst): " + "; ".join(
            f"{c.op} x{c.calls} in {c.phase} by {c.module or '<root>'}: {c.payload_bytes:,} / {c.bus_bytes:,} bytes"
            for c in profile.communication))
    lines += [f"- {note}" for note in profile.notes]
    return "\n".join(lines)


def _timing_note(profile: "ModelProfile") -> str:
    if not profile.module_latency:
        return "off - per-module latency was not measured (module_latency=True measures it)"
    if profile.device and profile.device.startswith("cuda"):
        return "on - each module's forward is timed with a CUDA synchronisation before and after it"
    return "on - each module's forward is timed (wall clock)"


def render_report(profile: "ModelProfile", module_depth: int = -1, top_modules: int = 3, detailed: bool = True,
                  as_string: bool = True) -> str:
    """Summary, aggregated top-k per depth and (``detailed``) the module tree, as one text."""
    parts = [render_summary(profile, as_string), "",
             _banner("Aggregated profile per device"),
             profile.aggregated_table(module_depth, top_modules, as_string).to_text()]
    if detailed:
        parts += ["", _banner("Detailed profile per device"),
                  "Each module: params, MACs, FLOPs (fwd/bwd split when backward was counted), forward latency, "
                  "each with its share of the total, and the achieved forward FLOP/s. A parent's figures include "
                  "its children's; 'not in a child' is the parent minus the sum of its children: the operators "
                  "called directly in it.",
                  profile.tree_text(module_depth, as_string)]
    parts.append("-" * _RULE)
    return "\n".join(parts)
