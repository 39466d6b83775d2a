"""Keras parameter counting and sizes: every rule of ``backends/keras/params.py``, derived by hand."""
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras.params import dtype_bytes, parameter_stats, weight_table  # noqa: E402


def _dense_bn_dense():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, name="fc1"),
                             keras.layers.BatchNormalization(name="bn"), keras.layers.Dense(2, name="fc2")])


def _elements(variables) -> int:
    total = 0
    for v in variables:
        n = 1
        for d in v.shape:
            n *= int(d)
        total += n
    return total


def test_batch_norm_statistics_are_state_not_parameters():
    # fc1 8*4 + 4 = 36; bn gamma 4 + beta 4 = 8 (moving mean 4 + variance 4 = 8 are state);
    # fc2 4*2 + 2 = 10  ->  parameters 36 + 8 + 10 = 54, state 8, fp32 -> 216 B and 32 B.
    model = _dense_bn_dense()
    stats = parameter_stats(model)
    assert (stats.total_params, stats.trainable_params, stats.non_trainable_params) == (54, 54, 0)
    assert (stats.buffer_count, stats.buffer_bytes) == (8, 32)
    assert stats.param_bytes == 54 * 4 and stats.by_dtype == {"float32": 216}
    # Keras' own figure counts the state as weights: 54 + 8 = 62 (peer: model.count_params()).
    assert stats.total_params + stats.buffer_count == model.count_params() == 62
    assert stats.keras_non_trainable == 8 == _elements(model.non_trainable_weights)


def test_a_frozen_layer_keeps_its_parameters_as_non_trainable():
    # fc1 frozen: its 36 become non-trainable parameters; trainable 54 - 36 = 18.
    model = _dense_bn_dense()
    model.get_layer("fc1").trainable = False
    stats = parameter_stats(model)
    assert (stats.total_params, stats.trainable_params, stats.non_trainable_params) == (54, 18, 36)
    # model.summary()'s "non-trainable": frozen 36 + state 8 = 44 (peer: Keras' own lists).
    assert stats.keras_non_trainable == 44 == _elements(model.non_trainable_weights)
    assert stats.trainable_params == _elements(model.trainable_weights)


def test_a_frozen_batch_norm_is_parameters_plus_state():
    # bn frozen: gamma/beta (8) become non-trainable parameters; the moving statistics stay state.
    model = _dense_bn_dense()
    model.get_layer("bn").trainable = False
    stats = parameter_stats(model)
    assert (stats.total_params, stats.trainable_params, stats.non_trainable_params, stats.buffer_count) == \
        (54, 46, 8, 8)


def test_a_layer_called_twice_counts_once():
    # One Dense(4 -> 4) applied twice: 4*4 + 4 = 20 parameters, not 40.
    shared = keras.layers.Dense(4, name="shared")
    x = keras.Input((4,))
    model = keras.Model(x, shared(shared(x)))
    assert parameter_stats(model).total_params == 20 == model.count_params()
    assert [w.path for w in weight_table(model)] == ["shared/kernel", "shared/bias"]


def test_nested_models_count_their_layers():
    # inner: Dense(8 -> 3) = 27; outer adds Dense(3 -> 1) = 4  ->  31.
    inner = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="inner")
    outer = keras.Sequential([keras.Input((8,)), inner, keras.layers.Dense(1)])
    assert parameter_stats(outer).total_params == 31


def test_mixed_precision_variables_are_float32():
    # Under 'mixed_float16' the variables are float32 (computation is float16):
    # Dense(8 -> 4) 36 + Dense(4 -> 2) 10 = 46 parameters x 4 B = 184 B, not 92.
    previous = keras.mixed_precision.global_policy()
    try:
        keras.mixed_precision.set_dtype_policy("mixed_float16")
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(2)])
        assert model.layers[0].compute_dtype == "float16"
    finally:
        keras.mixed_precision.set_dtype_policy(previous)
    assert keras.mixed_precision.global_policy().name == previous.name
    stats = parameter_stats(model)
    assert stats.total_params == 46 and stats.param_bytes == 184 and stats.by_dtype == {"float32": 184}


def test_size_follows_each_weights_own_dtype():
    # fc16 float16: 8*4 + 4 = 36 x 2 B = 72; fc32 float32: 4*2 + 2 = 10 x 4 B = 40  ->  112 B.
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, dtype="float16", name="fc16"),
                              keras.layers.Dense(2, name="fc32")])
    stats = parameter_stats(model)
    assert stats.by_dtype == {"float16": 72, "float32": 40} and stats.param_bytes == 112


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Keras' own numpy copy= warning while quantizing
def test_int8_quantized_kernel_is_a_frozen_parameter_and_its_scale_state():
    # Dense(8 -> 4).quantize('int8'): kernel int8 8*4 = 32 elements x 1 B (frozen parameter),
    # bias float32 4 x 4 B = 16 (trainable), kernel_scale float32 4 x 4 B = 16 (state).
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, name="fc")])
    with pytest.warns(UserWarning):  # Keras warns that the InputLayer has no quantize method
        model.quantize("int8")
    stats = parameter_stats(model)
    assert (stats.total_params, stats.trainable_params, stats.non_trainable_params) == (36, 4, 32)
    assert stats.by_dtype == {"int8": 32, "float32": 16} and stats.param_bytes == 48
    assert (stats.buffer_count, stats.buffer_bytes) == (4, 16)


def test_seed_generator_state_is_not_a_weight():
    # Dropout's seed state is a variable, not a weight: only Dense(8 -> 2) = 18 is counted.
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dropout(0.5), keras.layers.Dense(2)])
    assert len(model.variables) > len(model.weights)  # the seed state exists
    stats = parameter_stats(model)
    assert (stats.total_params, stats.buffer_count) == (18, 0)


@pytest.mark.parametrize("dtype, size", [("float32", 4), ("float16", 2), ("bfloat16", 2), ("int8", 1),
                                         ("uint8", 1), ("int64", 8), ("float64", 8), ("bool", 1)])
def test_dtype_bytes(dtype, size):
    assert dtype_bytes(dtype) == size


def test_unknown_dtype_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="no known element size for dtype 'string'"):
        dtype_bytes("string")


def test_an_unbuilt_model_is_refused_with_what_to_do():
    model = keras.Sequential([keras.layers.Dense(2)], name="lazy")
    with pytest.raises(ValueError, match=r"'lazy' is not built yet.*model.build\(input_shape\)"):
        parameter_stats(model)


def test_a_non_keras_object_is_refused():
    with pytest.raises(TypeError, match="expects a Keras model or layer, got builtins.dict"):
        parameter_stats({})
