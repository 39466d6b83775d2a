"""Peak activation memory of an ONNX graph, from tensor lifetimes in topological order.

The graph's nodes are stored in topological order (the ONNX spec requires it); node ``k`` is step
``k``. A tensor is live from the step of the node that makes it to the step of its last consumer:

* graph inputs are live from the start to the end (the caller holds them for the whole run, as
  the torch backend counts them);
* graph outputs are live to the end (the last step);
* initializers, and the outputs of ``Constant`` nodes, are stored in the file: they are
  parameters (``model_size``), not activations, and never count here;
* a node's inputs and outputs are live together while it runs, so the bytes at step ``k`` are
  every tensor whose interval holds ``k``; the peak is the largest such total, and the node where
  it happens is reported with it.

Views: ``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze`` and ``Identity`` copy no data (ONNX
Runtime gives their output the input's buffer, and torch's ``view`` / ``flatten`` allocate
nothing): their output is the same storage as their input, which then lives until the last
consumer of either. Every other node's output is a fresh tensor of ``numel x element bits / 8``
bytes (sub-byte types rounded up per tensor), at its inferred shape and dtype.

This is the live-tensor lower bound an ideal planner reaches; a real arena with offsets (ONNX
Runtime's planner) can be larger because of fragmentation, and is not computed here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from deeplite_like.backends.onnx.graph import GraphInfo, element_bits

__all__ = ["ALIAS_OPS", "LifetimeStats", "tensor_lifetimes"]

#: Ops whose output is their first input's storage (no copy): default domain only.
ALIAS_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})


@dataclass
class LifetimeStats:
    """Live-tensor bytes of one run of a graph (all in bytes).

    Attributes:
        peak_bytes: the largest total of live activation bytes at any node.
        peak_at: the node where the peak happens (its name, else ``op_type#index``).
        input_bytes / output_bytes: bytes of the graph's inputs / outputs.
        tensors: activation storages counted (views of one storage count once).
        by_node: node label -> live bytes while it runs, in graph order.
    """

    peak_bytes: int = 0
    peak_at: str = ""
    input_bytes: int = 0
    output_bytes: int = 0
    tensors: int = 0
    by_node: dict[str, int] = field(default_factory=dict)


def _node_label(node, index: int) -> str:
    return node.name or f"{node.op_type}#{index}"


def _nbytes(name: str, info: GraphInfo, where: str) -> int:
    shape, elem_type = info.shapes.get(name), info.dtypes.get(name)
    if shape is None or elem_type is None:
        why = f" ({info.unknown_reason})" if info.unknown_reason else ""
        raise ValueError(f"peak activation memory: the {'shape' if shape is None else 'element type'} of tensor "
                         f"{name!r} ({where}) is unknown after shape inference{why}")
    numel = 1
    for d in shape:
        numel *= int(d)
    return (numel * element_bits(elem_type) + 7) // 8


def tensor_lifetimes(info: GraphInfo) -> LifetimeStats:
    """The live-tensor peak of ``info``'s graph (see the module docstring for the rules)."""
    graph = info.model.graph
    nodes = list(graph.node)
    last = max(len(nodes) - 1, 0)
    stored = {t.name for t in graph.initializer}
    stored |= {n.output[0] for n in nodes if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output}
    root: dict[str, str] = {}  # value name -> the storage it is (itself, or the input it views)
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    size: dict[str, int] = {}
    graph_inputs = [i.name for i in graph.input if i.name not in stored]
    for name in graph_inputs:
        root[name] = name
        start[name], end[name] = 0, last
        size[name] = _nbytes(name, info, "graph input")
    for index, node in enumerate(nodes):
        label = _node_label(node, index)
        for name in node.input:
            if name and name in root:
                end[root[name]] = max(end[root[name]], index)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            continue
        aliased = (node.op_type in ALIAS_OPS and node.domain in ("", "ai.onnx") and node.input
                   and node.input[0] in root)
        for position, name in enumerate(node.output):
            if not name:
                continue
            if aliased and position == 0:
                root[name] = root[node.input[0]]
                continue
            root[name] = name
            start[name] = end[name] = index
            size[name] = _nbytes(name, info, f"output {position} of {label} ({node.op_type})")
    outputs = [o.name for o in graph.output if o.name in root]
    for name in outputs:
        end[root[name]] = last
    stats = LifetimeStats(tensors=len(size))
    stats.input_bytes = sum(size[n] for n in graph_inputs)
    stats.output_bytes = sum(size[s] for s in {root[n] for n in outputs})
    # live bytes per step: +size at start, -size after end (a difference array, one pass)
    delta = [0] * (last + 2)
    for name, nbytes in size.items():
        delta[start[name]] += nbytes
        delta[end[name] + 1] -= nbytes
    live = 0
    for index, node in enumerate(nodes or [None]):
        live += delta[index]
        label = _node_label(node, index) if node is not None else "(no nodes)"
        stats.by_node[label] = live
        if live > stats.peak_bytes:
            stats.peak_bytes, stats.peak_at = live, label
    return stats

