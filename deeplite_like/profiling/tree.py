"""The detailed view: the module tree, as ``print(model)`` draws it, with each module's cost.

Each module gets its header line (``(name): Type(extra_repr)``) and, indented under it:

* its figures: params, MACs, FLOPs, forward latency, each with its share of the total, and
  the achieved forward FLOP/s; the forward/backward split when backward was counted;
* for a module with children, the gap between it and the sum of its children (the cost of
  the operators called directly in it); for every module, those operators: name, calls,
  MACs, FLOPs.

Excluded modules (``ignore_modules``) are marked ``[excluded]``; their figures are shown
but not counted in their parents or the totals.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from deeplite_like.results import OpStats
from deeplite_like.profiling import formatting as fmt

if TYPE_CHECKING:
    from deeplite_like.profiling.result import ModelProfile, ModuleNode

_INDENT = "  "


def _figures(node: "ModuleNode", profile: "ModelProfile", root_latency: float | None, as_string: bool,
             split: bool) -> str:
    parts = [f"params {fmt.count(node.params, '', as_string)} ({fmt.share(node.params, profile.params)})",
             f"MACs {fmt.count(node.macs, 'MACs', as_string)} ({fmt.share(node.macs, profile.macs)})",
             f"FLOPs {fmt.count(node.flops, 'FLOPs', as_string)} ({fmt.share(node.flops, profile.flops)})"]
    counted = [p for p in ("forward", "backward") if node.phase(p).flops or node.phase(p).macs]
    if split and counted:
        split = ", ".join(f"{'fwd' if p == 'forward' else 'bwd'} {fmt.count(node.phase(p).flops, '', as_string)}"
                          for p in ("forward", "backward"))
        parts[-1] += f" [{split}]"
    if profile.module_latency:
        latency = fmt.seconds(node.latency_s, as_string)
        parts.append(f"fwd latency {latency} ({fmt.share(node.latency_s, root_latency)})")
        parts.append(fmt.rate(node.flops_per_s, as_string))
    if node.container:
        parts.append("not called itself: the sum of its children")
    elif node.calls != 1:
        parts.append(f"{node.calls} calls")
    return " | ".join(parts)


def _ops(ops: dict[str, OpStats], as_string: bool) -> str:
    ranked = sorted(ops.items(), key=lambda kv: (-kv[1].flops, kv[0]))
    items = []
    for name, stats in ranked:
        cost = fmt.count(stats.flops, "FLOPs", as_string)
        if stats.macs:
            cost = f"{fmt.count(stats.macs, 'MACs', as_string)}, {cost}"
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
    """The tree down to ``module_depth`` (-1: every depth), one header and one figures line per module."""
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
                lines.append(inner + f"not in a child: MACs {fmt.count(gap.macs, 'MACs', as_string)}, "
                             f"FLOPs {fmt.count(gap.flops, 'FLOPs', as_string)}"
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
