"""Per-layer summary: one row per module with shapes, parameters, MACs, FLOPs and activation bytes.

Every figure comes from one observation pass (``counting.engine.observe``): the counts per
module, and each module's input and output shapes and output bytes at its first call; the
rendering is a ``TableReport``.
"""
from __future__ import annotations

import torch

from deeplite_like.backends.torch.counting.engine import Observation, observe
from deeplite_like.backends.torch.params import module_param_counts
from deeplite_like.reports import TableReport
from deeplite_like.units import format_bytes, format_share

COLUMNS = ("module", "type", "input_shapes", "output_shapes", "params", "macs", "flops", "activation_bytes",
           "macs_share", "calls")
HEADERS = {"module": "Module", "type": "Type", "input_shapes": "Input shapes", "output_shapes": "Output shapes",
           "params": "Params", "macs": "MACs", "flops": "FLOPs", "activation_bytes": "Output bytes",
           "macs_share": "MACs %", "calls": "Calls"}


#: Why a TorchScript module has no per-layer table (the command line states the same limit).
SCRIPT_NO_LAYERS = ("a TorchScript module takes no forward hooks, so it has no per-layer table; profile the Python "
                    "nn.Module it was scripted or traced from to get one (MACs, FLOPs, params, memory and time work "
                    "on the TorchScript module)")


def layerwise_summary(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, meta: bool = False,
                      max_depth: int | None = None) -> TableReport:
    """A ``TableReport`` with one row per module that ran (parents include their children).

    ``activation_bytes`` is the size of the module's output tensors (first call);
    ``macs_share`` is the module's MACs over the whole model's, in percent. ``module`` is the
    qualified name (``""`` for the model itself, shown as ``(model)``); ``max_depth`` hides
    deeper modules (their cost stays in their parents).
    """
    if isinstance(model, torch.jit.ScriptModule):
        raise TypeError(f"layerwise_summary: {type(model).__name__} is a TorchScript module; {SCRIPT_NO_LAYERS}")
    return layer_table(model, observe(model, tuple(args), dict(kwargs or {}), meta=meta, layers=True), max_depth)


def layer_table(model: torch.nn.Module, seen: Observation, max_depth: int | None = None) -> TableReport:
    """The per-layer table of an observation of ``model`` made with ``layers=True`` (``layerwise_summary``)."""
    counted, facts_of = seen.counts, seen.layers or {}
    params = module_param_counts(model)  # (one bottom-up pass; the same sharing rules as total_params)
    total_macs = counted.macs
    rows = []
    for name, module in model.named_modules(remove_duplicate=True):
        if name not in facts_of and name not in counted.by_module:
            continue  # never ran
        depth = 0 if name == "" else name.count(".") + 1
        if max_depth is not None and depth > max_depth:
            continue
        stats = counted.by_module.get(name)
        facts = facts_of.get(name)
        macs = stats.macs if stats else 0
        rows.append({
            "module": name,
            "type": type(module).__name__,
            "input_shapes": facts.input_shapes if facts else "",
            "output_shapes": facts.output_shapes if facts else "",
            "params": params.get(name, 0),
            "macs": macs,
            "flops": stats.flops if stats else 0,
            "activation_bytes": facts.activation_bytes if facts else 0,
            "macs_share": 100.0 * macs / total_macs if total_macs else 0.0,
            "calls": stats.calls if stats else 0,
        })
    notes = [f"batch size {counted.batch_size}; MACs and FLOPs of a module include its children's"]
    if counted.untracked:
        notes.append("untracked (counted 0): " + ", ".join(f"{k} x{v}" for k, v in counted.untracked.items()))
    formatters = {"module": lambda v: v or "(model)", "params": lambda v: f"{v:,}", "macs": lambda v: f"{v:,}", "flops": lambda v: f"{v:,}",
                  "activation_bytes": format_bytes, "macs_share": format_share}
    return TableReport(f"Per-layer summary: {type(model).__name__}", COLUMNS, rows, formatters=formatters,
                       headers=HEADERS, notes=notes)
