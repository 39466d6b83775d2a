"""Per-layer summary: one row per module with shapes, parameters, MACs, FLOPs and activation bytes.

Facts come from one counting pass (``count_ops``) plus a global forward hook (none on the modules)
that records each module's input and output shapes and output bytes; the rendering is a
``TableReport``.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.nn.modules import module as _module_globals
from torch.utils._pytree import tree_leaves

from deeplite_like.backends.torch.counting import count_ops
from deeplite_like.reports import TableReport
from deeplite_like.units import format_bytes, format_share

COLUMNS = ("module", "type", "input_shapes", "output_shapes", "params", "macs", "flops", "activation_bytes",
           "macs_share", "calls")
HEADERS = {"module": "Module", "type": "Type", "input_shapes": "Input shapes", "output_shapes": "Output shapes",
           "params": "Params", "macs": "MACs", "flops": "FLOPs", "activation_bytes": "Output bytes",
           "macs_share": "MACs %", "calls": "Calls"}


def _shape(t: torch.Tensor) -> str:
    if t.is_nested:  # no single shape: its components', "nested(12x64, 8x64)"
        return f"nested({', '.join(_shape(part) for part in t.unbind())})"
    return "x".join(map(str, t.shape)) or "scalar"


def _shapes(value: Any) -> str:
    return ", ".join(_shape(t) for t in tree_leaves(value) if isinstance(t, torch.Tensor))


def _bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tree_leaves(value) if isinstance(t, torch.Tensor))


def _own_params(module: torch.nn.Module) -> int:
    seen: set[int] = set()
    total = 0
    for p in module.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


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
    kwargs = kwargs or {}
    names = {id(m): n for n, m in model.named_modules(remove_duplicate=True)}
    seen: dict[str, dict[str, Any]] = {}

    def hook(module: torch.nn.Module, inputs: Any, kw: Any, output: Any) -> None:
        name = names.get(id(module))
        if name is None:
            return
        row = seen.get(name)
        if row is None:
            seen[name] = {"input_shapes": _shapes((inputs, kw)), "output_shapes": _shapes(output),
                          "activation_bytes": _bytes(output)}

    handle = _module_globals.register_module_forward_hook(hook, with_kwargs=True)  # (global: no trace on the modules)
    try:
        counted = count_ops(model, *args, meta=meta, **kwargs)
    finally:
        handle.remove()
    total_macs = counted.macs
    rows = []
    for name, module in model.named_modules(remove_duplicate=True):
        if name not in seen and name not in counted.by_module:
            continue  # never ran
        depth = 0 if name == "" else name.count(".") + 1
        if max_depth is not None and depth > max_depth:
            continue
        stats = counted.by_module.get(name)
        facts = seen.get(name, {})
        macs = stats.macs if stats else 0
        rows.append({
            "module": name,
            "type": type(module).__name__,
            "input_shapes": facts.get("input_shapes", ""),
            "output_shapes": facts.get("output_shapes", ""),
            "params": _own_params(module),
            "macs": macs,
            "flops": stats.flops if stats else 0,
            "activation_bytes": facts.get("activation_bytes", 0),
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
