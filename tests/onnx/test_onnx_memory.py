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
    assert stats.by_node == {"relu1": 32, "matmul": 64, "shape_const": 48, "reshape": 48, "add": 80, "relu2": 80}
    assert (stats.peak_bytes, stats.peak_at) == (80, "add")
    assert (stats.input_bytes, stats.output_bytes) == (16, 32)
    assert stats.tensors == 5  # x, a, b, d, y


def test_hand_built_graph_through_the_profiler_with_a_batch():
    model = hand_graph()
    before = model.SerializeToString()
    profiler = OnnxProfiler(model)
    peak = profiler.compute_status("peak_activation_memory")
    assert peak == 80  # as above
    # W, 32 float32 weights = 128 B, + the 80 B peak; the Constant's 2 int64 are index data, not parameters
    assert profiler.status_to_dict()["memory_footprint"] == 128 + 80
    assert profiler.get_status("peak_activation_memory").details["peak_at"] == "add"
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
    assert torch_bytes == 8_192 + 37_632 + 9_408 + 18_816
    assert onnx_peak.get_status("peak_activation_memory").details["peak_at"] == "/features/features.1/Relu"
    assert live.get_status("peak_activation_memory").details["peak_at"].endswith("in 'features.2'")
