"""Keras peak activation memory: the graph-mode tensor-lifetime simulation, bytes derived by hand.

Every model runs at batch 2 in float32 (4 B per element) unless said otherwise. The input is
live throughout; each op's output is allocated when it runs and freed after its last consumer;
the peak is read right after an op allocated (its inputs still live).
"""
import numpy as np
import pytest

keras = pytest.importorskip("keras")
if keras.config.backend() != "tensorflow":
    pytest.skip("the graph simulation runs on Keras' TensorFlow backend", allow_module_level=True)

from deeplite_like.backends.keras.memory import GRAPH_SIMULATION, peak_activation_memory  # noqa: E402

X = np.zeros((2, 8), dtype="float32")  # 2*8*4 = 64 B


def test_two_dense_layers():
    # x 64 | fc1 MatMul 2x16 = 128 -> 192 | BiasAdd 128 -> 320, MatMul freed -> 192 |
    # Relu 128 -> 320, BiasAdd freed -> 192 | fc2 MatMul 2x4 = 32 -> 224, Relu freed -> 96 |
    # BiasAdd 32 -> 128, MatMul freed -> 96 | Identity (output) aliases it: 0.
    # Peak 320 = x 64 + two 2x16 tensors, first reached at fc1's BiasAdd.
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu", name="fc1"),
                              keras.layers.Dense(4, name="fc2")])
    stats = peak_activation_memory(model, X)
    assert stats.peak_bytes == 320 and stats.peak_module == "fc1" and stats.peak_op.startswith("BiasAdd")
    assert (stats.input_bytes, stats.output_bytes, stats.end_bytes) == (64, 32, 96)  # end: x + output
    assert stats.allocated_bytes == 3 * 128 + 2 * 32  # 448
    assert stats.batch_size == 2 and stats.per_sample_peak_bytes == 160.0
    assert stats.method == GRAPH_SIMULATION and stats.activation_peak_bytes == 256


def test_a_residual_keeps_its_branch_alive():
    # a = Dense(16)(x), b = Dense(16)(a), out = a + b: a's BiasAdd (128) lives until the Add.
    # x 64 | a MatMul 128 -> 192 | a BiasAdd 128 -> 320, MatMul freed -> 192 |
    # b MatMul 128 -> 320 | b BiasAdd 128 -> 448, MatMul freed -> 320 | Add 128 -> 448, a, b freed -> 192.
    x = keras.Input((8,))
    a = keras.layers.Dense(16, name="a")(x)
    b = keras.layers.Dense(16, name="b")(a)
    model = keras.Model(x, keras.layers.Add(name="add")([a, b]))
    stats = peak_activation_memory(model, X)
    assert stats.peak_bytes == 448 and stats.peak_module == "b"
    assert stats.output_bytes == 128 and stats.end_bytes == 64 + 128


def test_reshape_aliases_and_constants_are_excluded():
    # Flatten is a Reshape: it forwards the input's buffer (0 B). Input 2x4x4 = 128 B.
    # fc MatMul 2x3 = 24 -> 152 | BiasAdd 24 -> 176 (peak), MatMul freed -> 152.
    # Constants: Flatten's Shape int32[3] = 12 B and Reshape/shape int32[2] = 8 B -> 20 B, apart.
    model = keras.Sequential([keras.Input((4, 4)), keras.layers.Flatten(name="flat"), keras.layers.Dense(3, name="fc")])
    stats = peak_activation_memory(model, np.zeros((2, 4, 4), dtype="float32"))
    assert stats.peak_bytes == 176 and stats.input_bytes == 128 and stats.allocated_bytes == 48
    assert stats.constant_bytes == 20


def test_mixed_precision_casts_are_counted():
    # mixed_float16: x (float32, 64 B) is cast to float16 (2x8x2 = 32) -> 96; the float32 kernel is
    # cast to float16 (8x16x2 = 256) -> 352; MatMul 2x16 float16 = 64 -> 416 (peak); both casts
    # freed -> 128; bias cast 16x2 = 32 -> 160; BiasAdd 64 -> 224; MatMul and bias cast freed -> 128.
    previous = keras.mixed_precision.global_policy()
    try:
        keras.mixed_precision.set_dtype_policy("mixed_float16")
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, name="fc")])
    finally:
        keras.mixed_precision.set_dtype_policy(previous)
    stats = peak_activation_memory(model, X)
    assert stats.peak_bytes == 416 and stats.allocated_bytes == 32 + 256 + 64 + 32 + 64
    assert stats.output_bytes == 64 and stats.end_bytes == 128


def test_batch_size_scales_activations_not_weights():
    # Same model as test_two_dense_layers at batch 4: every activation doubles: 2 x 320 = 640.
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)])
    assert peak_activation_memory(model, np.zeros((4, 8), dtype="float32")).peak_bytes == 640


def test_training_mode_trace_leaves_batch_norm_statistics():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.BatchNormalization()])
    before = [v.numpy().copy() for v in model.weights]
    stats = peak_activation_memory(model, np.ones((2, 8), dtype="float32"), training=True)
    assert stats.peak_bytes > 0
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.weights))


def test_an_unbuilt_model_is_built_first():
    # Sequential without Input: built by an eager call, then traced. Dense(8 -> 2): x 64 | MatMul 16 -> 80 |
    # BiasAdd 16 -> 96 (peak).
    model = keras.Sequential([keras.layers.Dense(2)])
    assert peak_activation_memory(model, X).peak_bytes == 96


def test_a_bad_input_shape_names_the_layer():
    class TwoLayers(keras.Model):
        def __init__(self):
            super().__init__(name="two")
            self.fc1 = keras.layers.Dense(4, name="fc1")
            self.fc2 = keras.layers.Dense(2, name="fc2")

        def call(self, x):
            return self.fc2(self.fc1(x))

    model = TwoLayers()
    model(X)  # built for 8 features
    with pytest.raises(ValueError) as info:
        peak_activation_memory(model, np.zeros((2, 9), dtype="float32"))
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "layer 'fc1' (Dense) on input shapes 2x9" in notes and "model 'two'" in notes
