"""Per-node MACs against onnx-tool (``pip install onnx-tool``; a benchmark, not a dependency).

Exports models of the repo with ``torch.onnx.export`` (the TorchScript exporter, batch 2, as
``tests/onnx/test_onnx_export.py`` does), counts each with our ONNX backend (``formulas.node_costs``:
per node MACs and FLOPs) and with onnx-tool (``Model -> graph.shape_infer -> graph.profile``, every node
profiled, none hidden), and compares node by node. Each node lands in one class:

* ``same``: onnx-tool's MACs are ours;
* ``bias``: a contraction whose bias onnx-tool adds to its MACs, 1 per output (ours: a FLOP);
* ``elementwise``: an op with no MACs of ours, to which onnx-tool gives "MACs", a per-element cost
  in its own units (1 for an add, a compare or a max; 4 a division, 24 a square root, 32 an exponential);
* ``other``: anything else, printed in full.

    python benchmarks/bench_onnx_tool.py                  # the figures in docs/benchmarks.rst
    python benchmarks/bench_onnx_tool.py --models lenet5 --nodes   # every node of one model
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import warnings
from collections import defaultdict
from importlib.metadata import version

from prettytable import PrettyTable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from deeplite_like import zoo  # noqa: E402
from deeplite_like.backends.onnx.formulas import node_costs  # noqa: E402
from deeplite_like.backends.onnx.graph import prepare  # noqa: E402

MODELS = ("lenet5", "resnet_small", "mobilenet_small", "transformer_encoder", "lstm_tagger")
CONTRACTIONS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "LSTM", "GRU", "RNN"}


def export(name: str, batch: int = 2) -> bytes:
    import torch

    entry = zoo.get(name)
    model, x = entry.build(), entry.example_input(batch)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buffer, dynamo=False, input_names=["input"], output_names=["logits"])
    return buffer.getvalue()


def ours(data: bytes) -> dict[str, tuple[str, int, int, int]]:
    """Node name -> (op type, MACs, FLOPs, output elements) from our backend."""
    info = prepare(data)
    rows = {}
    for node, cost, _ in node_costs(info):
        shape = info.shapes.get(node.output[0]) if node.output else None
        elements = 1
        for d in shape or ():
            elements *= d
        rows[node.name] = (node.op_type, cost.macs, cost.flops, elements if shape is not None else 0)
    return rows


def onnx_tool_macs(data: bytes) -> dict[str, int]:
    """Node name -> onnx-tool's forward MACs (every node profiled)."""
    import onnx
    import onnx_tool

    model = onnx_tool.Model(onnx.load_model_from_string(data))
    graph = model.graph
    graph.graph_reorder_nodes()
    graph.shape_infer(None)
    graph.profile()
    return {name: int(round(node.macs[0])) for name, node in graph.nodemap.items()}


def classify(op: str, macs: int, flops: int, elements: int, theirs: int) -> str:
    if theirs == macs:
        return "same"
    if op in CONTRACTIONS and theirs - macs == elements and flops - 2 * macs == elements:
        return "bias"
    if macs == 0:
        return "elementwise"
    return "other"


def compare(name: str, show_nodes: bool) -> tuple[list, dict]:
    data = export(name)
    mine, theirs = ours(data), onnx_tool_macs(data)
    missing = sorted(set(mine) ^ set(theirs))
    if missing:
        print(f"{name}: nodes in one count only: {missing[:8]}")
    per_op: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # nodes, ours, theirs, our FLOPs
    nodes = PrettyTable(["node", "op", "our MACs", "onnx-tool MACs", "our FLOPs", "class"])
    for node, (op, macs, flops, elements) in mine.items():
        if node not in theirs:
            continue
        kind = classify(op, macs, flops, elements, theirs[node])
        row = per_op[(op, kind)]
        row[0] += 1
        row[1] += macs
        row[2] += theirs[node]
        row[3] += flops
        if show_nodes or kind == "other":
            nodes.add_row([node, op, f"{macs:,}", f"{theirs[node]:,}", f"{flops:,}", kind])
    if nodes.rows:
        print(f"{name}: nodes" + ("" if show_nodes else " of class 'other'"))
        print(nodes)
    total = (sum(v[1] for v in mine.values()), sum(theirs.get(k, 0) for k in mine),
             sum(v[2] for v in mine.values()))
    return [[name, op, kind, *values] for (op, kind), values in sorted(per_op.items())], {name: total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--nodes", action="store_true", help="print every node")
    args = parser.parse_args()
    print(f"onnx-tool {version('onnx-tool')}; batch 2; MACs per op type and class")
    table = PrettyTable(["model", "op", "class", "nodes", "our MACs", "onnx-tool MACs", "our FLOPs"])
    totals = {}
    for name in args.models:
        rows, total = compare(name, args.nodes)
        totals.update(total)
        for row in rows:
            table.add_row([*row[:4], *(f"{v:,}" for v in row[4:])])
    table.align = "r"
    for column in ("model", "op", "class"):
        table.align[column] = "l"
    print(table)
    summary = PrettyTable(["model", "our MACs", "onnx-tool MACs", "ratio", "our FLOPs"])
    for name, (macs, theirs, flops) in totals.items():
        summary.add_row([name, f"{macs:,}", f"{theirs:,}", f"{theirs / macs:.3f}", f"{flops:,}"])
    summary.align = "r"
    print(summary)


if __name__ == "__main__":
    main()
