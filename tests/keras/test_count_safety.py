"""The user's model comes back untouched; errors say where; inputs and shapes are checked."""
import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras.counting import (  # noqa: E402
    Cost,
    FormulaError,
    ForwardError,
    count_ops,
    register_layer_formula,
    unregister_layer_formula,
)
from tests.keras._count_helpers import count  # noqa: E402

L = keras.layers


def _model():
    model = keras.Sequential([keras.Input((4,)), L.Dense(8, name="fc1"), L.BatchNormalization(name="bn"),
                              L.Dropout(0.5, name="drop"), L.Dense(2, name="fc2")], name="net")
    model.get_layer("fc1").trainable = False
    model.compile(optimizer="sgd", loss="mse")
    return model


def _snapshot(model):
    return {
        "weights": [w.copy() for w in model.get_weights()],
        "variables": [np.array(v.numpy()) for v in model.variables],
        "trainable": {layer.name: layer.trainable for layer in model.layers},
        "compiled": (model.compiled, model.optimizer, model.loss),
        "call_attributes": [layer for layer in [model, *model.layers] if "call" in vars(layer)],
    }


def _assert_same(before, after):
    for a, b in zip(before["weights"], after["weights"]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(before["variables"], after["variables"]):  # includes seed generator states
        np.testing.assert_array_equal(a, b)
    assert before["trainable"] == after["trainable"]
    assert before["compiled"] == after["compiled"]
    assert after["call_attributes"] == []


@pytest.mark.parametrize("training", [False, True])
def test_the_model_is_left_as_found(training):
    # In training, batch norm updates its moving statistics and dropout advances its seed
    # generator: both are put back.
    model = _model()
    model(np.ones((2, 4), "float32"))
    before = _snapshot(model)
    count_ops(model, (3, 4), training=training)
    _assert_same(before, _snapshot(model))


def test_the_model_is_left_as_found_when_the_forward_fails():
    model = _model()
    model(np.ones((2, 4), "float32"))
    before = _snapshot(model)
    with pytest.raises(ForwardError):
        count_ops(model, (3, 5), training=True)
    _assert_same(before, _snapshot(model))


def test_a_call_attribute_the_user_set_is_put_back():
    layer = L.Dense(2, name="fc")
    model = keras.Sequential([keras.Input((3,)), layer])
    own_call = layer.call  # the bound method, stored on the instance by the user
    object.__setattr__(layer, "call", own_call)
    count(model, (1, 3))
    assert vars(layer)["call"] is own_call


def test_a_wrong_input_shape_names_the_layer_and_the_shapes():
    model = keras.Sequential([keras.Input((8,)), L.Dense(4, name="fc")], name="net")
    with pytest.raises(ForwardError) as error:
        count_ops(model, (2, 5))
    message = str(error.value)
    assert "'fc'" in message and "Tensor[float32, 2x5]" in message and "(None, 8)" in message


def test_a_failure_inside_a_subclassed_model_names_the_innermost_layer():
    class Net(keras.Model):
        def __init__(self):
            super().__init__(name="net")
            self.body = keras.Sequential([L.Dense(3, name="inner")], name="body")

        def call(self, x):
            return self.body(x)

    model = Net()
    model(np.ones((1, 4), "float32"))  # built for 4 features
    with pytest.raises(ForwardError, match=r"'body.inner'|layer 'body'.*inner"):
        count_ops(model, np.ones((1, 6), "float32"))


def test_a_failing_formula_names_the_layer():
    class Odd(keras.layers.Layer):
        def call(self, x):
            return x

    @register_layer_formula(Odd)
    def broken(call):
        raise ZeroDivisionError("oops")

    try:
        model = keras.Sequential([keras.Input((3,)), Odd(name="odd")])
        with pytest.raises(FormulaError, match=r"layer 'odd' \(Odd\).*Tensor\[float32, 1x3\].*ZeroDivisionError"):
            count_ops(model, (1, 3))
    finally:
        unregister_layer_formula(Odd)


def test_a_non_keras_model_and_an_unknown_method_are_refused():
    with pytest.raises(TypeError, match="Keras 3 layer or model"):
        count_ops(object(), (1, 3))
    model = keras.Sequential([keras.Input((3,)), L.Dense(2)])
    with pytest.raises(ValueError, match="unknown method"):
        count_ops(model, (1, 3), method="magic")
    assert Cost(1, 2) + Cost(3, 4) == Cost(4, 6)


# -- inputs ----------------------------------------------------------------------------------
def test_a_shape_with_no_batch_takes_batch_size():
    # Dense 3 -> 2 on batch 5: 5*3*2 = 30 MACs, 60 + 10 = 70 FLOPs
    model = keras.Sequential([keras.Input((3,)), L.Dense(2)])
    result = count(model, (None, 3), batch_size=5)
    assert (result.macs, result.flops, result.batch_size) == (30, 70, 5)
    assert result.per_sample("macs") == 6
    assert count(model, (None, 3)).batch_size == 1


@pytest.mark.parametrize("inputs, kwargs, match", [
    ((2, 3), {"batch_size": 4}, "batch 2 but batch_size=4"),
    ((2, None), {}, "dimension 1 of the shape"),
    (np.ones((2, 3), "float32"), {"batch_size": 4}, "batch size 2 but batch_size=4"),
])
def test_inconsistent_shapes_are_refused(inputs, kwargs, match):
    model = keras.Sequential([keras.Input((3,)), L.Dense(2)])
    with pytest.raises(ValueError, match=match):
        count_ops(model, inputs, **kwargs)


def test_multi_input_models_take_lists_or_dicts_of_shapes_and_integer_inputs_get_zeros():
    # ids (2,5) int32 -> Embedding(10, 4) (free) -> (2,5,4); features (2,5,4); Add: 40 FLOPs;
    # Dense 4 -> 1 on 10 rows: 40 MACs, 80 + 10 = 90 FLOPs
    ids, feats = keras.Input((5,), dtype="int32", name="ids"), keras.Input((5, 4), name="feats")
    out = L.Dense(1)(L.Add()([L.Embedding(10, 4)(ids), feats]))
    model = keras.Model([ids, feats], out)
    by_list = count(model, [(2, 5), (2, 5, 4)])
    by_dict = count(model, {"ids": (2, 5), "feats": (2, 5, 4)})
    assert (by_list.macs, by_list.flops) == (by_dict.macs, by_dict.flops) == (40, 130)


# -- issue 29: a call that writes a trainable weight; threads ---------------------------------------
class _WritesItsKernel(L.Layer):
    """A Dense-like layer whose call nudges its own trainable kernel (a user's 'online update')."""

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 3), initializer="ones", name="kernel")

    def call(self, x):
        self.kernel.assign_add(keras.ops.ones_like(self.kernel))
        return keras.ops.matmul(x, self.kernel)


def test_a_call_that_writes_a_trainable_weight_is_undone():
    model = keras.Sequential([keras.Input((4,)), _WritesItsKernel(name="writer")])
    model.compile(optimizer="sgd", loss="mse")
    before = _snapshot(model)
    counted = count_ops(model, (2, 4))
    assert counted.macs == 2 * 4 * 3  # (2, 4) @ (4, 3): 24
    _assert_same(before, _snapshot(model))


def test_threads_counting_one_keras_model_never_mix_numbers_nor_leave_wrappers():
    # 3 threads, 12 rounds: every count that comes back is the single-threaded one (Dense(4->8) and
    # Dense(8->2) on 2 rows: 2*4*8 + 2*8*2 = 96 MACs), any other is refused by name; no wrapper stays.
    import threading

    from deeplite_like.safety import ConcurrentMeasurementError

    model = keras.Sequential([keras.Input((4,)), L.Dense(8, name="fc1"), L.Dense(2, name="fc2")])
    model.compile(optimizer="sgd", loss="mse")
    before = _snapshot(model)
    outcomes = []

    def run():
        for _ in range(4):
            try:
                result = count_ops(model, (2, 4))
                outcomes.append((result.macs, result.flops))
            except ConcurrentMeasurementError as exc:
                assert "is being measured by" in str(exc)
                outcomes.append("refused")

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = count_ops(model, (2, 4))
    assert expected.macs == 96
    assert len(outcomes) == 12 and set(outcomes) <= {(expected.macs, expected.flops), "refused"}
    _assert_same(before, _snapshot(model))
