"""Turning a counted run into the parts of a ``ModelProfile``: module records and phase totals."""
from __future__ import annotations

from typing import Any, Iterable

from torch import nn

from deeplite_like.profiling.build import ModuleRecord
from deeplite_like.profiling.result import PhaseStats

from ..params import module_param_counts
from .phases import PhaseCountingMode

__all__ = ["ignored_names", "module_params", "module_records", "phase_totals"]


def ignored_names(named_modules: list[tuple[str, nn.Module]], ignore: Iterable[Any]) -> set[str]:
    """Qualified names of modules whose type is listed (classes match subclasses; strings match names)."""
    classes, names = [], set()
    for item in ignore:
        if isinstance(item, type) and issubclass(item, nn.Module):
            classes.append(item)
        elif isinstance(item, str):
            names.add(item)
        else:
            raise TypeError(f"ignore_modules takes torch.nn.Module classes or class names, got {item!r}")
    classes_t = tuple(classes)
    return {name for name, module in named_modules
            if (classes_t and isinstance(module, classes_t)) or type(module).__name__ in names
            or f"{type(module).__module__}.{type(module).__qualname__}" in names}


def _parent(name: str, known: set[str]) -> str | None:
    if name == "":
        return None
    parent = name.rpartition(".")[0]
    while parent and parent not in known:
        parent = parent.rpartition(".")[0]
    return parent


def module_params(named_modules: list[tuple[str, nn.Module]]) -> dict[str, int]:
    """Parameters of each listed module's subtree (``named_modules`` is ``model.named_modules()``), in one pass."""
    if not named_modules:
        return {}
    counts = module_param_counts(named_modules[0][1])
    return {name: counts[name] for name, _ in named_modules}


def module_records(named_modules: list[tuple[str, nn.Module]], params: dict[str, int], mode: PhaseCountingMode,
             latency: dict[str, float] | None) -> list[ModuleRecord]:
    known = {name for name, _ in named_modules}
    result = mode.result
    records = []
    for name, module in named_modules:
        stats = result.by_module.get(name)
        records.append(ModuleRecord(
            name=name, type=type(module).__name__, parent=_parent(name, known), extra_repr=module.extra_repr(),
            params=params.get(name, 0), calls=stats.calls if stats is not None else 0,
            phases=dict(mode.module_phases.get(name, {})), ops=dict(result.module_ops.get(name, {})),
            latency_s=None if latency is None else latency.get(name)))
    return records


def phase_totals(mode: PhaseCountingMode) -> dict[str, PhaseStats]:
    return {name: PhaseStats(s.macs, s.flops, s.calls) for name, s in mode.result.phases.items()
            if s.calls or name in ("forward", "backward")}
