"""Peak activation memory of a ``.tflite`` subgraph, from tensor lifetimes in execution order.

Operator ``k`` (the subgraph's stored order, the order the interpreter runs) is step ``k``. A tensor
is live from the step of the op that makes it to the step of its last consumer; graph inputs are
live for the whole run and graph outputs to the end; constants (tensors with a buffer) are
parameters (``model_size``), never activations. ``RESHAPE``, ``SQUEEZE`` and ``EXPAND_DIMS`` copy
no data: their output is their input's storage, which then lives until the last consumer of either.
Bytes are elements x dtype bits / 8 at the stored shapes (int8 activations 1 byte each).

This is the live-tensor lower bound an ideal planner reaches; the interpreter's arena (with
offsets and alignment) can be larger, and is not compared here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from deeplite_like.backends.tflite.graph import TFLiteModel

__all__ = ["ALIAS_OPS", "LifetimeStats", "tensor_lifetimes"]

ALIAS_OPS = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS"})


@dataclass
class LifetimeStats:
    """Live-tensor bytes of one run (all in bytes): the peak, where it happens, and per operator."""

    peak_bytes: int = 0
    peak_at: str = ""
    input_bytes: int = 0
    output_bytes: int = 0
    tensors: int = 0
    by_op: dict[str, int] = field(default_factory=dict)


def tensor_lifetimes(model: TFLiteModel) -> LifetimeStats:
    """The live-tensor peak of ``model``'s main subgraph (see the module docstring for the rules)."""
    last = max(len(model.ops) - 1, 0)
    root: dict[int, int] = {}  # tensor index -> the storage it is (itself, or the tensor it views)
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    size: dict[int, int] = {}

    def touch(index: int, step: int) -> None:
        storage = root.get(index, index)
        end[storage] = max(end.get(storage, step), step)

    for t in model.inputs:
        root[t.index], start[t.index], end[t.index], size[t.index] = t.index, 0, last, t.nbytes
    for step, op in enumerate(model.ops):
        for t in op.inputs:
            if t is not None and not t.constant:
                touch(t.index, step)
        for position, t in enumerate(op.outputs):
            source = op.inputs[0] if op.inputs else None
            if op.op in ALIAS_OPS and position == 0 and source is not None and not source.constant:
                root[t.index] = root.get(source.index, source.index)
                touch(t.index, step)
                continue
            root[t.index], start[t.index], size[t.index] = t.index, step, t.nbytes
            end[t.index] = max(end.get(t.index, step), step)
    for t in model.outputs:
        touch(t.index, last)
    stats = LifetimeStats(input_bytes=sum(t.nbytes for t in model.inputs),
                          output_bytes=sum(t.nbytes for t in model.outputs), tensors=len(size))
    for step, op in enumerate(model.ops):
        live = sum(size[s] for s in size if start[s] <= step <= end[s])
        stats.by_op[op.label] = live
        if live > stats.peak_bytes:
            stats.peak_bytes, stats.peak_at = live, op.label
    return stats
