"""The aggregated view: at each depth of the module tree, the top-k module types by cost.

Depth 0 is the root, depth 1 its children, and so on. ``module_depth=-1`` shows every depth
down to the deepest one inclusive (DeepSpeed's profiler stops one level short of it);
``module_depth=d`` shows depths 0..d. At one depth, modules of the same type are summed
(params, MACs, FLOPs, forward latency) and the types ranked per metric. Excluded modules
(``ignore_modules``) and everything below them are left out, as they are of the totals.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from deeplite_like.profiling import formatting as fmt
from deeplite_like.reports.table import TableReport

if TYPE_CHECKING:
    from deeplite_like.profiling.result import ModelProfile

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
        text = fmt.seconds(value, as_string)
    else:
        text = fmt.count(value, {"params": "", "macs": "MACs", "flops": "FLOPs"}[metric], as_string)
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
