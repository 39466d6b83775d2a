"""The summary view (totals, phases, latency, achieved FLOP/s, parallel layout) and the full report.

Figures are per device, as DeepSpeed's profiler reports them; the whole model's params and
FLOPs are the per-device figures times the model-parallel size (data parallelism does not
change them).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from deeplite_like.profiling import formatting as fmt
from deeplite_like.profiling.result import PHASE_DESCRIPTIONS, PhaseStats
from deeplite_like.reports.table import TableReport

if TYPE_CHECKING:
    from deeplite_like.profiling.result import ModelProfile

_RULE = 78


def _banner(text: str) -> str:
    return f" {text} ".center(_RULE, "-")


def phase_report(profile: "ModelProfile", as_string: bool = True) -> TableReport:
    """The phases as a table: MACs, FLOPs, their share, operator calls, latency, FLOP/s."""
    # the total's FLOP/s is FLOPs / duration_s, as ModelProfile.flops_per_s
    total = PhaseStats(profile.macs, profile.flops, sum(p.calls for p in profile.phases.values()), profile.duration_s)
    rows = []
    for name, stats in [*profile.phases.items(), ("total", total)]:
        rows.append({"phase": name, "macs": fmt.count(stats.macs, "MACs", as_string),
                     "flops": fmt.count(stats.flops, "FLOPs", as_string),
                     "share": fmt.share(stats.flops, profile.flops), "calls": stats.calls,
                     "latency": fmt.seconds(stats.latency_s, as_string),
                     "rate": fmt.rate(stats.flops_per_s, as_string)})
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
    c = lambda v, unit="": (bound if unit else "") + str(fmt.count(v, unit, as_string))  # noqa: E731
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
        ("fwd latency", fmt.seconds(fwd.latency_s, as_string)),
        ("fwd FLOP/s per device = fwd FLOPs per device / fwd latency", fmt.rate(fwd.flops_per_s, as_string)),
    ]
    if set(profile.phases) - {"forward"}:
        rows += [
            ("FLOPs per device, all phases", c(profile.flops, "FLOPs")),
            (f"FLOPs of model = FLOPs per device * mp_size ({mp})", c(profile.model_flops, "FLOPs")),
            ("duration (start to stop)", fmt.seconds(profile.duration_s, as_string)),
            ("FLOP/s per device = FLOPs per device / duration", fmt.rate(profile.flops_per_s, as_string)),
        ]
    width = max(len(label) for label, _ in rows) + 2
    lines += [f"{label + ':':<{width}}{value}" for label, value in rows]
    lines += ["", phase_report(profile, as_string).to_text()]
    lines.append(f"- module timing: {_timing_note(profile)}")
    if profile.outside:
        top = sorted(profile.outside.items(), key=lambda kv: (-kv[1].flops, kv[0]))[:5]
        lines.append("- not in the module tree (run outside any module call, or counted per operator only): "
                     + "; ".join(f"{name} x{s.calls} ({fmt.count(s.flops, 'FLOPs', as_string)})" for name, s in top)
                     + (" ..." if len(profile.outside) > 5 else ""))
    if profile.excluded:
        lines.append("- excluded (ignore_modules, not in the totals): " + "; ".join(
            f"{node.name} ({node.type}): {fmt.count(node.macs, 'MACs', as_string)}, "
            f"{fmt.count(node.flops, 'FLOPs', as_string)}" for node in profile.excluded))
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
