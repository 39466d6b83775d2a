"""Model structure and attribution: Sequential, functional, subclassed, nested and shared
layers, functional-graph operations, user layers (containers, untracked, registered), and
the layer paths ``by_module`` is keyed by.
"""
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras.counting import (  # noqa: E402
    Cost,
    UntrackedLayerWarning,
    count_ops,
    register_free_layer,
    register_layer_formula,
    unregister_layer_formula,
)
from tests.keras._count_helpers import count  # noqa: E402

L = keras.layers


def _stats(result, name):
    s = result.by_module[name]
    return s.macs, s.flops, s.calls


def test_nested_models_and_a_shared_layer_counted_once_per_call():
    # batch 3. Dense 4 -> 4: 3*4*4 = 48 MACs, 96 + 12 (bias) = 108 FLOPs per call; head 4 -> 2:
    # 24 MACs, 48 + 6 = 54. shared runs twice, block.fc once, head once:
    # MACs 3 * 48 + 24 = 168; FLOPs 3 * 108 + 54 = 378
    shared = L.Dense(4, name="shared")
    block = keras.Sequential([keras.Input((4,)), L.Dense(4, name="fc")], name="block")
    x = keras.Input((4,))
    out = L.Dense(2, name="head")(shared(block(shared(x))))
    model = keras.Model(x, out, name="net")
    result = count(model, (3, 4))
    assert (result.macs, result.flops, result.batch_size) == (168, 378, 3)
    assert _stats(result, "") == (168, 378, 1)
    assert _stats(result, "shared") == (96, 216, 2)
    assert _stats(result, "block") == _stats(result, "block.fc") == (48, 108, 1)
    assert _stats(result, "head") == (24, 54, 1)
    assert result.by_operator["Dense"].calls == 4 and result.by_operator["Dense"].flops == 378
    assert result.module_ops["block.fc"] == {"Dense": result.by_module["block.fc"]}
    assert "block" not in result.module_ops  # a container does no arithmetic of its own


class _Block(keras.layers.Layer):
    """A user layer whose sublayers do all its work: a container."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fc1 = L.Dense(6, name="fc1")
        self.fc2 = L.Dense(4, name="fc2")

    def call(self, x):
        return self.fc2(self.fc1(x))


class _Scale(keras.layers.Layer):
    """A user layer doing arithmetic itself with keras.ops: priced op by op unless given a formula."""

    def call(self, x):
        return keras.ops.multiply(x, 2.0)


class _Net(keras.Model):
    def __init__(self):
        super().__init__(name="net")
        self.block = _Block(name="block")
        self.scale = _Scale(name="scale")
        self.head = L.Dense(2, name="head")

    def call(self, x):
        return self.head(self.scale(self.block(x)))


def test_a_subclassed_model_with_user_layers():
    # batch 2: block.fc1 4 -> 6: 48 MACs, 96 + 12 = 108; block.fc2 6 -> 4: 48 MACs, 96 + 8 = 104;
    # scale: its own op, x * 2 (tf.Mul), 1 per element: 2*4 = 8; head 4 -> 2: 16 MACs, 32 + 4 = 36.
    # MACs 112; FLOPs 108 + 104 + 8 + 36 = 256
    model = _Net()
    model(keras.ops.zeros((2, 4)))
    result = count(model, (2, 4))
    assert (result.macs, result.flops) == (112, 256)
    assert result.untracked == {}
    assert _stats(result, "block") == (96, 212, 1)  # the container is its children
    assert _stats(result, "block.fc1") == (48, 108, 1) and _stats(result, "block.fc2") == (48, 104, 1)
    assert _stats(result, "scale") == (0, 8, 1)
    assert {k: (v.flops, v.calls) for k, v in result.module_ops["scale"].items()} == {"tf.Mul": (8, 1)}


def test_an_op_with_no_cost_in_a_user_layer_is_untracked_by_op_name(monkeypatch):
    # the same model with TensorFlow's Mul taken out of the op table: _Scale's own x * 2 has no
    # cost known -> counted 0 and listed as tf.Mul (1 call), never silent. FLOPs 256 - 8 = 248
    from deeplite_like.backends.keras.counting import tf_ops

    monkeypatch.delitem(tf_ops.TF_COSTS, "Mul")
    model = _Net()
    model(keras.ops.zeros((2, 4)))
    with pytest.warns(UntrackedLayerWarning, match=r"tf\.Mul \(1 call\)"):
        result = count_ops(model, (2, 4))
    assert (result.macs, result.flops) == (112, 248)
    assert result.untracked == {"tf.Mul": 1}
    assert _stats(result, "scale") == (0, 0, 1)


def test_registering_a_formula_prices_the_user_layer():
    model = _Net()
    model(keras.ops.zeros((2, 4)))

    @register_layer_formula(_Scale)
    def scale(call):
        """x * 2: 1 FLOP per element."""
        return Cost.elementwise(call.output.numel)

    try:
        result = count(model, (2, 4))  # nothing untracked now
    finally:
        unregister_layer_formula(_Scale)
    # 248 + 2*4 = 256
    assert result.flops == 256 and result.by_operator["_Scale"].flops == 8


def test_registration_rules():
    with pytest.raises(ValueError, match="already has the formula"):
        register_layer_formula(keras.layers.Dense)(lambda call: Cost())
    with pytest.raises(TypeError, match="layer classes or public names"):
        register_layer_formula(42)
    # a free mark silences the untracked warning and costs 0
    register_free_layer(_Scale)
    try:
        model = _Net()
        model(keras.ops.zeros((2, 4)))
        assert count(model, (2, 4)).flops == 248
    finally:
        unregister_layer_formula(_Scale)


def test_overriding_a_built_in_and_putting_it_back():
    model = keras.Sequential([keras.Input((3,)), L.Dense(2, name="fc")])
    register_layer_formula(keras.layers.Dense, override=True)(lambda call: Cost.contraction(1))
    try:
        assert (count(model, (1, 3)).macs, count(model, (1, 3)).flops) == (1, 2)
    finally:
        unregister_layer_formula(keras.layers.Dense)
    # the built-in applies again: 1*3*2 = 6 MACs, 12 + 2 (bias) = 14 FLOPs
    assert (count(model, (1, 3)).macs, count(model, (1, 3)).flops) == (6, 14)


def test_an_opaque_formula_hides_the_calls_inside_and_a_transparent_one_adds_to_them():
    model = _Net()
    model(keras.ops.zeros((2, 4)))
    register_free_layer(_Scale)
    try:
        register_layer_formula(_Block)(lambda call: Cost.contraction(1000))  # opaque by default
        opaque = count(model, (2, 4))
        register_layer_formula(_Block, opaque=False, override=True)(lambda call: Cost.elementwise(7))
        transparent = count(model, (2, 4))
    finally:
        unregister_layer_formula(_Block, _Scale)
    # opaque: block = 1000 MACs / 2000 FLOPs, its Dense calls are not counted or listed; + head
    assert _stats(opaque, "block") == (1000, 2000, 1) and "block.fc1" not in opaque.by_module
    assert (opaque.macs, opaque.flops) == (1016, 2036)
    # transparent: the children (96 MACs, 212 FLOPs) + 7 of its own
    assert _stats(transparent, "block") == (96, 219, 1) and transparent.module_ops["block"]["_Block"].flops == 7


def test_operations_of_a_functional_graph_are_counted():
    # batch 2: Dense 4 -> 4: 32 MACs, 64 + 8 = 72; h * 2.0: 8; + x: 8; relu: 8; slicing: free
    x = keras.Input((4,))
    h = L.Dense(4, name="fc")(x)
    y = keras.ops.relu(h * 2.0 + x)[:, :3]
    model = keras.Model(x, y)
    result = count(model, (2, 4))
    assert (result.macs, result.flops) == (32, 96)
    assert {k: v.flops for k, v in result.by_operator.items()} == {
        "Dense": 72, "ops.Multiply": 8, "ops.Add": 8, "ops.Relu": 8}


def _lambdas():
    return keras.Sequential([keras.Input((4,)), L.Lambda(lambda t: t * 3.0, name="triple"),
                             L.Lambda(lambda t: t + 1.0, name="shift")])


def test_lambda_layers_are_priced_by_their_ops():
    # batch 2, 4 features: t * 3 (tf.Mul) 8 FLOPs, t + 1 (tf.AddV2) 8 FLOPs; no MACs
    result = count(_lambdas(), (2, 4))
    assert (result.macs, result.flops, result.untracked) == (0, 16, {})
    assert _stats(result, "triple") == (0, 8, 1) and _stats(result, "shift") == (0, 8, 1)
    assert {k: v.flops for k, v in result.by_operator.items()} == {"tf.Mul": 8, "tf.AddV2": 8}


def test_ops_with_no_cost_are_untracked_and_warned_about_once(monkeypatch):
    from deeplite_like.backends.keras.counting import tf_ops

    monkeypatch.delitem(tf_ops.TF_COSTS, "Mul")
    monkeypatch.delitem(tf_ops.TF_COSTS, "AddV2")
    model = _lambdas()
    with pytest.warns(UntrackedLayerWarning) as caught:
        result = count_ops(model, (2, 4))
    assert result.untracked == {"tf.Mul": 1, "tf.AddV2": 1} and result.flops == 0
    assert len([w for w in caught if issubclass(w.category, UntrackedLayerWarning)]) == 1
    assert "tf.AddV2 (1 call), tf.Mul (1 call)" in str(caught[0].message)
    assert count_ops(model, (2, 4), warn_untracked=False).untracked == {"tf.Mul": 1, "tf.AddV2": 1}


def test_siblings_with_the_same_name_get_distinct_paths():
    class Twin(keras.Model):
        def __init__(self):
            super().__init__(name="twin")
            self.a = L.Dense(3, name="fc")
            self.b = L.Dense(3, name="fc")

        def call(self, x):
            return self.b(self.a(x))

    model = Twin()
    model(keras.ops.zeros((1, 3)))
    result = count(model, (1, 3))
    # each: 1*3*3 = 9 MACs, 18 + 3 = 21 FLOPs
    assert _stats(result, "fc") == (9, 21, 1) and _stats(result, "fc_1") == (9, 21, 1)


def test_an_unbuilt_subclassed_model_is_built_by_the_count():
    model = _Net()
    assert not model.built
    result = count(model, (2, 4))
    assert model.built and (result.macs, result.flops) == (112, 256)  # as test_a_subclassed_model_with_user_layers
