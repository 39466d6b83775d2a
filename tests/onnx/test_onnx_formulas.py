"""The ONNX formula table, family by family, on graphs built by hand (every count derived in a comment)."""
from __future__ import annotations

import subprocess
import warnings
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from deeplite_like.backends.onnx import count_ops  # noqa: E402
from deeplite_like.backends.onnx.formulas import UntrackedOnnxOpWarning, module_of  # noqa: E402
from deeplite_like.backends.onnx.graph import initializer_stats  # noqa: E402

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, initializers=(), opset=21, domains=()):
    """A checked ModelProto: inputs/outputs are (name, elem_type, shape) triples."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    proto = helper.make_model(graph, opset_imports=opsets)
    return proto


def weight(name, shape, dtype=np.float32):
    return numpy_helper.from_array(np.ones(shape, dtype=dtype), name)


def test_conv_grouped_strided_with_bias_and_transposed():
    # X (2, 4, 8, 8), W (6, 2, 3, 3), group 2, stride 2, pad 1 -> Y (2, 6, 4, 4): 192 outputs.
    # MACs = 192 outputs x (C_in/group = 2) x 3 x 3 = 3456; FLOPs = 2 x 3456 + 192 (bias) = 7104.
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="/conv/Conv", group=2, strides=[2, 2],
                            pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    counted = count_ops(model([conv], [("x", F, [2, 4, 8, 8])], [("y", F, None)],
                              [weight("w", (6, 2, 3, 3)), weight("b", (6,))]))
    assert (counted.macs, counted.flops) == (3456, 7104)
    # ConvTranspose X (1, 4, 5, 5), W (4, 3, 2, 2) (C_in, C_out/group, k), stride 2 -> Y (1, 3, 10, 10): 300.
    # MACs = 100 input elements x 3 x 2 x 2 = 1200; FLOPs = 2400 + 300 (bias) = 2700.
    deconv = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], kernel_shape=[2, 2])
    counted = count_ops(model([deconv], [("x", F, [1, 4, 5, 5])], [("y", F, None)],
                              [weight("w", (4, 3, 2, 2)), weight("b", (3,))]))
    assert (counted.macs, counted.flops) == (1200, 2700)


def test_gemm_matmul_and_einsum():
    # Gemm A (3, 5), B (4, 5) with transB: M 3, K 5, N 4 -> 60 MACs; C add 12 + alpha 0.5 scaling 12:
    # FLOPs = 120 + 24 = 144 (beta is 1: no extra).
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5)
    counted = count_ops(model([gemm], [("a", F, [3, 5])], [("y", F, None)], [weight("b", (4, 5)), weight("c", (4,))]))
    assert (counted.macs, counted.flops) == (60, 144)
    # MatMul (2, 1, 3, 5) x (4, 5, 6) broadcasts to (2, 4, 3, 6) = 144 outputs, K = 5: 720 MACs.
    matmul = helper.make_node("MatMul", ["a", "b"], ["y"])
    counted = count_ops(model([matmul], [("a", F, [2, 1, 3, 5])], [("y", F, None)], [weight("b", (4, 5, 6))]))
    assert (counted.macs, counted.flops) == (720, 1440)
    # Einsum bij,bjk->bik on (2, 3, 4), (2, 4, 5): a batched matmul, 2 x 3 x 4 x 5 = 120 MACs.
    bmm = helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")
    counted = count_ops(model([bmm], [("a", F, [2, 3, 4]), ("b", F, [2, 4, 5])], [("y", F, None)]))
    assert (counted.macs, counted.flops) == (120, 240)
    # Einsum i,j->ij on (3,), (4,): an outer product sums nothing, a mul: 12 FLOPs, 0 MACs.
    outer = helper.make_node("Einsum", ["a", "b"], ["y"], equation="i,j->ij")
    counted = count_ops(model([outer], [("a", F, [3]), ("b", F, [4])], [("y", F, None)]))
    assert (counted.macs, counted.flops) == (0, 12)
    # Einsum ...ij,jk with an ellipsis: (2, 3, 4) x (4, 5), implicit output ...ik: 2 x 3 x 4 x 5 = 120 MACs.
    ellipsis = helper.make_node("Einsum", ["a", "b"], ["y"], equation="...ij,jk")
    counted = count_ops(model([ellipsis], [("a", F, [2, 3, 4]), ("b", F, [4, 5])], [("y", F, None)]))
    assert counted.macs == 120
    # Upper-case letters beside an ellipsis: ...IJ,JK->...IK on (2, 3, 4), (4, 5): again 120 MACs.
    upper = helper.make_node("Einsum", ["a", "b"], ["y"], equation="...IJ,JK->...IK")
    assert count_ops(model([upper], [("a", F, [2, 3, 4]), ("b", F, [4, 5])], [("y", F, None)])).macs == 120
    # Three operands, left to right: ij,jk -> ik sums j: 2 x 3 x 4 = 24; ik,kl -> il sums k: 2 x 4 x 5 = 40.
    chain = helper.make_node("Einsum", ["a", "b", "c"], ["y"], equation="ij,jk,kl->il")
    counted = count_ops(model([chain], [("a", F, [2, 3]), ("b", F, [3, 4]), ("c", F, [4, 5])], [("y", F, None)]))
    assert (counted.macs, counted.flops) == (64, 128)


def test_recurrent_layers():
    # LSTM, bidirectional: seq 5, batch 2 -> rows 10; I 3, H 4, G*H 16; with B.
    # MACs = 2 dirs x 10 x 16 x (3 + 4) = 2240; FLOPs = 4480 + biases 2 x 10 x 16 x 2 dirs (640)
    #        + gate math 2 dirs x 10 x 4 x 22 (1760) = 6880.
    lstm = helper.make_node("LSTM", ["x", "w", "r", "b"], ["y"], hidden_size=4, direction="bidirectional")
    counted = count_ops(model([lstm], [("x", F, [5, 2, 3])], [("y", F, None)],
                              [weight("w", (2, 16, 3)), weight("r", (2, 16, 4)), weight("b", (2, 32))]))
    assert (counted.macs, counted.flops) == (2240, 6880)
    # GRU, batch-first layout: x (2, 5, 3) -> rows 10; G*H 12; no B.
    # MACs = 10 x 12 x (3 + 4) = 840; FLOPs = 1680 + gate math 10 x 4 x 16 (640) = 2320.
    gru = helper.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=4, layout=1)
    counted = count_ops(model([gru], [("x", F, [2, 5, 3])], [("y", F, None)],
                              [weight("w", (1, 12, 3)), weight("r", (1, 12, 4))]))
    assert (counted.macs, counted.flops) == (840, 2320)
    # RNN: rows 10, H 4, G*H 4: MACs 10 x 4 x 7 = 280; FLOPs = 560 + gate math 10 x 4 x 2 (80) = 640.
    rnn = helper.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=4)
    counted = count_ops(model([rnn], [("x", F, [5, 2, 3])], [("y", F, None)],
                              [weight("w", (1, 4, 3)), weight("r", (1, 4, 4))]))
    assert (counted.macs, counted.flops) == (280, 640)


def test_dynamic_quantize_lstm_counts_as_the_float_lstm():
    """com.microsoft.DynamicQuantizeLSTM (``quantize_dynamic`` of an LSTM): int8 W [D, I, 4H] and R [D, H, 4H]
    stored transposed, with per-direction scales and zero points: the bidirectional LSTM above, 2,240 MACs
    and 6,880 FLOPs (seq 5, batch 2, I 3, H 4, with B)."""
    inputs = ["x", "w", "r", "b", "", "", "", "", "ws", "wz", "rs", "rz"]
    node = helper.make_node("DynamicQuantizeLSTM", inputs, ["y"], domain="com.microsoft", hidden_size=4,
                            direction="bidirectional")
    counted = count_ops(model([node], [("x", F, [5, 2, 3])], [("y", F, [5, 2, 2, 4])],
                              [weight("w", (2, 3, 16), np.int8), weight("r", (2, 4, 16), np.int8), weight("b", (2, 32)),
                               weight("ws", (2,)), weight("wz", (2,), np.int8), weight("rs", (2,)), weight("rz", (2,), np.int8)],
                              domains=("com.microsoft",)))
    assert (counted.macs, counted.flops, counted.untracked) == (2240, 6880, {})


def test_instance_norm_scale_of_ones_and_bias_of_zeros_are_free():
    """X (2, 3, 4, 4): N = 96, R = 2 x 3 = 6. A real scale and bias: 6N + 4R + N + N = 576 + 24 + 192 = 792.
    The ones and zeros torch's exporters write for ``InstanceNorm2d(affine=False)`` (and inside ``GroupNorm``'s
    decomposition), as initializers or Constant nodes: 6N + 4R = 600; ones with a real bias: 696."""
    def counted(scale, bias, as_constants=False):
        stored = [numpy_helper.from_array(np.array(scale, np.float32), "s"), numpy_helper.from_array(np.array(bias, np.float32), "b")]
        nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])]
        if as_constants:
            nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in stored] + nodes
        return count_ops(model(nodes, [("x", F, [2, 3, 4, 4])], [("y", F, None)], [] if as_constants else stored)).flops

    assert counted([0.5, 2.0, 1.5], [0.1, 0.0, -0.2]) == 792
    assert counted([1.0, 1.0, 1.0], [0.0, 0.0, 0.0]) == 600
    assert counted([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], as_constants=True) == 600
    assert counted([1.0, 1.0, 1.0], [0.1, 0.0, -0.2]) == 696
    # the same ones passed through QuantizeLinear -> DequantizeLinear (onnxruntime's static QDQ form): 600
    s, b = numpy_helper.from_array(np.ones(3, np.float32), "s"), numpy_helper.from_array(np.zeros(3, np.float32), "b")
    scale, zero = numpy_helper.from_array(np.array(1 / 127, np.float32), "qs"), numpy_helper.from_array(np.array(0, np.int8), "qz")
    nodes = [helper.make_node("QuantizeLinear", ["s", "qs", "qz"], ["sq"]), helper.make_node("DequantizeLinear", ["sq", "qs", "qz"], ["sd"]),
             helper.make_node("InstanceNormalization", ["x", "sd", "b"], ["y"])]
    assert count_ops(model(nodes, [("x", F, [2, 3, 4, 4])], [("y", F, None)], [s, b, scale, zero])).flops == 600


def test_gate_math_is_the_torch_tables():
    torch_rnn = pytest.importorskip("deeplite_like.backends.torch.counting.formulas.rnn")
    from deeplite_like.backends.onnx.formulas import GATE_MATH

    assert GATE_MATH["LSTM"] == torch_rnn.GATE_MATH[torch_rnn.LSTM]
    assert GATE_MATH["GRU"] == torch_rnn.GATE_MATH[torch_rnn.GRU]
    assert GATE_MATH["RNN"] == torch_rnn.GATE_MATH[torch_rnn.RNN_TANH]


def _scalar(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def test_quantized_ops_count_as_their_float_twins():
    u8, i8 = np.uint8, np.int8
    # The float twin: Conv X (1, 2, 6, 6), W (4, 2, 3, 3), bias -> Y (1, 4, 4, 4): 64 outputs.
    # MACs = 64 x 2 x 9 = 1152; FLOPs = 2304 + 64 = 2368.
    qparams = [_scalar("xs", 0.1, np.float32), _scalar("xz", 0, u8), _scalar("ws", 0.1, np.float32),
               _scalar("wz", 0, u8), _scalar("ys", 0.1, np.float32), _scalar("yz", 0, u8)]
    qconv = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"])
    counted = count_ops(model([qconv], [("x", TensorProto.UINT8, [1, 2, 6, 6])], [("y", TensorProto.UINT8, None)],
                              qparams + [weight("w", (4, 2, 3, 3), u8), weight("b", (4,), np.int32)]))
    assert (counted.macs, counted.flops) == (1152, 2368)
    # ConvInteger: no bias input (inputs 2, 3 are zero points): 1152 MACs, 2304 FLOPs.
    conv_int = helper.make_node("ConvInteger", ["x", "w"], ["y"])
    counted = count_ops(model([conv_int], [("x", TensorProto.UINT8, [1, 2, 6, 6])], [("y", TensorProto.INT32, None)],
                              [weight("w", (4, 2, 3, 3), u8)]))
    assert (counted.macs, counted.flops) == (1152, 2304)
    # QLinearMatMul and MatMulInteger (3, 5) x (5, 4): 3 x 4 x 5 = 60 MACs each.
    qmm = helper.make_node("QLinearMatMul", ["a", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"])
    counted = count_ops(model([qmm], [("a", TensorProto.UINT8, [3, 5])], [("y", TensorProto.UINT8, None)],
                              qparams + [weight("w", (5, 4), u8)]))
    assert counted.macs == 60
    mmi = helper.make_node("MatMulInteger", ["a", "w"], ["y"])
    counted = count_ops(model([mmi], [("a", TensorProto.UINT8, [3, 5])], [("y", TensorProto.INT32, None)],
                              [weight("w", (5, 4), u8)]))
    assert counted.macs == 60
    # QDQ: int8 weight -> DequantizeLinear -> Conv -> QuantizeLinear: the Conv as itself (1152, 2368),
    # the quantize/dequantize edges free.
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"]),
             helper.make_node("Conv", ["x", "w", "b"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz8"], ["q"])]
    counted = count_ops(model(nodes, [("x", F, [1, 2, 6, 6])], [("q", TensorProto.INT8, None)],
                              [weight("wq", (4, 2, 3, 3), i8), _scalar("ws", 0.1, np.float32), weight("b", (4,)),
                               _scalar("ys", 0.1, np.float32), _scalar("yz8", 0, i8)]))
    assert (counted.macs, counted.flops) == (1152, 2368)
    assert counted.untracked == {}


def test_per_element_families():
    # One input X (2, 3, 4, 4): N = 96 elements, C = 3 channels.
    shape = [2, 3, 4, 4]
    cases = {
        "Relu": ({}, [], 96),  # 1 per element
        "Sigmoid": ({}, [], 4 * 96),  # 4 per element
        "Softmax": ({}, [], 5 * 96),  # max, sub, exp, sum, div
        # running statistics: 2N + 2C + N (scale) + N (bias) = 192 + 6 + 192 = 390
        "BatchNormalization": ({}, [weight("s", (3,)), weight("bb", (3,)), weight("m", (3,)), weight("v", (3,))], 390),
        # rows R = 2 x 3 x 4 = 24: 6N + 4R + N + N = 576 + 96 + 96 + 96 = 864
        "LayerNormalization": ({"axis": -1}, [weight("s", (4,)), weight("bb", (4,))], 864),
        # kernel 2x2 stride 2 -> 24 outputs: max 24 x 4 = 96; average 24 x (4 + 1) = 120
        "MaxPool": ({"kernel_shape": [2, 2], "strides": [2, 2]}, [], 96),
        "AveragePool": ({"kernel_shape": [2, 2], "strides": [2, 2]}, [], 120),
        # 6 outputs, each a 16-element window: 6 x (16 + 1) = 102
        "GlobalAveragePool": ({}, [], 102),
        # mean over axes 2, 3: N + R = 96 + 6 = 102
        "ReduceMean": ({}, [numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "axes")], 102),
        # GELU erf form 5 per element, tanh form 9
        "Gelu": ({}, [], 5 * 96),
    }
    for op, (attributes, extras, expected) in cases.items():
        names = ["x"] + [t.name for t in extras]
        node = helper.make_node(op, names, ["y"], **attributes)
        counted = count_ops(model([node], [("x", F, shape)], [("y", F, None)], extras))
        assert (op, counted.macs, counted.flops) == (op, 0, expected)
    tanh_gelu = helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")
    assert count_ops(model([tanh_gelu], [("x", F, shape)], [("y", F, None)])).flops == 9 * 96
    # An integer Add costs 0: only floating-point outputs count.
    add = helper.make_node("Add", ["x", "x"], ["y"])
    assert count_ops(model([add], [("x", TensorProto.INT64, shape)], [("y", TensorProto.INT64, None)])).flops == 0
    # Resize bilinear 4x4 -> 8x8 per map: 2 resized axes, 7 FLOPs per output: 2 x 3 x 64 x 7 = 2688.
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "sc")
    resize = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear")
    assert count_ops(model([resize], [("x", F, shape)], [("y", F, None)], [scales])).flops == 2688


def test_free_ops_and_untracked_ops_are_named():
    target = numpy_helper.from_array(np.array([2, 48], dtype=np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("Det", ["sq"], ["d"]),
             helper.make_node("MyOp", ["t"], ["z"], domain="custom.ops")]
    proto = model(nodes, [("x", F, [2, 3, 4, 4]), ("sq", F, [3, 3])], [("d", F, None), ("z", F, None)], [target],
                  domains=["custom.ops"])
    with pytest.warns(UntrackedOnnxOpWarning, match=r"Det \(1 node\).*custom\.ops\.MyOp \(1 node\)|"
                                                    r"custom\.ops\.MyOp \(1 node\).*Det \(1 node\)"):
        counted = count_ops(proto)
    assert counted.untracked == {"Det": 1, "custom.ops.MyOp": 1}
    assert counted.by_operator["Reshape"].calls == 1 and counted.by_operator["Reshape"].flops == 0
    assert (counted.macs, counted.flops) == (0, 0)


def test_module_names_from_export_scopes():
    assert module_of("/features/features.0/Conv") == "features.0"
    assert module_of("/layers/layers.0/conv1/Conv") == "layers.0.conv1"
    assert module_of("/encoder/layers.0/self_attn/MatMul_1") == "encoder.layers.0.self_attn"
    assert module_of("/Flatten") == ""
    assert module_of("Identity_0") == ""
    assert module_of("model/conv1/Conv2D") == "model.conv1"
    # by_module nests: the parent holds its children's MACs.
    nodes = [helper.make_node("MatMul", ["a", "w1"], ["h"], name="/block/fc1/MatMul"),
             helper.make_node("MatMul", ["h", "w2"], ["y"], name="/block/fc2/MatMul")]
    # fc1: 2 x 8 outputs x K 4 = 64 MACs; fc2: 2 x 3 x K 8 = 48 MACs; block = 112.
    counted = count_ops(model(nodes, [("a", F, [2, 4])], [("y", F, None)],
                              [weight("w1", (4, 8)), weight("w2", (8, 3))]))
    assert {k: v.macs for k, v in counted.by_module.items()} == {"": 112, "block": 112, "block.fc1": 64,
                                                                  "block.fc2": 48}


def _symbolic_matmul():
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"], name="/fc/MatMul")], "g",
                              [helper.make_tensor_value_info("a", F, ["batch", "seq", 4])],
                              [helper.make_tensor_value_info("y", F, None)], [weight("w", (4, 3))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_symbolic_dimensions_bound_by_name_or_shape():
    proto = _symbolic_matmul()
    before = proto.SerializeToString()
    # batch 8 x seq 16 rows x N 3 outputs x K 4 = 1536 MACs, bound by name or by a shape.
    assert count_ops(proto, batch=8, seq=16).macs == 1536
    assert count_ops(proto, (8, 16, 4)).macs == 1536
    assert count_ops(proto, {"a": np.zeros((8, 16, 4), np.float32)}).macs == 1536
    assert proto.SerializeToString() == before  # the caller's proto is never edited
    with pytest.raises(ValueError, match=r"input 'a': dimension 1 \('seq'\) is not bound"):
        count_ops(proto, batch=8)
    with pytest.raises(ValueError, match=r"\['sequence'\] are not symbolic dimensions.*\['batch', 'seq'\]"):
        count_ops(proto, batch=8, seq=2, sequence=3)
    with pytest.raises(ValueError, match="dimension 2 is fixed at 4"):
        count_ops(proto, (8, 16, 5))


def test_shape_inference_failure_names_the_node():
    bad = helper.make_node("MatMul", ["a", "w"], ["y"], name="/head/MatMul")
    with pytest.raises(ValueError, match=r"shape inference failed at node '/head/MatMul' \(MatMul\)"):
        count_ops(model([bad], [("a", F, [2, 3])], [("y", F, None)], [weight("w", (4, 5))]))
    with pytest.raises(ValueError, match="not an ONNX model"):
        count_ops(b"\x00\x01 definitely not protobuf \xff")
    with pytest.raises(ValueError, match=r"not an ONNX model \(the bytes given\): it has no IR version or no graph"):
        count_ops(b"")  # protobuf decodes empty bytes into an empty message
    with pytest.raises(TypeError, match="path, bytes or onnx.ModelProto"):
        count_ops(3.5)


def test_parameters_and_size_at_stored_dtype_shared_once(tmp_path):
    # w8: int8 (4, 2, 3, 3) = 72 params, 72 bytes; b: int32 bias of a quantized conv, 4 params, 16 bytes;
    # h: fp16 (10,) read by two nodes = 10 params, 20 bytes, once; shape: int64 index data, not a param.
    nodes = [helper.make_node("DequantizeLinear", ["w8", "ws"], ["w"]),
             helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Reshape", ["c", "shape"], ["r"]),
             helper.make_node("Cast", ["h"], ["hf"], to=F),
             helper.make_node("Cast", ["h"], ["hf2"], to=F),  # a second reader of the same initializer
             helper.make_node("Add", ["hf", "hf2"], ["y"])]
    inits = [weight("w8", (4, 2, 3, 3), np.int8), _scalar("ws", 0.5, np.float32), weight("h", (10,), np.float16),
             numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape")]
    proto = model(nodes, [("x", F, [1, 2, 5, 5])], [("r", F, None), ("y", F, None)], inits)
    stats = initializer_stats(proto)
    # params 72 + 1 (scale) + 10 = 83; bytes 72 + 4 + 20 = 96; 2 index elements left out.
    assert (stats.params, stats.bytes, stats.index_data) == (83, 96, 2)
    assert stats.by_dtype == {"int8": {"params": 72, "bytes": 72}, "float": {"params": 1, "bytes": 4},
                              "float16": {"params": 10, "bytes": 20}}


def test_external_data_is_read_only_beside_the_model(tmp_path):
    from onnx.external_data_helper import convert_model_to_external_data

    node = helper.make_node("MatMul", ["a", "w"], ["y"])
    proto = model([node], [("a", F, [2, 64])], [("y", F, None)], [weight("w", (64, 32))])
    convert_model_to_external_data(proto, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    path = tmp_path / "m.onnx"
    onnx.save_model(proto, str(path))
    # 2 x 32 outputs x K 64 = 4096 MACs, read through the file beside the model.
    assert count_ops(path).macs == 4096
    with pytest.raises(ValueError, match="external data is read only from beside a model file"):
        count_ops(path.read_bytes())
    evil = onnx.load_model(str(path), load_external_data=False)
    for entry in evil.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../secret.bin"
    evil_path = tmp_path / "evil.onnx"
    onnx.save_model(evil, str(evil_path))
    with pytest.raises(ValueError, match=r"initializer 'w'.*'\.\./secret\.bin'.*no absolute path, no '\.\.'"):
        count_ops(evil_path)
    for entry in evil.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = str(tmp_path / "weights.bin")  # absolute, even though it is the right file
    onnx.save_model(evil, str(evil_path))
    with pytest.raises(ValueError, match=r"initializer 'w'.*must be a relative path"):
        count_ops(evil_path)


def test_import_deeplite_like_does_not_import_onnx():
    code = ("import sys, deeplite_like, deeplite_like.backends.onnx as b; "
            "print(any(m == 'onnx' or m.startswith(('onnx.', 'onnxruntime')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_onnx_names_the_extra():
    code = ("import sys; sys.modules['onnx'] = None\n"
            "try:\n    from deeplite_like.backends.onnx import count_ops\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'deeplite-like[onnx]'" in out.stdout


def test_contrib_ops_count_as_their_float_twins():
    ms = ["com.microsoft"]
    u8 = np.uint8
    qparams = [_scalar("xs", 0.1, np.float32), _scalar("xz", 0, u8), _scalar("ws", 0.1, np.float32),
               _scalar("wz", 0, u8), _scalar("ys", 0.1, np.float32), _scalar("yz", 0, u8)]
    # QGemm A (3, 5) x B^T (4, 5) + int32 C: Gemm's twin, 60 MACs, FLOPs 120 + 12 (C) = 132. onnx has no
    # schema for QGemm: its output shape comes from one ONNX Runtime run.
    qgemm = helper.make_node("QGemm", ["a", "xs", "xz", "w", "ws", "wz", "c", "ys", "yz"], ["y"], domain=ms[0],
                             transB=1)
    counted = count_ops(model([qgemm], [("a", TensorProto.UINT8, [3, 5])], [("y", TensorProto.UINT8, None)],
                              qparams + [weight("w", (4, 5), u8), weight("c", (4,), np.int32)], domains=ms))
    assert (counted.macs, counted.flops) == (60, 132)
    # FusedConv X (1, 2, 6, 6), W (4, 2, 3, 3), bias, Relu: 64 outputs; 1152 MACs;
    # FLOPs = 2304 + 64 (bias) + 64 (relu, 1 each) = 2432.
    fused = helper.make_node("FusedConv", ["x", "w", "b"], ["y"], domain=ms[0], activation="Relu")
    counted = count_ops(model([fused], [("x", F, [1, 2, 6, 6])], [("y", F, None)],
                              [weight("w", (4, 2, 3, 3)), weight("b", (4,))], domains=ms))
    assert (counted.macs, counted.flops) == (1152, 2432)
    # FusedMatMul with transA: A (5, 3) read as (3, 5), B (5, 4): K = 5, 12 outputs -> 60 MACs;
    # alpha 2: + 12 FLOPs -> 132.
    fmm = helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=ms[0], transA=1, alpha=2.0)
    counted = count_ops(model([fmm], [("a", F, [5, 3])], [("y", F, None)], [weight("b", (5, 4))], domains=ms))
    assert (counted.macs, counted.flops) == (60, 132)
    # QLinearAdd on uint8 (2, 8): the float Add's 1 per output = 16, whatever the integer dtype.
    qadd = helper.make_node("QLinearAdd", ["a", "xs", "xz", "a", "xs", "xz", "ys", "yz"], ["y"], domain=ms[0])
    counted = count_ops(model([qadd], [("a", TensorProto.UINT8, [2, 8])], [("y", TensorProto.UINT8, None)],
                              qparams, domains=ms))
    assert (counted.macs, counted.flops) == (0, 16)


def test_unknown_shapes_are_named_where_a_formula_needs_them():
    # A custom op ONNX Runtime cannot run (no library loaded): its output shape stays unknown; it is
    # untracked, and the MatMul after it, which needs that shape, names itself and the reason.
    nodes = [helper.make_node("MyOp", ["x"], ["z"], domain="custom.ops"),
             helper.make_node("MatMul", ["z", "w"], ["y"], name="/head/MatMul")]
    proto = model(nodes, [("x", F, [2, 4])], [("y", F, None)], [weight("w", (4, 3))], domains=["custom.ops"])
    with pytest.raises(ValueError, match=r"node '/head/MatMul' \(MatMul\): the shape of its input 0 \('z'\) is "
                                         r"unknown after shape inference \(onnx could not infer.*ONNX Runtime"):
        count_ops(proto)


def test_matmul_nbits_counts_the_float_matmul_and_its_packed_weights():
    # MatMulNBits (4-bit, block 32): A (2, 32), K 32, N 8 -> 2 x 8 x 32 = 512 MACs.
    # Weights: a uint8 blob (N 8, 1 block, 16 bytes) holds 8 x 32 = 256 4-bit weights in 128 bytes;
    # scales: 8 float32 = 8 params, 32 bytes. Total 264 params, 160 bytes.
    node = helper.make_node("MatMulNBits", ["a", "bq", "sc"], ["y"], domain="com.microsoft", K=32, N=8, bits=4,
                            block_size=32)
    proto = model([node], [("a", F, [2, 32])], [("y", F, None)],
                  [weight("bq", (8, 1, 16), np.uint8), weight("sc", (8,))], domains=["com.microsoft"])
    assert count_ops(proto).macs == 512
    stats = initializer_stats(proto)
    assert (stats.params, stats.bytes) == (264, 160)


def test_transformer_fusion_ops_count_as_the_ops_they_replace():
    """onnxruntime's transformer fusions (com.microsoft), each on a graph ONNX Runtime runs for its shapes;
    the BERT graph they make together counts the live BertModel (tests/onnx/test_onnx_real_exports.py)."""
    ms = ["com.microsoft"]
    # MultiHeadAttention, projections done before it: query (2, 5, 8), key / value (2, 7, 8), 2 heads, a
    # bias of 24. MACs Q K^T + P V = 2 x 5 x 7 x (8 + 8) = 1,120. FLOPs 2,240 + bias 2 x 5 x 8 + 2 x 7 x 16 = 304
    # + q and k scaled 2 x (5 + 7) x 8 = 192 + softmax 5 x 2 x 2 x 5 x 7 = 700 (no mask): 3,436.
    mha = helper.make_node("MultiHeadAttention", ["q", "k", "v", "b"], ["y"], domain=ms[0], num_heads=2)
    counted = count_ops(model([mha], [("q", F, [2, 5, 8]), ("k", F, [2, 7, 8]), ("v", F, [2, 7, 8])], [("y", F, None)],
                              [weight("b", (24,))], domains=ms))
    assert (counted.macs, counted.flops, counted.untracked) == (1_120, 3_436, {})
    # The same attention with key / value as (B, N, L, H) = (2, 2, 7, 4), no bias: 1,120 MACs, FLOPs
    # 2,240 + 192 + 700 = 3,132; packed K/V (B, L, N, 2, H) the same. Packed Q/K/V (2, 5, 2, 3, 4): L = S = 5,
    # Dq = Dv = 2 x 4: 2 x 5 x 5 x 16 = 800 MACs, FLOPs 1,600 + 2 x (5 + 5) x 8 + 5 x 2 x 2 x 25 = 2,260.
    # (ONNX Runtime's CPU kernel runs no packed form: the output shape is declared, as a fusion tool writes it.)
    for names, inputs, expected in [(["q", "k", "v"], [("q", F, [2, 5, 8]), ("k", F, [2, 2, 7, 4]), ("v", F, [2, 2, 7, 4])], (1_120, 3_132)),
                                    (["q", "k"], [("q", F, [2, 5, 8]), ("k", F, [2, 7, 2, 2, 4])], (1_120, 3_132)),
                                    (["q"], [("q", F, [2, 5, 2, 3, 4])], (800, 2_260))]:
        node = helper.make_node("MultiHeadAttention", names, ["y"], domain=ms[0], num_heads=2)
        counted = count_ops(model([node], inputs, [("y", F, [2, 5, 8])], domains=ms))
        assert (counted.macs, counted.flops) == expected, names
    # Attention (GPT-2 style: unidirectional, a past of 3 tokens) on x (2, 5, 8), weights (8, 24), bias 24,
    # past (2, B 2, N 2, 3, H 4): keys L = 5 + 3 = 8. MACs projection 10 x 8 x 24 = 1,920 + 2 x 5 x 8 x (8 + 8)
    # = 1,280: 3,200. FLOPs 6,400 + bias 10 x 24 = 240 + scale 2 x (5 + 8) x 8 = 208 + (causal mask 1 +
    # softmax 5) x 2 x 2 x 5 x 8 = 960: 7,808.
    node = helper.make_node("Attention", ["x", "w", "b", "", "past"], ["y", "present"], domain=ms[0], num_heads=2,
                            unidirectional=1)
    counted = count_ops(model([node], [("x", F, [2, 5, 8]), ("past", F, [2, 2, 2, 3, 4])], [("y", F, None), ("present", F, None)],
                              [weight("w", (8, 24)), weight("b", (24,))], domains=ms))
    assert (counted.macs, counted.flops) == (3_200, 7_808)
    # FastGelu with a bias over (2, 3, 4) = 24: (bias 1 + tanh GELU 9) x 24 = 240; BiasGelu (erf) (1 + 5) x 24
    # = 144; QuickGelu 6 x 24 = 144.
    nodes = [helper.make_node("FastGelu", ["x", "b4"], ["f"], domain=ms[0]),
             helper.make_node("BiasGelu", ["f", "b4"], ["g"], domain=ms[0]),
             helper.make_node("QuickGelu", ["g"], ["y"], domain=ms[0], alpha=1.702)]
    counted = count_ops(model(nodes, [("x", F, [2, 3, 4])], [("y", F, None)], [weight("b4", (4,))], domains=ms))
    assert {k: v.flops for k, v in counted.by_operator.items()} == {
        "com.microsoft.FastGelu": 240, "com.microsoft.BiasGelu": 144, "com.microsoft.QuickGelu": 144}
    # SkipSimplifiedLayerNormalization (input, skip, gamma, bias) over (2, 3, 4): N 24, R 6: skip add 24 +
    # bias 24 + RMS norm 3N + 3R + N = 114: 162.
    node = helper.make_node("SkipSimplifiedLayerNormalization", ["x", "x", "b4", "b4"], ["y"], domain=ms[0])
    counted = count_ops(model([node], [("x", F, [2, 3, 4])], [("y", F, None)], [weight("b4", (4,))], domains=ms))
    assert (counted.flops, counted.untracked) == (162, {})
    # the layer norms onnxruntime's fusion writes outside the standard schema (output shapes declared, as a
    # fused file declares them): com.microsoft LayerNormalization over (2, 3, 4) with a bias: 6N + 4R + N + N
    # = 8 x 24 + 4 x 6 = 216; SimplifiedLayerNormalization (the default domain's, RMS): 3N + 3R + N = 114
    for domain, op, expected in [("com.microsoft", "LayerNormalization", 216), ("", "SimplifiedLayerNormalization", 114)]:
        inputs = ["x", "b4", "b4"] if op == "LayerNormalization" else ["x", "b4"]
        node = helper.make_node(op, inputs, ["y"], domain=domain, axis=-1)
        proto = model([node], [("x", F, [2, 3, 4])], [("y", F, [2, 3, 4])], [weight("b4", (4,))],
                      domains=[domain] if domain else [])
        assert count_ops(proto).flops == expected, op


def test_zoo_era_image_scaler_and_upsample_bilinear():
    # ImageScaler (opset 8, Tiny YOLOv2's first op) over (1, 3, 4, 4) = 48: scale and bias, 2 x 48 = 96.
    scaler = helper.make_node("ImageScaler", ["x"], ["y"], scale=0.5, bias=[1.0, 2.0, 3.0])
    counted = count_ops(model([scaler], [("x", F, [1, 3, 4, 4])], [("y", F, None)], opset=8))
    assert (counted.flops, counted.untracked) == (96, {})
    # Resize "linear" on 2 axes (4x4 -> 8x8, 3 channels = 192 outputs): bilinear, 7 per output = 1,344;
    # an unknown mode is refused by name rather than priced as cubic.
    resize = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
    counted = count_ops(model([resize], [("x", F, [1, 3, 4, 4])], [("y", F, None)], [scales]))
    assert counted.flops == 1_344
    bad = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="area")
    with pytest.raises(ValueError, match="resize mode 'area'"):
        count_ops(model([bad], [("x", F, [1, 3, 4, 4])], [("y", F, [1, 3, 8, 8])], [scales]))


def test_onnxruntime_layout_ops_of_saved_optimised_graphs():
    """onnxruntime's ORT_ENABLE_ALL graphs saved to a file carry its CPU layouts (shapes declared here, as
    the saved file declares them; the whole-model check is in tests/onnx/test_onnx_real_exports.py)."""
    ms = "com.microsoft.nchwc"
    nodes = [helper.make_node("ReorderInput", ["x"], ["xb"], domain=ms),
             helper.make_node("Conv", ["xb", "w", "b", "xb"], ["c"], domain=ms, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              activation="Relu"),
             helper.make_node("MaxPool", ["c"], ["p"], domain=ms, kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("AveragePool", ["p"], ["a"], domain=ms, kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["a"], ["g"], domain=ms),
             helper.make_node("ReorderOutput", ["g"], ["y"], domain=ms, channels=8)]
    proto = model(nodes, [("x", F, [1, 8, 8, 8])], [("y", F, [1, 8, 1, 1])],
                  [weight("w", (8, 8, 3, 3)), weight("b", (8,))], domains=[ms])
    proto.graph.value_info.extend(helper.make_tensor_value_info(n, F, s) for n, s in
                                  [("xb", [1, 8, 8, 8]), ("c", [1, 8, 8, 8]), ("p", [1, 8, 4, 4]), ("a", [1, 8, 2, 2]),
                                   ("g", [1, 8, 1, 1])])
    counted = count_ops(proto)
    # Conv 8 -> 8, 3 x 3 on 8 x 8: 512 outputs x 72 = 36,864 MACs; FLOPs 73,728 + bias 512 + the fused Sum
    # input (a residual add) 512 + Relu 512 = 75,264. MaxPool 2 x 2: 128 outputs x 4 = 512; AveragePool:
    # 32 x 5 = 160; GlobalAveragePool: 8 x (4 + 1) = 40. Reorders free.
    assert {k: (v.macs, v.flops) for k, v in counted.by_operator.items()} == {
        f"{ms}.ReorderInput": (0, 0), f"{ms}.Conv": (36_864, 75_264), f"{ms}.MaxPool": (0, 512),
        f"{ms}.AveragePool": (0, 160), f"{ms}.GlobalAveragePool": (0, 40), f"{ms}.ReorderOutput": (0, 0)}
    # the channels-last int8 max pool: (1, 4, 4, 8) -> (1, 2, 2, 8), 2 x 2 windows: 32 outputs x 4 = 128
    pool = helper.make_node("NhwcMaxPool", ["x"], ["y"], domain="com.microsoft", kernel_shape=[2, 2], strides=[2, 2])
    proto = model([pool], [("x", TensorProto.INT8, [1, 4, 4, 8])], [("y", TensorProto.INT8, [1, 2, 2, 8])],
                  domains=["com.microsoft"])
    assert count_ops(proto).flops == 128


def _positive_rows_model():
    """x [batch, 16] -> rows whose sum is > 0 (ReduceSum, Greater, NonZero, Squeeze, Gather) -> MatMul by a
    16 x 8 weight: the MatMul's rows, n, depend on the values of x."""
    nodes = [helper.make_node("ReduceSum", ["x", "axis1"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["mask"]),
             helper.make_node("NonZero", ["mask"], ["nz"], name="rows"),
             helper.make_node("Squeeze", ["nz", "axis0"], ["idx"]),
             helper.make_node("Gather", ["x", "idx"], ["sel"], axis=0),
             helper.make_node("MatMul", ["sel", "w"], ["y"])]
    weights = [numpy_helper.from_array(np.ones((16, 8), np.float32), "w"),
               numpy_helper.from_array(np.array([1], np.int64), "axis1"),
               numpy_helper.from_array(np.array([0], np.int64), "axis0"),
               numpy_helper.from_array(np.array(0, np.float32), "zero")]
    graph = helper.make_graph(nodes, "positive_rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_shapes_that_depend_on_the_data_are_those_of_the_arrays_given():
    pytest.importorskip("onnxruntime")
    from deeplite_like.backends.onnx import SeededShapesWarning

    model = _positive_rows_model()
    x = np.zeros((4, 16), np.float32)
    x[[0, 2, 3]] = 1.0  # three rows with a positive sum: the MatMul is 3 x 16 x 8 = 384 MACs
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # arrays given: no warning
        assert count_ops(model, {"x": x}).macs == 3 * 16 * 8
    x[:] = 1.0  # all four: 4 x 16 x 8 = 512
    assert count_ops(model, {"x": x}).macs == 512
    # shapes only: read from a run on seeded inputs (deterministic), and said
    with pytest.warns(SeededShapesWarning, match=r"NonZero 'rows' depend on the input values.*pass the real inputs"):
        first = count_ops(model, batch=4)
    with pytest.warns(SeededShapesWarning):
        assert count_ops(model, batch=4).macs == first.macs and first.macs % (16 * 8) == 0
