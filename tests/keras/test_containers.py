"""A Keras layer that holds sublayers but is never called itself adds up like the torch ModuleList.

``Outer`` keeps ``stack = Sequential([Dense(8), Dense(8)], name='stack')`` and calls the two Dense layers one by
one, never ``stack`` itself; a ``Dense(2)`` head follows. Batch 1:
    each Dense(8): MACs 8*8 = 64; FLOPs 2*64 + bias 8 = 136
    outer.stack (never called): MACs 128, FLOPs 272, calls 0
    head Dense(2): MACs 16; FLOPs 2*16 + 2 = 34
    model: MACs 144, FLOPs 306
"""
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras.counting import count_ops  # noqa: E402
from deeplite_like.results import OpStats  # noqa: E402


class Outer(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.stack = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(8)], name="stack")

    def build(self, input_shape):
        self.stack.build(input_shape)

    def call(self, x):
        for layer in self.stack.layers:
            x = layer(x)
        return x


def model():
    inputs = keras.Input((8,))
    return keras.Model(inputs, keras.layers.Dense(2, name="head")(Outer(name="outer")(inputs)))


def test_count_ops_rolls_up_a_never_called_holder_of_layers():
    counted = count_ops(model(), (1, 8))
    assert counted.by_module["outer.stack"] == OpStats(128, 272, 0)
    assert counted.by_module["outer"] == OpStats(128, 272, 1)
    assert (counted.macs, counted.flops) == (144, 306)


def test_keras_tree_has_no_negative_gap():
    import deeplite_like

    profile = deeplite_like.get_model_profile(model(), input_shape=(1, 8), print_profile=False, warm_up=0)
    holder = next(node for node in profile.modules() if node.container)
    assert (holder.macs, holder.flops, holder.calls) == (128, 272, 0)
    assert all(node.gap.macs >= 0 and node.gap.flops >= 0 for node in profile.modules())
    assert (profile.macs, profile.flops) == (144, 306)
