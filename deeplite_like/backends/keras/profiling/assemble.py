"""Turning a profiling session into a ``ModelProfile``: the module tree, phases and operator tables.

The forward is priced from the session's layer records by the counting engine's ``price`` -
the same figures as ``count_ops`` - and each layer of the tree (``counting.recorder.
named_layers`` paths) gets its MACs, FLOPs, calls, parameters, operators and latency. The
operator counter's totals (backward, optimizer, other) become phases and operator rows that
are not attributed to layers. The core's ``build_profile`` assembles and applies exclusions.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from deeplite_like.opcount import OpStats
from deeplite_like.profiling.build import ModuleRecord, build_profile
from deeplite_like.profiling.result import ModelProfile, PhaseStats

from ..counting.pricing import price
from ..counting.registry import CountOptions
from ..params import params_by_layer
from .session import Session

__all__ = ["profile_of"]

_CONFIG_KEYS = ("units", "filters", "kernel_size", "strides", "padding", "pool_size", "activation", "rate",
                "axis", "num_heads", "key_dim", "output_dim", "input_dim", "target_shape")


def _extra_repr(layer: Any) -> str:
    try:
        config = layer.get_config()
    except (NotImplementedError, AttributeError, TypeError, ValueError):
        return ""
    parts = [f"{key}={config[key]!r}" if isinstance(config[key], str) else f"{key}={config[key]}"
             for key in _CONFIG_KEYS if key in config and config[key] is not None]
    if config.get("use_bias") is False:
        parts.append("use_bias=False")
    return ", ".join(parts)


def _ignored(layers: list[tuple[str, Any]], ignore: Iterable[Any]) -> set[str]:
    classes, names = [], set()
    for item in ignore:
        if isinstance(item, type):
            classes.append(item)
        elif isinstance(item, str):
            names.add(item)
        else:
            raise TypeError(f"ignore_modules takes Keras layer classes or class names, got {item!r}")
    return {path for path, layer in layers if isinstance(layer, tuple(classes)) or type(layer).__name__ in names}


def _records(model: Any, layers: list[tuple[str, Any]], counted: Any,
             latency: Mapping[str, float] | None) -> list[ModuleRecord]:
    known = {path for path, _ in layers}
    params = params_by_layer(model)
    records = []
    for path, layer in layers:
        parent = None
        if path:
            parent = path.rpartition(".")[0]
            while parent and parent not in known:
                parent = parent.rpartition(".")[0]
        stats = counted.by_module.get(path)
        phases = {"forward": OpStats(stats.macs, stats.flops, 0)} if stats is not None and (stats.macs or stats.flops) \
            else {}
        records.append(ModuleRecord(
            name=path, type=type(layer).__name__, parent=parent, extra_repr=_extra_repr(layer),
            params=params.get(id(layer), 0), calls=stats.calls if stats is not None else 0, phases=phases,
            ops=dict(counted.module_ops.get(path, {})), latency_s=None if latency is None else latency.get(path)))
    return records


def profile_of(session: Session, *, module_latency: bool, ignore: Iterable[Any], params: int, trainable: int,
               forward_latency: float | None, latencies: Mapping[str, float | None], duration: float | None,
               layer_seconds: Mapping[str, float] | None, step: int | None, mp: int,
               notes: list[str]) -> ModelProfile:
    """The ``ModelProfile`` of what ``session`` recorded: the forward per layer, the rest per operator and phase."""
    recorder = session.recorder
    counted = price(recorder.records, CountOptions(training=recorder.training), session.own_ops)
    phases = {"forward": PhaseStats(counted.macs, counted.flops, sum(s.calls for s in counted.by_operator.values()),
                                    forward_latency)}
    by_operator = {k: OpStats(v.macs, v.flops, v.calls) for k, v in counted.by_operator.items()}
    untracked = dict(counted.untracked)
    outside: dict[str, OpStats] = {}
    if session.counter is not None:
        ops = session.counter.ops
        for name, stats in ops.phases.items():
            if stats.calls:
                phases[name] = PhaseStats(stats.macs, stats.flops, stats.calls, latencies.get(name))
        for name, stats in ops.by_operator.items():
            outside[name] = OpStats(stats.macs, stats.flops, stats.calls)
            by_operator.setdefault(name, OpStats()).add(stats.macs, stats.flops, stats.calls)
        untracked.update(ops.untracked)
    elif session.backend not in ("tensorflow", "torch"):
        notes.append(f"Keras' {session.backend} backend has no operator hook: only the forward (per layer) is "
                     "counted; the backward and the optimizer step are not measured.")
    notes.append("The forward is priced layer by layer (the layer formulas of count_ops); the backward, the "
                 "optimizer step and the rest operator by operator, not attributed to layers.")
    return build_profile(
        type(session.model).__name__, "keras",
        _records(session.model, session.layers, counted, layer_seconds if module_latency else None),
        phases=phases, by_operator=by_operator, outside=outside, excluded_names=_ignored(session.layers, ignore),
        params=params, trainable_params=trainable, duration_s=duration, batch_size=recorder.batch_size,
        untracked=untracked, module_latency=module_latency, device=f"keras/{session.backend}",
        model_parallel_size=mp, step=step, notes=notes)
