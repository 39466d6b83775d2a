"""Peak activation memory of ONNX files from tensor lifetimes (``backends/onnx/graph.py``), by hand and against torch."""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from deeplite_like.backends.onnx import OnnxProfiler, tensor_lifetimes  # noqa: E402
from deeplite_like.backends.onnx.graph import prepare  # noqa: E402


def hand_graph() -> onnx.ModelProto:
    """x[1,4] -> Relu a[1,4] -> MatMul(a, W[4,8]) b[1,8] -> Reshape(b, shape) c[2,4] (a view of b)
    -> Add(c, x) d[2,4] -> Relu y[2,4] (the output). ``shape`` is a Constant node, W an initializer."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu1"),
        helper.make_node("MatMul", ["a", "W"], ["b"], name="matmul"),
        helper.make_node("Constant", [], ["shape"], name="shape_const",
                         value=numpy_helper.from_array(np.array([2, 4], dtype=np.int64))),
        helper.make_node("Reshape", ["b", "shape"], ["c"], name="reshape"),
        helper.make_node("Add", ["c", "x"], ["d"], name="add"),
        helper.make_node("Relu", ["d"], ["y"], name="relu2"),
    ]
    graph = helper.make_graph(
        nodes, "hand", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        initializer=[numpy_helper.from_array(np.ones((4, 8), dtype=np.float32), "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_hand_built_graph_peak_and_where():
    stats = tensor_lifetimes(prepare(hand_graph()))
    # float32, 4 bytes an element: x 16 B, a 16 B, b 32 B (c is b's storage: Reshape is a view), d 32 B, y 32 B.
    # W (128 B) and the Constant shape are stored in the file: parameters, never activations.
    # Steps (graph order; the Constant is step 2): x lives 0..5 (a graph input: the caller holds it to the end),
    # a 0..1, b 1..4 (the view c's last consumer is add), d 4..5, y 5..5 (an output: to the end).
    #   relu1 x + a = 32 | matmul x + a + b = 64 | shape_const x + b = 48 | reshape x + b = 48
    #   add x + b + d = 80 | relu2 x + d + y = 80 (the peak is reported at its first node)
    assert stats.by_step == {"relu1": 32, "matmul": 64, "shape_const": 48, "reshape": 48, "add": 80, "relu2": 80}
    assert (stats.peak_bytes, stats.peak_at) == (80, "add")
    assert (stats.input_bytes, stats.output_bytes) == (16, 32)
    assert stats.tensors == 5  # x, a, b, d, y


def test_hand_built_graph_planned_arena():
    from deeplite_like.results import TensorLifetimes

    stats = tensor_lifetimes(prepare(hand_graph()))
    # 64-byte aligned, every storage (16 or 32 B) takes 64 B. Largest first, ties the earlier born first:
    # x (0..5) at 0; a (0..1) meets x: above it, 64; b (1..4) meets x and a: 128; d (4..5) meets x and b, and
    # a's slot [64, 128) is free by then: 64; y (5..5) meets x and d: 128. Arena 192 = three storages live at
    # once (add: x, b, d), each 64 B.
    assert (stats.arena_bytes, stats.alignment) == (192, 64)
    # The same storages unaligned (``plan(1)``): b (32 B, 1..4) at 0; d (4..5) meets b: 32; y (5..5) meets d
    # only: 0; x (16 B, 0..5) meets b, d, y: 64; a (0..1) meets b and x: the gap [32, 64) holds it: 32.
    # The arena is 64 + 16 = 80 B, the live peak exactly.
    lifetimes = TensorLifetimes(6)
    for key, start, end, size in (("x", 0, 5, 16), ("a", 0, 1, 16), ("b", 1, 4, 32), ("d", 4, 5, 32),
                                  ("y", 5, 5, 32)):
        lifetimes.born(key, start, size)
        lifetimes.read(key, end)
    assert lifetimes.plan(1).offsets == {"b": 0, "d": 32, "y": 0, "x": 64, "a": 32}
    assert lifetimes.arena_size(1) == 80 == stats.peak_bytes


def test_a_greedy_plan_can_leave_a_hole_above_the_peak():
    from deeplite_like.results import TensorLifetimes

    # T0 3 B (steps 0..2), T2 3 B (2..3), T1 and T3 2 B each (step 3). Live: 3, 3, 6 (T0 + T2), 7 (T1 + T2 + T3).
    # Largest first: T0 at 0; T2 meets T0: 3; T1 meets only T2: the gap [0, 3) holds it, at 0; T3 meets T2
    # [3, 6) and T1 [0, 2): the gap [2, 3) is 1 B, too small, so it goes above: 6. Arena 8 B against a 7 B peak.
    lifetimes = TensorLifetimes(4)
    for key, start, end, size in (("T0", 0, 2, 3), ("T1", 3, 3, 2), ("T2", 2, 3, 3), ("T3", 3, 3, 2)):
        lifetimes.born(key, start, size)
        lifetimes.read(key, end)
    stats = lifetimes.stats(["s0", "s1", "s2", "s3"], 0, 0, alignment=1)
    assert (stats.peak_bytes, stats.arena_bytes) == (7, 8)
    assert lifetimes.plan(1).offsets == {"T0": 0, "T2": 3, "T1": 0, "T3": 6}
    with pytest.raises(ValueError, match="alignment must be a positive int, got 0"):
        lifetimes.plan(0)


def test_hand_built_graph_through_the_profiler_with_a_batch():
    model = hand_graph()
    before = model.SerializeToString()
    profiler = OnnxProfiler(model)
    peak = profiler.compute_status("peak_activation_memory")
    assert peak == 80  # as above
    # W, 32 float32 weights = 128 B, + the 80 B peak; the Constant's 2 int64 are index data, not parameters
    assert profiler.status_to_dict()["memory_footprint"] == 128 + 80
    assert profiler.get_status("peak_activation_memory").details["peak_at"] == "add"
    # the planned arena (test_hand_built_graph_planned_arena): 3 x 64 B
    assert profiler.status_to_dict()["activation_arena"] == 192
    assert profiler.get_status("activation_arena").details["source"] == "planned"
    assert model.SerializeToString() == before


def test_unknown_shape_is_named():
    model = hand_graph()
    model.graph.node.append(helper.make_node("Mystery", ["y"], ["z"], name="mystery", domain="custom.domain"))
    model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    model.opset_import.append(helper.make_opsetid("custom.domain", 1))
    with pytest.raises(ValueError, match=r"tensor 'z' \(output 0 of mystery \(Mystery\)\) is unknown"):
        tensor_lifetimes(prepare(model))


def test_lenet5_export_against_the_torch_backends_peak():
    """The exported LeNet-5 (batch 2) against the live model measured by the torch backend: they differ, on purpose.

    Float32, batch 2, bytes: input 2x1x32x32 x 4 = 8,192 (live throughout in both: the caller holds it);
    conv1 out 2x6x28x28 x 4 = 37,632; pool1 out 2x6x14x14 x 4 = 9,408.
    ONNX: the peak is at the first Relu: input + conv1 out + Relu out = 8,192 + 37,632 + 37,632 = 83,456.
    torch: the zoo's ReLU is ``inplace=True`` (no new storage), and ``max_pool2d_with_indices`` also
    allocates int64 indices (2,352 x 8 = 18,816); its peak is at the first pool:
    8,192 + 37,632 + 9,408 + 18,816 = 74,048. An ONNX Relu is a new tensor (our count is planner-free;
    ONNX Runtime's planner may reuse the buffer in place), and ONNX MaxPool has no indices output.
    """
    torch = pytest.importorskip("torch")
    from deeplite_like.backends.torch import TorchProfiler
    from tests.onnx.test_onnx_export import exported

    model, x, data = exported("lenet5")
    onnx_peak = OnnxProfiler(data)
    onnx_peak.compute_status("peak_activation_memory")
    live = TorchProfiler(model, {"test": [(x, torch.zeros(2, dtype=torch.long))]})
    live.compute_status("peak_activation_memory", batch_size=2)
    onnx_bytes = onnx_peak.status_to_dict()["peak_activation_memory"]
    torch_bytes = live.status_to_dict()["peak_activation_memory"]
    assert onnx_bytes == 8_192 + 37_632 + 37_632
    # the planned arena: every storage is a multiple of 64 B and the plan leaves no hole: the peak exactly
    assert onnx_peak.compute_status("activation_arena") == onnx_bytes
    assert torch_bytes == 8_192 + 37_632 + 9_408 + 18_816
    assert onnx_peak.get_status("peak_activation_memory").details["peak_at"] == "/features/features.1/Relu"
    assert live.get_status("peak_activation_memory").details["peak_at"].endswith("in 'features.2'")


def test_bytes_moved_per_node_of_the_hand_built_graph():
    """Every node reads its distinct inputs and writes its outputs at their stored type (float32: 4 bytes);
    the Reshape is a view and the Constant stored data: no record.

    relu1: x 1x4 (16) -> a (16); matmul: a 16 + W 4x8 (128) = 144 -> b 1x8 (32); add: c 2x4 (32) + x 16 = 48
    -> d (32); relu2: d 32 -> y 32. Fused: the chain add -> relu2 reads c and x (48) and writes y (32, the
    output: nothing reads it again); d stays on chip. relu1 is a chain of one before the matmul: 16 + 16.
    """
    from deeplite_like.backends.onnx import count_ops

    count = count_ops(hand_graph(), bytes_moved=True)
    assert [(r.op, r.bytes_read, r.bytes_written, r.fused_bytes, r.dtype) for r in count.records] == [
        ("Relu", 16, 16, 32, "float32"), ("MatMul", 144, 32, 176, "float32"),
        ("Add", 48, 32, 48, "float32"), ("Relu", 32, 32, 32, "float32")]
    assert (count.bytes, count.fused_bytes) == (32 + 176 + 80 + 64, 32 + 176 + 48 + 32)
    assert count.by_operator["Relu"].bytes == 32 + 64
    assert count_ops(hand_graph()).records == []


def test_lenet5_export_moves_the_bytes_the_live_model_moves_in_its_contractions():
    """The exported LeNet-5 (batch 2): each Conv and Gemm reads its input, weight and bias and writes its
    output, as the live model's convolution and addmm do (the same tensors, float32)."""
    pytest.importorskip("torch")
    from deeplite_like.backends.onnx import count_ops as count_onnx
    from deeplite_like.backends.torch import count_ops as count_torch
    from tests.onnx.test_onnx_export import exported

    model, x, data = exported("lenet5")
    onnx_counts = count_onnx(data, bytes_moved=True)
    torch_counts = count_torch(model, x, bytes_moved=True)
    contractions = [(r.macs, r.bytes) for r in onnx_counts.records if r.macs]
    assert contractions == [(r.macs, r.bytes) for r in torch_counts.records if r.macs]
    # conv1: x 2x1x32x32 (8,192) + W 6x1x5x5 (600) + b (24) read, 2x6x28x28 (37,632) written
    assert contractions[0] == (2 * 6 * 28 * 28 * 25, 8_192 + 600 + 24 + 37_632)
