"""``count_ops`` for ``.tflite`` files: every operator priced by the formula table, per op type and per module.

One pass over the main subgraph's operators in execution order: each op's builtin name finds its
formula, or marks it free, or untracked (counted 0, listed in ``OpCount.untracked`` and warned about
once, by name and count; custom ops are keyed ``CUSTOM:code``).

Modules come from the scopes of the op's first output tensor's name: the converter names it
``lenet5_keras_1/fc1_1/MatMul;lenet5_keras_1/relu3_1/Relu`` (fused ops joined by ``;``); the first
name's scopes are the module, ``lenet5_keras_1.fc1_1``. ``by_module`` is nested like the other
backends' (a module's figures include its children's; ``calls`` counts the operators directly in it).
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping

from deeplite_like.backends.tflite.formulas import FORMULAS, FREE
from deeplite_like.backends.tflite.graph import OpView, TFLiteModel, load_model
from deeplite_like.results import Cost, OpCount, OpStats

__all__ = ["UntrackedTFLiteOpWarning", "count_model", "count_ops", "module_of", "price"]


class UntrackedTFLiteOpWarning(UserWarning):
    """Operators ran with no formula and are not known to be free: they were counted as 0."""


def module_of(op: OpView) -> str:
    """``a/b/MatMul;a/c/Relu`` -> ``a.b`` (the scopes of the first fused name); ``""`` when there are none."""
    if not op.outputs:
        return ""
    parts = [p for p in op.outputs[0].name.split(";")[0].split("/") if p]
    return ".".join(parts[:-1])


def _ancestors(module: str) -> list[str]:
    parts = module.split(".") if module else []
    return [""] + [".".join(parts[:i + 1]) for i in range(len(parts))]


def price(op: OpView) -> Cost | None:
    """The op's ``Cost``; ``None`` when it is untracked (no formula, not free)."""
    function = FORMULAS.get(op.op)
    if function is not None:
        try:
            return function(op)
        except (IndexError, TypeError, ZeroDivisionError, AttributeError) as exc:
            raise ValueError(f"cannot price {op.label}: {type(exc).__name__}: {exc}") from exc
    return Cost() if op.op in FREE else None


def count_model(model: TFLiteModel) -> OpCount:
    """The ``OpCount`` of a read model (``graph.load_model``); see the module docstring."""
    result = OpCount()
    by_module: dict[str, OpStats] = {}
    for op in model.ops:
        cost = price(op)
        if cost is None:
            result.untracked[op.op] = result.untracked.get(op.op, 0) + 1
            cost = Cost()
        result.by_operator.setdefault(op.op, OpStats()).add(cost.macs, cost.flops)
        module = module_of(op)
        result.module_ops.setdefault(module, {}).setdefault(op.op, OpStats()).add(cost.macs, cost.flops)
        for name in _ancestors(module):
            by_module.setdefault(name, OpStats()).add(cost.macs, cost.flops, 1 if name == module else 0)
        result.macs += cost.macs
        result.flops += cost.flops
    result.by_module = by_module
    batches = {t.shape[0] for t in model.inputs if t.shape}
    result.batch_size = batches.pop() if len(batches) == 1 else None
    return result


def untracked_message(untracked: Mapping[str, int]) -> str:
    listing = ", ".join(f"{name} ({calls} op{'s' if calls != 1 else ''})"
                        for name, calls in sorted(untracked.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"{len(untracked)} TFLite op type(s) have no FLOP formula and were counted as 0: {listing}. "
            "Add a formula to deeplite_like.backends.tflite.formulas (formula decorator) or list the op in FREE.")


def count_ops(model: Any, warn_untracked: bool = True) -> OpCount:
    """MACs and FLOPs of one run of a ``.tflite`` model at its stored shapes, per op type and per module.

    Args:
        model: a path to a ``.tflite`` file or its bytes (never modified).
        warn_untracked: warn once (``UntrackedTFLiteOpWarning``) about ops with no formula.

    Returns an ``OpCount`` whose ``batch_size`` is the inputs' common first dimension (if any).
    """
    result = count_model(load_model(model))
    if warn_untracked and result.untracked:
        warnings.warn(untracked_message(result.untracked), UntrackedTFLiteOpWarning, stacklevel=2)
    return result
