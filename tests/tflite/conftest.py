"""Models converted once per session (each conversion takes seconds): Keras -> ``tf.lite.TFLiteConverter``
through ``deeplite_like.zoo.keras_models.to_tflite`` (float, or full-integer int8 calibrated on seeded samples).

Keras 3.15 + TF 2.21: ``tf.lite.TFLiteConverter.from_keras_model`` converts a Keras 3 model directly
(it traces the model's call).
"""
from __future__ import annotations

import pytest

pytest.importorskip("ai_edge_litert")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")


def convert(model, int8: bool = False) -> bytes:
    from deeplite_like.zoo.keras_models import to_tflite  # (imports Keras)

    return to_tflite(model, int8=int8)


@pytest.fixture(scope="session")
def keras_lenet5():
    from deeplite_like.zoo.keras_models import lenet5

    return lenet5()


@pytest.fixture(scope="session")
def lenet5_float(keras_lenet5) -> bytes:
    return convert(keras_lenet5)


@pytest.fixture(scope="session")
def lenet5_int8(keras_lenet5) -> bytes:
    return convert(keras_lenet5, int8=True)


@pytest.fixture(scope="session")
def families() -> bytes:
    """One op of each family on 8x8x3 at batch 1 (each op type once; the shapes are in test_tflite_formulas)."""
    layers = keras.layers
    x = keras.Input((8, 8, 3), batch_size=1, name="image")
    a = layers.Conv2D(4, 3, padding="same", activation="relu6", name="conv")(x)
    b = layers.DepthwiseConv2D(3, padding="same", name="dw")(a)
    c = layers.Add(name="add")([a, b])
    d = layers.Multiply(name="mul")([c, b])
    e = layers.AveragePooling2D(2, name="avg")(d)
    f = layers.Conv2DTranspose(2, 2, strides=2, name="deconv")(e)
    g = layers.Activation("sigmoid", name="sig")(f)
    h = layers.Activation("tanh", name="tanh")(g)
    hs = layers.Activation("hard_swish", name="hswish")(h)
    m = layers.MaxPooling2D(2, name="maxpool")(hs)
    r = layers.Reshape((16, 2), name="reshape")(m)
    mm = layers.Dot(axes=2, name="dot")([r, r])
    gap = layers.GlobalAveragePooling2D(name="gap")(hs)
    dense = layers.Dense(5, name="fc")(gap)
    s = layers.Softmax(name="softmax")(dense)
    out = layers.Concatenate(name="concat")([layers.Flatten(name="flat")(mm), s])
    return convert(keras.Model(x, out))


@pytest.fixture(scope="session")
def more_families() -> bytes:
    """GELU, LEAKY_RELU, SUB, ELU and CONV_3D on 4x4x2 at batch 1 (two outputs)."""
    layers = keras.layers
    x = keras.Input((4, 4, 2), batch_size=1)
    a = layers.Activation("gelu")(x)
    b = layers.LeakyReLU(0.1)(a)
    c = layers.Subtract()([b, x])
    d = layers.Activation("elu")(c)
    e = layers.Conv3D(2, 2)(layers.Reshape((4, 4, 2, 1))(d))
    return convert(keras.Model(x, [d, e]))
