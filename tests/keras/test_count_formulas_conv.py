"""Convolution, Dense, EinsumDense and Embedding formulas, each against a hand derivation.

Conventions (formulas/conv.py, core.py): MACs = output elements x taps x C_in/groups for a
convolution (input elements x taps x filters when transposed); a bias is 1 FLOP per output
element; FLOPs = 2 x MACs + the rest.
"""
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras.counting import UntrackedLayerWarning, count_ops  # noqa: E402
from tests.keras._count_helpers import count, layer_cost  # noqa: E402

L = keras.layers


@pytest.mark.parametrize("layer, shape, expected", [
    # out (2,6,6,4) = 288; MACs 288 * 3*3 * 3 = 7776; FLOPs 2*7776 + 288 (bias) = 15840
    (lambda: L.Conv2D(4, 3), (2, 8, 8, 3), (7776, 15840)),
    # + ReLU 1/output element: 15840 + 288 = 16128
    (lambda: L.Conv2D(4, 3, activation="relu"), (2, 8, 8, 3), (7776, 16128)),
    # 'same', no bias: out (1,5,5,4) = 100; MACs 100 * 9 * 2 = 1800; FLOPs 3600
    (lambda: L.Conv2D(4, 3, padding="same", use_bias=False), (1, 5, 5, 2), (1800, 3600)),
    # groups=3: out (1,3,3,6) = 54; C_in/groups = 1; MACs 54 * 9 * 1 = 486; FLOPs 972 + 54 = 1026
    (lambda: L.Conv2D(6, 3, groups=3), (1, 5, 5, 3), (486, 1026)),
    # dilation 2 (effective 5x5): out (1,3,3,2) = 18; MACs 18 * 9 * 1 = 162; FLOPs 324 + 18 = 342
    (lambda: L.Conv2D(2, 3, dilation_rate=2), (1, 7, 7, 1), (162, 342)),
    # stride 2 'same': out ceil(7/2) = 4 -> (1,4,4,2) = 32; MACs 32 * 9 = 288; FLOPs 576 + 32 = 608
    (lambda: L.Conv2D(2, 3, strides=2, padding="same"), (1, 7, 7, 1), (288, 608)),
    # out (2,4,3) = 24; MACs 24 * 2 * 4 = 192; FLOPs 384 + 24 = 408
    (lambda: L.Conv1D(3, 2), (2, 5, 4), (192, 408)),
    # causal pads (free), then a valid conv: out (2,5,3) = 30; MACs 30 * 2 * 4 = 240; FLOPs 480 + 30 = 510
    (lambda: L.Conv1D(3, 2, padding="causal"), (2, 5, 4), (240, 510)),
    # out (1,2,2,2,2) = 16; MACs 16 * 2*2*2 * 2 = 256; FLOPs 512 + 16 = 528
    (lambda: L.Conv3D(2, 2), (1, 3, 3, 3, 2), (256, 528)),
])
def test_regular_convolutions(layer, shape, expected):
    assert layer_cost(keras, layer(), shape) == expected


@pytest.mark.parametrize("layer, shape, expected", [
    # out (1,3,3,6) = 54 (depth_multiplier 2); MACs 54 * 9 = 486; FLOPs 972 + 54 = 1026
    # (the same as Conv2D(6, 3, groups=3) above, as torch's Conv2d(3, 6, 3, groups=3))
    (lambda: L.DepthwiseConv2D(3, depth_multiplier=2), (1, 5, 5, 3), (486, 1026)),
    # out (2,4,3) = 24; MACs 24 * 2 = 48; FLOPs 96 + 24 = 120
    (lambda: L.DepthwiseConv1D(2), (2, 5, 3), (48, 120)),
    # depthwise to (1,3,3,2): 18 * 9 = 162; pointwise to (1,3,3,4): 36 * 2 = 72; MACs 234;
    # FLOPs 468 + 36 (one bias, after the pointwise) = 504
    (lambda: L.SeparableConv2D(4, 3), (1, 5, 5, 2), (234, 504)),
    # depthwise (multiplier 2) to (1,4,4): 16 * 3 = 48; pointwise to (1,4,4): 16 * 4 = 64;
    # MACs 112; FLOPs 224 + 16 = 240
    (lambda: L.SeparableConv1D(4, 3, depth_multiplier=2), (1, 6, 2), (112, 240)),
])
def test_depthwise_and_separable_convolutions(layer, shape, expected):
    assert layer_cost(keras, layer(), shape) == expected


@pytest.mark.parametrize("layer, shape, expected", [
    # input (1,3,3,4) = 36 elements, each scattered over 3*3 taps into 2 filters:
    # MACs 36 * 9 * 2 = 648; out (1,7,7,2) = 98 -> FLOPs 1296 + 98 = 1394
    (lambda: L.Conv2DTranspose(2, 3, strides=2), (1, 3, 3, 4), (648, 1394)),
    # input 2*4*2 = 16; MACs 16 * 2 * 3 = 96; out (2,5,3) = 30; FLOPs 192 + 30 = 222
    (lambda: L.Conv1DTranspose(3, 2), (2, 4, 2), (96, 222)),
    # input 1*2*2*2*3 = 24; MACs 24 * 8 * 1 = 192; no bias: FLOPs 384
    (lambda: L.Conv3DTranspose(1, 2, use_bias=False), (1, 2, 2, 2, 3), (192, 384)),
])
def test_transposed_convolutions(layer, shape, expected):
    assert layer_cost(keras, layer(), shape) == expected


@pytest.mark.parametrize("layer, shape, expected", [
    # rows 2, 8 -> 4: MACs 2*8*4 = 64; FLOPs 128 + 8 (bias) = 136
    (lambda: L.Dense(4), (2, 8), (64, 136)),
    # rows 2*5 = 10 (the matmul applies to the last axis): MACs 10*6*3 = 180; no bias: FLOPs 360
    (lambda: L.Dense(3, use_bias=False), (2, 5, 6), (180, 360)),
    # 64 MACs; FLOPs 136 + softmax 5 * 8 = 176
    (lambda: L.Dense(4, activation="softmax"), (2, 8), (64, 176)),
    # 'abc,cd->abd' on (2,5,6) with kernel (6,4): 2*5*6*4 = 240 MACs; bias over d: 40 -> FLOPs 520
    (lambda: L.EinsumDense("abc,cd->abd", output_shape=(None, 4), bias_axes="d"), (2, 5, 6), (240, 520)),
    # 'ab,bcd->acd' kernel (6,2,3): 2*6*2*3 = 72 MACs; no bias; tanh 1 * (2*2*3 = 12) -> FLOPs 156
    (lambda: L.EinsumDense("ab,bcd->acd", output_shape=(2, 3), activation="tanh"), (2, 6), (72, 156)),
])
def test_dense_and_einsum_dense(layer, shape, expected):
    assert layer_cost(keras, layer(), shape) == expected


@pytest.mark.parametrize("name, per_element", [
    ("linear", 0), ("relu", 1), ("relu6", 2), ("leaky_relu", 2), ("elu", 3), ("selu", 4), ("celu", 4),
    ("sigmoid", 4), ("tanh", 1), ("silu", 5), ("swish", 5), ("gelu", 5), ("hard_sigmoid", 4), ("hard_silu", 5),
    ("hard_swish", 5), ("hard_tanh", 2), ("softplus", 3), ("softsign", 3), ("mish", 5), ("log_sigmoid", 5),
    ("exponential", 1), ("softmax", 5), ("log_softmax", 5), ("soft_shrink", 2), ("hard_shrink", 1),
    ("tanh_shrink", 2), ("sparse_plus", 3), ("squareplus", 5),
])
def test_fused_activations_cost_their_per_element_figure(name, per_element):
    # Dense(3) on (2,4): 24 MACs, FLOPs 48 + 6 (bias) + per_element * 6 outputs
    assert layer_cost(keras, L.Dense(3, activation=name), (2, 4)) == (24, 54 + 6 * per_element)


def test_a_user_activation_function_is_untracked_and_the_rest_still_counts():
    def my_act(x):
        return x * 2.0

    model = keras.Sequential([keras.Input((4,)), L.Dense(3, activation=my_act, name="fc")])
    with pytest.warns(UntrackedLayerWarning, match="activation:my_act"):
        result = count_ops(model, (2, 4))
    assert (result.macs, result.flops) == (24, 54)  # the matmul and bias, 0 for my_act
    assert result.untracked == {"activation:my_act": 1}


def test_an_activation_given_as_a_layer_is_counted_as_its_own_call():
    # Dense(3, activation=ReLU layer): 24 MACs, 48 + 6 bias; the ReLU layer runs inside Dense
    # as a recorded call of its own: + 6 FLOPs, attributed to it.
    relu = L.ReLU(name="relu_layer")
    model = keras.Sequential([keras.Input((4,)), L.Dense(3, activation=relu, name="fc")])
    result = count(model, (2, 4))
    assert (result.macs, result.flops) == (24, 60)
    assert result.by_operator["ReLU"].flops == 6 and result.by_operator["Dense"].flops == 54


def test_embedding_is_a_free_look_up():
    # Embedding(10, 4) on (2, 5) int ids: a gather, 0 FLOPs (as torch's aten.embedding)
    layer = L.Embedding(10, 4)
    result = count(keras.Sequential([keras.Input((5,), dtype="int32"), layer]), (2, 5))
    assert (result.macs, result.flops) == (0, 0)
    assert result.by_operator["Embedding"].calls == 1


def test_lora_rebuilds_the_merged_kernel_every_call():
    # Dense(4) on (2, 8): 64 MACs, bias 8. LoRA rank 2: a (8,2) @ b (2,4) = 8*4 merged elements
    # x 2 = 64 MACs, + scale and add 2 * 32 = 64 FLOPs. Total MACs 128; FLOPs 256 + 8 + 64 = 328.
    layer = L.Dense(4)
    model = keras.Sequential([keras.Input((8,)), layer])
    layer.enable_lora(2)
    result = count(model, (2, 8))
    assert (result.macs, result.flops) == (128, 328)
