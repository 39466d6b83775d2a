"""Every class in ``keras.layers`` is priced: a formula, a free mark, priced by its operators
(``OP_LEVEL``), or a documented container / abstract base. Plus the families added for it:
ConvLSTM, spectrograms, augmentation (identity at inference), scale layers, approximate gelu.
Expected values are derived by hand in comments.
"""
import functools
import inspect

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras.counting import unregister_layer_formula  # noqa: E402
from deeplite_like.backends.keras.counting.engine import price  # noqa: E402
from deeplite_like.backends.keras.counting.registry import (  # noqa: E402
    FREE,
    INFERENCE_IDENTITY,
    MISSING,
    OP_LEVEL,
    CountOptions,
    lookup,
    register_op_level_layer,
)
from tests.keras._count_helpers import count, one_layer  # noqa: E402

L = keras.layers

#: Classes with no price of their own, on purpose: what they run is their sublayers' (priced by
#: theirs) or nothing (a base class). Their own operators, if any, are still priced op by op.
CONTAINERS = {
    "Layer": "the abstract base; a user layer without a formula is priced by its operators",
    "Wrapper": "abstract base of wrappers",
    "Pipeline": "runs its layers in order: each is recorded and priced",
    "TimeDistributed": "calls its inner layer once per step: each call is recorded and priced",
    "StackedRNNCells": "priced by RNN(...) as its cells' formulas, step by step",
}


def _public_layer_classes():
    return {name: cls for name, cls in sorted(vars(keras.layers).items())
            if inspect.isclass(cls) and issubclass(cls, keras.layers.Layer)}


def test_every_public_keras_layer_class_is_priced_or_a_documented_container():
    unpriced, kinds = [], {}
    for name, cls in _public_layer_classes().items():
        entry = lookup(cls, {})
        if entry is None:
            if name not in CONTAINERS:
                unpriced.append(name)
            kinds[name] = "container"
        elif entry is FREE:
            kinds[name] = "free"
        elif entry in (OP_LEVEL, INFERENCE_IDENTITY):
            kinds[name] = "ops"
        else:
            kinds[name] = "formula"
    assert unpriced == [], f"keras.layers classes with no formula, free mark or op-level mark: {unpriced}"
    assert MISSING == []  # every public name a formula is registered under exists in this Keras
    # spot checks of each kind (the listing above covers all 160-odd classes)
    assert {k: kinds[k] for k in ("Dense", "ConvLSTM2D", "Flatten", "RandomFlip", "MelSpectrogram", "Lambda",
                                  "TimeDistributed")} == {
        "Dense": "formula", "ConvLSTM2D": "formula", "Flatten": "free", "RandomFlip": "ops",
        "MelSpectrogram": "ops", "Lambda": "ops", "TimeDistributed": "container"}
    assert set(CONTAINERS) <= set(kinds)  # no stale container names


# -- ConvLSTM --------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, shape, expected", [
    # (2, 3, 6, 6, 2), 4 filters, 3x3 valid: out 4x4 -> S 16, rows 2*3*16 = 96, K 9, C 2, F 4.
    # MACs 96 * 16 * 9 * (2 + 4) = 82944; FLOPs 2*82944 + 96*16 (bias) + 96*4*22 (gates) = 175872
    ({}, (2, 3, 6, 6, 2), (82944, 175872)),
    # padding same: S 36, rows 216: MACs 216*16*9*6 = 186624; FLOPs 373248 + 3456 + 19008 = 395712
    ({"padding": "same"}, (2, 3, 6, 6, 2), (186624, 395712)),
    # strides 2, valid, sequences: out 2x2 -> S 4, rows 24: MACs 24*16*54 = 20736;
    # FLOPs 41472 + 384 + 2112 = 43968
    ({"strides": 2, "return_sequences": True}, (2, 3, 6, 6, 2), (20736, 43968)),
    # no bias: 82944 MACs, FLOPs 165888 + 8448 = 174336
    ({"use_bias": False}, (2, 3, 6, 6, 2), (82944, 174336)),
])
def test_conv_lstm_2d(kwargs, shape, expected):
    model = one_layer(keras, L.ConvLSTM2D(4, 3, **kwargs), shape[1:])
    result = count(model, shape)
    assert (result.macs, result.flops) == expected


def test_conv_lstm_1d_and_3d():
    # 1D: (2, 4, 10, 3), 5 filters, kernel 3: out 8 -> rows 2*4*8 = 64, MACs 64*20*3*8 = 30720;
    # FLOPs 61440 + 64*20 + 64*5*22 = 61440 + 1280 + 7040 = 69760
    result = count(one_layer(keras, L.ConvLSTM1D(5, 3), (4, 10, 3)), (2, 4, 10, 3))
    assert (result.macs, result.flops) == (30720, 69760)
    # 3D: (1, 2, 4, 4, 4, 1), 2 filters, kernel 3 same: rows 1*2*64 = 128, MACs 128*8*27*3 = 82944;
    # FLOPs 165888 + 128*8 + 128*2*22 = 165888 + 1024 + 5632 = 172544
    result = count(one_layer(keras, L.ConvLSTM3D(2, 3, padding="same"), (2, 4, 4, 4, 1)), (1, 2, 4, 4, 4, 1))
    assert (result.macs, result.flops) == (82944, 172544)


def test_conv_lstm_formula_agrees_with_its_operators():
    # Priced op by op, the layer runs T + 1 cell steps (Keras' probe on the first step, not
    # counted by the formula): the ops' count is (T + 1) / T of the formula's, exactly.
    model = one_layer(keras, L.ConvLSTM2D(4, 3), (3, 6, 6, 2))
    formula = count(model, (2, 3, 6, 6, 2))
    register_op_level_layer(L.ConvLSTM2D)
    try:
        ops = count(model, (2, 3, 6, 6, 2))
    finally:
        unregister_layer_formula(L.ConvLSTM2D)
    assert (ops.macs * 3, ops.flops * 3) == (formula.macs * 4, formula.flops * 4)
    assert ops.by_operator["tf.Conv2D"].calls == 4 * 8  # 4 steps x (4 input + 4 recurrent convolutions)


# -- spectrograms ----------------------------------------------------------------------------
def test_mel_spectrogram_counts_its_fft_and_filter_bank():
    # 256 samples, frames of 64 every 16, centred: 1 + 256/16 = 17 frames x batch 2 = 34 real FFTs
    # of N = 64: 2.5 * 64 * log2(64) = 960 FLOPs each -> 32640. The mel projection: 34 frames x
    # 33 bins x 8 mel bins = 8976 MACs (the only contraction).
    layer = L.MelSpectrogram(fft_length=64, sequence_stride=16, sequence_length=64, num_mel_bins=8)
    result = count(one_layer(keras, layer, (256,)), (2, 256))
    assert result.macs == 8976 and result.untracked == {}
    assert (result.by_operator["tf.RFFT"].flops, result.by_operator["tf.RFFT"].calls) == (32640, 1)


# -- augmentation: identity at inference -------------------------------------------------------
@pytest.mark.parametrize("layer", [
    lambda: L.RandomFlip(), lambda: L.RandomRotation(0.1), lambda: L.RandomZoom(0.1),
    lambda: L.RandomTranslation(0.1, 0.1), lambda: L.RandomContrast(0.2), lambda: L.RandomBrightness(0.2),
])
def test_random_augmentation_is_free_at_inference(layer):
    result = count(one_layer(keras, layer(), (8, 8, 3)), (2, 8, 8, 3))
    assert (result.macs, result.flops, result.untracked) == (0, 0, {})


def test_without_an_operator_hook_augmentation_is_free_at_inference_and_untracked_in_training():
    # JAX has no operator hook: price(records, options, None). RandomFlip is free at inference,
    # untracked (by class) in training; an OP_LEVEL layer (Lambda) is untracked either way.
    from deeplite_like.backends.keras.counting.engine import run_recorded

    model = keras.Sequential([keras.Input((4, 4, 1)), L.RandomFlip(name="flip"), L.Lambda(lambda t: t * 2.0)])
    x = np.ones((1, 4, 4, 1), "float32")
    for training, expected in ((False, {"Lambda": 1}), (True, {"RandomFlip": 1, "Lambda": 1})):
        recorder = run_recorded(model, x, training=training, on_failure=lambda exc, rec: exc)
        assert price(recorder.records, CountOptions(training=training), None).untracked == expected


# -- scale layers, approximate gelu ----------------------------------------------------------
def test_layer_scale_and_custom_scale_layers_are_priced_by_their_ops():
    from keras.src.applications.convnext import LayerScale
    from keras.src.applications.inception_resnet_v2 import CustomScaleLayer

    # LayerScale x * gamma on (2, 5, 8): 1 per element = 80 FLOPs
    result = count(one_layer(keras, LayerScale(1e-6, 8), (5, 8)), (2, 5, 8))
    assert (result.macs, result.flops, result.untracked) == (0, 80, {})
    # CustomScaleLayer a + b * scale on two (2, 6): multiply 12 + add 12 = 24 FLOPs
    a, b = keras.Input((6,)), keras.Input((6,))
    model = keras.Model([a, b], CustomScaleLayer(0.17)([a, b]))
    result = count(model, [np.ones((2, 6), "float32"), np.ones((2, 6), "float32")])
    assert (result.macs, result.flops, result.untracked) == (0, 24, {})


def test_gelu_approximate_is_the_tanh_form():
    # Dense 4 -> 3 on 2 rows: 24 MACs, 48 + 6 (bias); gelu 9 per element (tanh form) x 6 = 54 -> 108;
    # the erf form (default) 5 x 6 = 30 -> 84
    approx = functools.partial(keras.activations.gelu, approximate=True)
    assert count(one_layer(keras, L.Dense(3, activation=approx), (4,)), (2, 4)).flops == 108
    assert count(one_layer(keras, L.Dense(3, activation="gelu"), (4,)), (2, 4)).flops == 84
    # Activation layer: 9 x 2*4
    assert count(one_layer(keras, L.Activation(approx), (4,)), (2, 4)).flops == 72
    # keras.ops.gelu(approximate=True) in a functional graph: 9 per element
    x = keras.Input((4,))
    assert count(keras.Model(x, keras.ops.gelu(x, approximate=True)), (2, 4)).flops == 72


def test_keras_hub_gelu_approximate_alias():
    # keras_hub's BERT / GPT-2 pass activation=gelu_approximate (keras_hub.src.utils.keras_utils):
    # gelu(x, approximate=True), 9 per element -> Dense 4 -> 3 on 2 rows: 48 + 6 + 54 = 108
    def gelu_approximate(x):
        return keras.activations.gelu(x, approximate=True)

    gelu_approximate.__module__ = "keras_hub.src.utils.keras_utils"
    assert count(one_layer(keras, L.Dense(3, activation=gelu_approximate), (4,)), (2, 4)).flops == 108
