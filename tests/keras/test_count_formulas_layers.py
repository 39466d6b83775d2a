"""Normalisation, activation, pooling, merge, reshaping and dropout formulas, derived by hand.

Per-element costs are the torch backend's (formulas/_common.py): relu 1, sigmoid 4,
softmax 5, max-pool K, avg-pool K + 1, batch norm (eval) 2N + 2C (+N, +N), ...
"""
import warnings

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras.counting import UntrackedLayerWarning, count_ops  # noqa: E402
from tests.keras._count_helpers import count, layer_cost  # noqa: E402

L = keras.layers


# -- normalisation ---------------------------------------------------------------------------
@pytest.mark.parametrize("layer, shape, kwargs, expected_flops", [
    # (2,4,4,3): N = 96, C = 3. Inference: 2N + 2C + N (gamma) + N (beta) = 192 + 6 + 96 + 96 = 390
    (lambda: L.BatchNormalization(), (2, 4, 4, 3), {}, 390),
    # no gamma, no beta: 2N + 2C = 198
    (lambda: L.BatchNormalization(center=False, scale=False), (2, 4, 4, 3), {}, 198),
    # training (batch statistics): 6N + 4C + 2N = 576 + 12 + 192 = 780
    (lambda: L.BatchNormalization(), (2, 4, 4, 3), {"training": True}, 780),
    # axis=1 on (2,3,5): N = 30, C = 3: 60 + 6 + 30 + 30 = 126
    (lambda: L.BatchNormalization(axis=1), (2, 3, 5), {}, 126),
    # (2,5,6) over the last axis: N = 60, R = 10 rows: 6N + 4R + N + N = 360 + 40 + 120 = 520
    (lambda: L.LayerNormalization(), (2, 5, 6), {}, 520),
    # over axes 1 and 2: R = 2: 360 + 8 + 120 = 488
    (lambda: L.LayerNormalization(axis=[1, 2]), (2, 5, 6), {}, 488),
    # groups 3 on (2,5,6): R = batch * groups = 6: 360 + 24 + 120 = 504
    (lambda: L.GroupNormalization(groups=3), (2, 5, 6), {}, 504),
    # 3N + 3R + N = 180 + 30 + 60 = 270
    (lambda: L.RMSNormalization(), (2, 5, 6), {}, 270),
    # x / ||x||: square, sum, divide 3N + sqrt R = 180 + 10 = 190
    (lambda: L.UnitNormalization(), (2, 5, 6), {}, 190),
])
def test_normalisation(layer, shape, kwargs, expected_flops):
    assert layer_cost(keras, layer(), shape, **kwargs) == (0, expected_flops)


def test_deprecated_rms_scaling_costs_a_layer_norm_without_beta():
    # Keras computes var (4N + 2R), rsqrt(var + eps) (2R), x * inv (N), * gamma (N):
    # 6N + 4R + N = 360 + 40 + 60 = 460 for (2,5,6) over the last axis
    with pytest.warns(UserWarning, match="deprecated"):
        model = keras.Sequential([keras.Input((5, 6)), L.LayerNormalization(rms_scaling=True)])
        assert count_ops(model, (2, 5, 6)).flops == 460


def test_a_frozen_batch_norm_uses_moving_statistics_even_in_training():
    # Keras uses batch statistics only when training AND trainable: frozen -> the inference 390
    layer = L.BatchNormalization()
    model = keras.Sequential([keras.Input((4, 4, 3)), layer])
    layer.trainable = False
    assert count(model, (2, 4, 4, 3), training=True).flops == 390


# -- activation layers -----------------------------------------------------------------------
@pytest.mark.parametrize("layer, per_element", [
    (lambda: L.ReLU(), 1),
    (lambda: L.ReLU(max_value=6.0), 2),  # relu6 = hardtanh
    (lambda: L.ReLU(negative_slope=0.1), 2),  # leaky
    (lambda: L.ReLU(negative_slope=0.1, threshold=0.5), 3),  # leaky + the shift by the threshold
    (lambda: L.LeakyReLU(), 2),
    (lambda: L.PReLU(), 2),
    (lambda: L.ELU(), 3),
    (lambda: L.Softmax(), 5),
    (lambda: L.Activation("gelu"), 5),
    (lambda: L.Activation("sigmoid"), 4),
    (lambda: L.Activation("linear"), 0),
])
def test_activation_layers(layer, per_element):
    # (2, 6): 12 elements
    assert layer_cost(keras, layer(), (2, 6)) == (0, 12 * per_element)


def test_masked_softmax_adds_the_mask():
    # 12 elements: softmax 5 + mask add 1 = 72
    x, mask = keras.Input((6,)), keras.Input((6,), dtype="bool")
    model = keras.Model([x, mask], L.Softmax()(x, mask=mask))
    inputs = [np.ones((2, 6), "float32"), np.ones((2, 6), bool)]
    assert count(model, inputs).flops == 72


def test_a_user_function_in_an_activation_layer_is_untracked():
    model = keras.Sequential([keras.Input((6,)), L.Activation(lambda t: t * 3.0, name="act")])
    with pytest.warns(UntrackedLayerWarning, match="activation:<lambda>"):
        result = count_ops(model, (2, 6))
    assert result.flops == 0 and result.untracked == {"activation:<lambda>": 1}


# -- pooling ---------------------------------------------------------------------------------
@pytest.mark.parametrize("layer, shape, flops", [
    # out (2,2,2,3) = 24, K = 4: max 24*4 = 96; average 24*(4+1) = 120
    (lambda: L.MaxPooling2D(2), (2, 4, 4, 3), 96),
    (lambda: L.AveragePooling2D(2), (2, 4, 4, 3), 120),
    # 'same', stride 1: out (2,4,4,3) = 96, K = 9 (padding counted dense): 864
    (lambda: L.MaxPooling2D(3, strides=1, padding="same"), (2, 4, 4, 3), 864),
    # out (2,3,3) = 18, K = 2: 36
    (lambda: L.MaxPooling1D(2), (2, 6, 3), 36),
    # out (1,1,1,1,2) = 2, K = 8: 2 * 9 = 18
    (lambda: L.AveragePooling3D(2), (1, 2, 2, 2, 2), 18),
    # N = 96
    (lambda: L.GlobalMaxPooling2D(), (2, 4, 4, 3), 96),
    # N + outputs = 96 + 6 = 102
    (lambda: L.GlobalAveragePooling2D(), (2, 4, 4, 3), 102),
    # keepdims changes nothing: 30 + 6 = 36
    (lambda: L.GlobalAveragePooling1D(keepdims=True), (2, 5, 3), 36),
    # 5 -> 2 per dim: windows [0,3) and [2,5): 6 per dim, 36 per plane; 1 plane; + 4 divides = 40
    (lambda: L.AdaptiveAveragePooling2D((2, 2)), (1, 5, 5, 1), 40),
    (lambda: L.AdaptiveMaxPooling2D((2, 2)), (1, 5, 5, 1), 36),
    # 7 -> 3: windows [0,3), [2,5), [4,7): 9; planes 2*2 = 4 -> 36; + 12 divides = 48
    (lambda: L.AdaptiveAveragePooling1D(3), (2, 7, 2), 48),
])
def test_pooling(layer, shape, flops):
    assert layer_cost(keras, layer(), shape) == (0, flops)


# -- merging ---------------------------------------------------------------------------------
def _merge(layer_cls, n, **kwargs):
    inputs = [keras.Input((4,)) for _ in range(n)]
    return keras.Model(inputs, layer_cls(**kwargs)(inputs)), [(2, 4)] * n


@pytest.mark.parametrize("layer_cls, n, kwargs, expected", [
    (L.Add, 3, {}, (0, 16)),  # (3 - 1) adds x 8 outputs
    (L.Subtract, 2, {}, (0, 8)),
    (L.Multiply, 2, {}, (0, 8)),
    (L.Average, 3, {}, (0, 24)),  # 2 adds + 1 divide = 3 per output x 8
    (L.Maximum, 2, {}, (0, 8)),
    (L.Minimum, 3, {}, (0, 16)),
    (L.Concatenate, 2, {}, (0, 0)),  # a copy
    (L.Dot, 2, {"axes": 1}, (8, 16)),  # out (2,1) = 2 x 4 contracted = 8 MACs
    # normalize: + per input 3N + R = 24 + 2 = 26, twice: 16 + 52 = 68
    (L.Dot, 2, {"axes": 1, "normalize": True}, (8, 68)),
])
def test_merging(layer_cls, n, kwargs, expected):
    model, shapes = _merge(layer_cls, n, **kwargs)
    result = count(model, shapes)
    assert (result.macs, result.flops) == expected


# -- reshaping and resampling ----------------------------------------------------------------
@pytest.mark.parametrize("layer, shape, flops", [
    (lambda: L.UpSampling2D(2), (1, 2, 2, 3), 0),  # nearest: a copy
    (lambda: L.UpSampling2D(2, interpolation="bilinear"), (1, 2, 2, 3), 48 * 7),  # out 48, 7 each
    (lambda: L.UpSampling2D(2, interpolation="bicubic"), (1, 2, 2, 3), 48 * 31),
    (lambda: L.Resizing(4, 4), (1, 2, 2, 3), 48 * 7),  # bilinear by default
    (lambda: L.Rescaling(1 / 255.0), (2, 4), 8),  # x * scale
    (lambda: L.Rescaling(2.0, offset=1.0), (2, 4), 16),  # x * scale + offset
    (lambda: L.Masking(), (2, 3, 4), 24),  # x * mask
    (lambda: L.Normalization(mean=0.0, variance=1.0), (2, 4), 16),  # (x - mean) / std
])
def test_resampling_and_rescaling(layer, shape, flops):
    assert layer_cost(keras, layer(), shape) == (0, flops)


@pytest.mark.parametrize("layer, shape", [
    (lambda: L.Flatten(), (2, 3, 4)),
    (lambda: L.Reshape((12,)), (2, 3, 4)),
    (lambda: L.Permute((2, 1)), (2, 3, 4)),
    (lambda: L.RepeatVector(3), (2, 4)),
    (lambda: L.ZeroPadding2D(1), (1, 2, 2, 1)),
    (lambda: L.Cropping1D(1), (2, 4, 3)),
    (lambda: L.UpSampling1D(2), (2, 3, 4)),
    (lambda: L.Identity(), (2, 4)),
])
def test_shape_layers_are_free_and_not_untracked(layer, shape):
    result = count(keras.Sequential([keras.Input(shape[1:]), layer()]), shape)
    assert (result.macs, result.flops, result.untracked, result.by_operator) == (0, 0, {}, {})


def test_an_interpolation_without_a_formula_is_untracked():
    model = keras.Sequential([keras.Input((2, 2, 3)), L.UpSampling2D(2, interpolation="area")])
    with pytest.warns(UntrackedLayerWarning, match="area"):
        result = count_ops(model, (1, 2, 2, 3))
    assert result.untracked == {"UpSampling2D(interpolation='area')": 1}


# -- dropout and noise -----------------------------------------------------------------------
@pytest.mark.parametrize("layer, shape, training_flops", [
    (lambda: L.Dropout(0.5), (2, 4), 16),  # scale the mask, multiply: 2 x 8
    (lambda: L.SpatialDropout1D(0.5), (2, 3, 4), 48),  # 2 x 24
    (lambda: L.GaussianNoise(0.1), (2, 4), 8),  # one add per element
    (lambda: L.GaussianDropout(0.5), (2, 4), 8),  # one multiply per element
    (lambda: L.AlphaDropout(0.5), (2, 4), 16),  # a*x + b
])
def test_dropout_costs_only_in_training(layer, shape, training_flops):
    model = keras.Sequential([keras.Input(shape[1:]), layer()])
    assert count(model, shape).flops == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert count_ops(model, shape, training=True).flops == training_flops
