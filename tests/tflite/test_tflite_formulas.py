"""One op of each family, counted from a converted file; every expected number derived by hand."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # the session fixture converts a Keras model (seconds)


@pytest.fixture(scope="module")
def ops(families):
    from deeplite_like.backends.tflite import count_ops

    counted = count_ops(families)
    return counted, {name: (s.macs, s.flops) for name, s in counted.by_operator.items()}


def test_contractions(ops):
    _, by_op = ops
    # CONV_2D 4@3x3 same on 8x8x3, bias, fused RELU6 (Keras activation='relu6' is fused by the converter):
    # out 1x8x8x4 = 256; MACs 256 x 3x3x3 = 6,912; FLOPs 2 x 6,912 + 256 (bias) + 2 x 256 (relu6, a clip) = 14,592
    assert by_op["CONV_2D"] == (6_912, 14_592)
    # DEPTHWISE_CONV_2D 3x3 same on 8x8x4: out 256; MACs 256 x 9 = 2,304; FLOPs 4,608 + 256 (bias) = 4,864
    assert by_op["DEPTHWISE_CONV_2D"] == (2_304, 4_864)
    # TRANSPOSE_CONV 2@2x2 stride 2 on 4x4x4: each of the 64 input elements meets 2 x 2x2 weights: MACs 512;
    # the converter drops Keras' all-zero bias (no 4th input), so FLOPs 2 x 512 = 1,024
    assert by_op["TRANSPOSE_CONV"] == (512, 1_024)
    # FULLY_CONNECTED 2 -> 5 (zero bias dropped likewise): MACs 5 x 2 = 10, FLOPs 20
    assert by_op["FULLY_CONNECTED"] == (10, 20)
    # BATCH_MATMUL (Dot axes=2 of [1,16,2] with itself, adj_y): out 16x16 = 256 x K 2 = 512 MACs, FLOPs 1,024
    assert by_op["BATCH_MATMUL"] == (512, 1_024)


def test_elementwise_activations_pools_reductions(ops):
    _, by_op = ops
    assert by_op["ADD"] == (0, 256)  # 1 per output, 8x8x4
    assert by_op["MUL"] == (0, 256)
    assert by_op["AVERAGE_POOL_2D"] == (0, 64 * (4 + 1))  # out 4x4x4 = 64, window 2x2 sums + a divide
    assert by_op["LOGISTIC"] == (0, 4 * 128)  # 8x8x2 = 128 outputs, sigmoid 4 each
    assert by_op["TANH"] == (0, 128)
    assert by_op["HARD_SWISH"] == (0, 5 * 128)
    assert by_op["MAX_POOL_2D"] == (0, 32 * 4)  # out 4x4x2 = 32, window 4
    assert by_op["MEAN"] == (0, 128 + 2)  # GlobalAveragePooling2D -> MEAN: N 128 sums + R 2 divides
    assert by_op["SOFTMAX"] == (0, 5 * 5)  # 5 per input element


def test_data_movement_is_free_and_listed(ops):
    counted, by_op = ops
    assert by_op["RESHAPE"] == (0, 0) and counted.by_operator["RESHAPE"].calls == 2  # Reshape and Flatten
    assert by_op["CONCATENATION"] == (0, 0)
    assert counted.untracked == {}
    # total: the rows above, summed by hand
    assert counted.macs == 6_912 + 2_304 + 512 + 10 + 512
    assert counted.flops == (14_592 + 4_864 + 1_024 + 20 + 1_024 + 256 + 256 + 320 + 512 + 128 + 640 + 128 + 130 + 25)


def test_modules_come_from_the_tensor_scopes(ops):
    counted, _ = ops
    # CONV_2D's output is named functional_1/conv_1/Relu6;functional_1/conv_1/convolution -> module functional_1.conv_1
    conv = [m for m, by in counted.module_ops.items() if "CONV_2D" in by]
    assert len(conv) == 1 and conv[0].split(".")[-1] == "conv_1"  # the model's own scope name is Keras'
    assert counted.module_ops[conv[0]]["CONV_2D"].macs == 6_912
    assert counted.by_module[""].macs == counted.macs


def test_a_custom_op_is_named_untracked_never_silently_zero(families):
    """The file's ADD re-coded as a custom op (through the schema's object API, packed again) is untracked."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    from deeplite_like.backends.tflite import UntrackedTFLiteOpWarning, count_ops

    model = schema.ModelT.InitFromPackedBuf(bytearray(families), 0)
    for code in model.operatorCodes:
        if max(code.builtinCode, code.deprecatedBuiltinCode) == schema.BuiltinOperator.ADD:
            code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
            code.customCode = "MyAdd"
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    with pytest.warns(UntrackedTFLiteOpWarning, match=r"CUSTOM:MyAdd \(1 op\)"):
        counted = count_ops(bytes(builder.Output()))
    assert counted.untracked == {"CUSTOM:MyAdd": 1}
    assert counted.flops == count_ops(families).flops - 256  # the ADD's 256, no longer counted


def test_a_file_from_an_old_converter_reads_its_codes_from_the_deprecated_field(families):
    """Converters before schema 3a wrote only ``deprecated_builtin_code`` (``builtin_code`` left 0, which is
    ADD): the same file re-coded that way, one op also re-coded as a custom op, counts the same."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    from deeplite_like.backends.tflite import UntrackedTFLiteOpWarning, count_ops

    model = schema.ModelT.InitFromPackedBuf(bytearray(families), 0)
    for code in model.operatorCodes:
        if max(code.builtinCode, code.deprecatedBuiltinCode) == schema.BuiltinOperator.MUL:
            code.deprecatedBuiltinCode, code.customCode = schema.BuiltinOperator.CUSTOM, "OldMul"
        code.deprecatedBuiltinCode, code.builtinCode = max(code.builtinCode, code.deprecatedBuiltinCode), 0
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    with pytest.warns(UntrackedTFLiteOpWarning, match=r"CUSTOM:OldMul \(1 op\)"):
        counted = count_ops(bytes(builder.Output()))
    new = count_ops(families)
    assert counted.untracked == {"CUSTOM:OldMul": 1}
    assert counted.macs == new.macs
    assert counted.flops == new.flops - 256  # the MUL's 8x8x4 = 256, now a custom op
    assert set(counted.by_operator) - {"CUSTOM:OldMul"} == set(new.by_operator) - {"MUL"}


def test_more_activations_and_conv3d(more_families):
    from deeplite_like.backends.tflite import count_ops

    by_op = {name: (s.macs, s.flops) for name, s in count_ops(more_families).by_operator.items()}
    # 4x4x2 = 32 elements each: GELU (erf form, Keras' default) 5, LEAKY_RELU 2, SUB 1, ELU 3 per output
    assert by_op["GELU"] == (0, 5 * 32) and by_op["LEAKY_RELU"] == (0, 2 * 32)
    assert by_op["SUB"] == (0, 32) and by_op["ELU"] == (0, 3 * 32)
    # CONV_3D 2@2x2x2 on [4, 4, 2, 1] (valid): out 3x3x1x2 = 18 x (2x2x2 x 1) = 144 MACs; the zero bias is
    # dropped by the converter, so FLOPs 2 x 144 = 288
    assert by_op["CONV_3D"] == (144, 288)
