"""``node_times``: ONNX Runtime's per-node profile joined to the per-node counts, and ``profile --node-times``.

Timing values are never asserted (they depend on the machine); the structure, the join and the sums are:
every node's counts are the file's, ORT's kernel times add up to no more than its ``model_run`` time, and
what ORT fuses or inserts is listed apart, with its time, never dropped.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from deeplite_like.backends.onnx import count_ops  # noqa: E402
from deeplite_like.backends.onnx.compute import node_times  # noqa: E402
from tests.cli.conftest import cli  # noqa: E402,F401  (the fixture)
from tests.onnx.test_onnx_control_flow import _loop  # noqa: E402
from tests.onnx.test_onnx_export import exported  # noqa: E402

LENET_NODES = ["/features/features.0/Conv", "/features/features.1/Relu", "/features/features.2/MaxPool",
               "/features/features.3/Conv", "/features/features.4/Relu", "/features/features.5/MaxPool",
               "/classifier/classifier.0/Flatten", "/classifier/classifier.1/Gemm", "/classifier/classifier.2/Relu",
               "/classifier/classifier.3/Gemm", "/classifier/classifier.4/Relu", "/classifier/classifier.5/Gemm"]


@pytest.fixture(scope="module")
def lenet5_onnx() -> bytes:
    return exported("lenet5")[2]


def _small_graph() -> onnx.ModelProto:
    """x[2, 4] -> MatMul W[4, 3] (unnamed) -> Add of a Constant (unnamed) -> Relu: every node but one unnamed."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(np.ones(3, np.float32))),
         helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"], name="act")],
        "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(np.ones((4, 3), np.float32), "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_optimizations_off_join_every_lenet5_node(lenet5_onnx, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    times = node_times(lenet5_onnx, optimization="disabled", repeats=3)
    assert os.listdir(tmp_path) == []  # the trace went to a temporary folder, removed
    assert [n.name for n in times.nodes] == LENET_NODES
    assert all(n.time_s is not None and n.time_s > 0 and n.note == "" for n in times.nodes)
    assert times.unjoined == [] and times.unjoined_s == 0
    # the per-node counts are the file's: 833,040 MACs at batch 2 (docs/zoo.rst: 416,520 per sample), and the
    # FLOPs count_ops gives; conv1: 2 x 6 x 28 x 28 outputs x (1 x 5 x 5) = 235,200 MACs
    counted = count_ops(lenet5_onnx)
    assert sum(n.macs for n in times.nodes) == counted.macs == 833_040
    assert sum(n.flops for n in times.nodes) == counted.flops
    assert times.nodes[0].macs == 235_200
    # conv1 reads the input 2x1x32x32 (8,192 B), W 6x1x5x5 (600 B) and B (24 B), writes 2x6x28x28 (37,632 B)
    assert times.nodes[0].bytes == 8_192 + 600 + 24 + 37_632
    # ORT's kernel times are inside its model_run time
    assert 0 < times.joined_s <= times.run_s
    assert (times.runs, times.num_threads, times.batch_size, times.optimization) == (3, 1, 2, "disabled")
    by_module = times.by_module()
    assert by_module[""] == pytest.approx(times.joined_s)
    assert by_module["features"] == pytest.approx(sum(n.time_s for n in times.nodes[:6]))
    table = times.layer_table()
    rows = {row["module"]: row for row in table.rows}
    assert rows[""]["macs"] == 833_040 and rows[""]["nodes"] == 12 and rows["features.3"]["macs"] == 480_000
    assert all(row["ort_time_s"] is not None for row in table.rows)
    assert rows[""]["time_share"] == pytest.approx(100.0)
    # ORT's own allocator figures, kept as it gives them: at least conv1's output (2x6x28x28 float32 = 37,632 B)
    # is allocated by ORT at some node
    assert times.allocator["mem_in_use_peak"] >= 37_632 and times.allocator["mem_arena_held"] > 0


def test_optimizations_on_list_fused_and_inserted_nodes_apart(lenet5_onnx):
    times = node_times(lenet5_onnx, optimization="all", repeats=3)
    assert [n.name for n in times.nodes] == LENET_NODES  # every node of the file is still listed, with its counts
    assert sum(n.macs for n in times.nodes) == 833_040
    unjoined = {u.name: u for u in times.unjoined}
    # ORT fuses Gemm + Relu into a FusedGemm named after the Gemm: not the file's node, listed apart
    fused = unjoined["fused /classifier/classifier.1/Gemm"]
    assert (fused.op_type, fused.reason, fused.refers_to) == ("FusedGemm", "fused", ("/classifier/classifier.1/Gemm",))
    gemm = next(n for n in times.nodes if n.name == "/classifier/classifier.1/Gemm")
    assert gemm.time_s is None and "fused /classifier/classifier.1/Gemm" in gemm.note
    relu = next(n for n in times.nodes if n.name == "/classifier/classifier.2/Relu")
    assert relu.time_s is None and relu.note.startswith("not run as itself")
    assert all(u.reason in ("fused", "rewritten", "inserted") and u.time_s > 0 for u in times.unjoined)
    # nothing dropped: joined and unjoined time together are inside the run
    assert times.unjoined_s > 0 and times.joined_s + times.unjoined_s <= times.run_s
    table = times.unjoined_table()
    assert [row["name"] for row in table.rows] == [u.name for u in times.unjoined]
    assert any("--node-times disabled" in note for note in times.layer_table().notes)


def test_unnamed_nodes_constants_and_control_flow():
    times = node_times(_small_graph(), optimization="disabled", repeats=2)
    # unnamed nodes are named Op#index in the session's copy (the caller's proto is not touched)
    assert [n.name for n in times.nodes] == ["MatMul#0", "Constant#1", "Add#2", "act"]
    matmul, constant, add, relu = times.nodes
    # MatMul (2x4) @ (4x3): 2 x 3 outputs x K 4 = 24 MACs, 48 FLOPs; reads x 32 B + W 48 B, writes 24 B
    assert (matmul.macs, matmul.flops, matmul.bytes, matmul.time_s > 0) == (24, 48, 104, True)
    # ORT keeps a Constant as an initializer: it never runs, and says so
    assert constant.time_s is None and "initializer" in constant.note
    # Add (2x3) + (3): 6 FLOPs; Relu 6 FLOPs
    assert (add.flops, relu.flops) == (6, 6) and add.time_s > 0 and relu.time_s > 0
    assert _small_graph().graph.node[0].name == ""
    # a Loop is one ORT node: its body's 5 trips (5 x 64 MACs) are its counts, its body nodes inside its time
    looped = node_times(_loop(trips=5), optimization="disabled", repeats=2)
    (loop,) = looped.nodes
    assert (loop.name, loop.macs, loop.flops, loop.bytes) == ("loop", 320, 640, 5 * 320)
    assert loop.time_s > 0 and looped.unjoined == []
    assert any("inside If / Loop / Scan bodies" in note for note in looped.notes)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="optimization must be one of disabled, basic"):
        node_times(_small_graph(), optimization="O3")
    with pytest.raises(ValueError, match="repeats must be a positive int, got 0"):
        node_times(_small_graph(), repeats=0)


def test_profile_node_times_on_the_command_line(cli, tmp_path, lenet5_onnx):
    path = tmp_path / "lenet5.onnx"
    path.write_bytes(lenet5_onnx)
    code, out, err = cli("profile", str(path), "--node-times", "disabled", "--metrics", "macs", "--format", "json",
                         "--no-progress")
    assert code == 0, err
    report = json.loads(out)
    rows = {row["module"]: row for row in report["layers"]["rows"]}
    assert rows[""]["macs"] == 833_040 and all(row["ort_time_s"] > 0 for row in rows.values())
    assert [n["name"] for n in report["node_times"]["nodes"]] == LENET_NODES
    assert report["node_times"]["graph_optimization_level"] == "disabled"
    code, out, err = cli("profile", str(path), "--node-times", "--metrics", "macs", "--no-progress")
    assert code == 0, err
    assert "ORT time" in out and "ONNX Runtime nodes not in the file (graph_optimization_level='all')" in out
    code, _, err = cli("profile", "zoo:lenet5", "--node-times", "--no-progress")
    assert code == 2 and "--node-times reads ONNX Runtime's per-node profile of an .onnx file" in err
    code, _, err = cli("profile", str(path), "--node-times", "fast", "--no-progress")
    assert code == 2 and "not a graph optimization level" in err
