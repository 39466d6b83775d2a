"""Pricing recorded layer calls: formulas applied, costs attributed, an ``OpCount`` built.

For each record, in call order:

* a call that did not finish (it raised; a profile may have caught it) and the calls inside
  it: skipped;
* inside an opaque formula's call (``MultiHeadAttention``'s projections, ``LSTM``'s cell):
  skipped, the enclosing formula priced it;
* a formula: its ``Cost`` goes to the layer's path and every enclosing call's path (the real
  call stack: ``by_module`` is nested, a shared layer counts under whichever parent called it,
  once per call), to ``by_operator`` under the layer's class name (``ops.<Name>`` for graph
  operations) and to ``module_ops[path]``; parts it reports as unpriceable go to ``untracked``;
* no formula (or marked ``OP_LEVEL``), with the operators tapped (``own_ops.py``): the ops it ran itself (outside the
  layers it called, which are priced on their own) are priced one by one, by op name
  (``tf.BatchMatMulV2``); ops with no cost known go to ``untracked`` by op name;
* ``OP_LEVEL`` with no operators tapped (JAX): untracked, by class name (``INFERENCE_IDENTITY``:
  free at inference);
* no formula, no operators tapped, but calls were recorded inside it: a container, its
  cost is its children's;
* no formula, nothing inside, known free: 0;
* otherwise: untracked (counted as 0, listed by class name).
"""
from __future__ import annotations

from typing import Any

from deeplite_like.opcount import OpCount, OpStats

from .errors import FormulaError
from .own_ops import OpTap
from .recorder import CallRecord
from .registry import FREE, INFERENCE_IDENTITY, OP_MARKS, CountOptions, Entry, LayerCall, is_keras_layer, lookup
from .specs import describe, describe_call


def operator_name(obj: Any, entry: Entry | None) -> str:
    """``Conv2D`` for a layer, ``ops.Add`` for a functional-graph operation."""
    if entry is not None and entry.name and entry is not FREE:
        return entry.name
    name = type(obj).__name__
    return name if is_keras_layer(obj) else f"ops.{name}"


def price(records: list[CallRecord], options: CountOptions, own_ops: OpTap | None = None) -> OpCount:
    """An ``OpCount`` from the records of one forward pass (see the module docstring).

    ``own_ops``: the operators each call ran itself (``run_recorded(..., tap_ops=True)``).
    """
    result = OpCount()
    by_module, untracked = result.by_module, result.untracked
    by_module.setdefault("", OpStats())
    cache: dict[type, Entry | None] = {}
    chains: list[tuple[str, ...] | None] = [None] * len(records)  # None: skipped (unfinished, or inside opaque)
    opaque = [False] * len(records)
    total = OpStats()

    for record in records:
        i, parent = record.index, record.parent
        if not record.finished or (parent >= 0 and (chains[parent] is None or opaque[parent])):
            continue
        enclosing = chains[parent] if parent >= 0 else (() if record.path == "" else ("",))
        chain = enclosing if record.path in enclosing else enclosing + (record.path,)
        chains[i] = chain
        by_module.setdefault(record.path, OpStats()).calls += 1

        entry = lookup(type(record.layer), cache)
        if entry is FREE:
            continue
        if entry is None or entry in OP_MARKS:
            if own_ops is not None:
                for name, calls in own_ops.unknown.get(i, {}).items():
                    untracked[name] = untracked.get(name, 0) + calls
                for name, op in own_ops.costs.get(i, {}).items():
                    _add(result, chain, record.path, name, op.macs, op.flops, op.calls)
                    total.add(op.macs, op.flops, op.calls)
            elif entry is INFERENCE_IDENTITY and not options.training:
                continue  # the identity at inference: free
            elif record.children == 0 or entry is not None:
                name = operator_name(record.layer, None)
                untracked[name] = untracked.get(name, 0) + 1
            continue
        opaque[i] = entry.opaque
        call = LayerCall(record.layer, record.path, record.args, record.kwargs, record.outputs, options)
        macs, flops = _apply(entry, call, record)
        for part in call.untracked_parts:
            untracked[part] = untracked.get(part, 0) + 1
        _add(result, chain, record.path, operator_name(record.layer, entry), macs, flops, 1)
        total.add(macs, flops, 1)

    result.macs, result.flops = total.macs, total.flops
    return result


def _add(result: OpCount, chain: tuple[str, ...], path: str, name: str, macs: int, flops: int, calls: int) -> None:
    """Attribute a cost to every enclosing call's path, and to ``name`` overall and under ``path``."""
    for enclosing in chain:
        result.by_module[enclosing].add(macs, flops, 0)
    for table in (result.by_operator, result.module_ops.setdefault(path, {})):
        table.setdefault(name, OpStats()).add(macs, flops, calls)


def _apply(entry: Entry, call: LayerCall, record: CallRecord) -> tuple[int, int]:
    try:
        cost = entry.formula(call)
        macs, flops = int(cost[0]), int(cost[1])
    except Exception as exc:
        where = f"layer {record.path!r}" if record.path else "the model"
        raise FormulaError(
            f"the formula {getattr(entry.formula, '__qualname__', entry.formula)!r} for {where} "
            f"({type(record.layer).__name__}) failed on {describe_call(record)} -> {describe(record.outputs)}: "
            f"{type(exc).__name__}: {exc}. It must return a Cost(macs, flops); fix it, or replace it with "
            "register_layer_formula(..., override=True).") from exc
    return macs, flops

