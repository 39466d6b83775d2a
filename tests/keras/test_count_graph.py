"""``method='graph'`` (TensorFlow's profiler) against the analytic count.

On models where TensorFlow has a FLOP statistic for every op (contractions, bias adds,
max pooling, residual adds) the two methods agree exactly, MACs and FLOPs; elsewhere the
differences are the documented ones (graph.py).
"""
import pytest

keras = pytest.importorskip("keras")
if keras.config.backend() != "tensorflow":
    pytest.skip("method='graph' needs Keras' TensorFlow backend", allow_module_level=True)
tf = pytest.importorskip("tensorflow")

from deeplite_like.backends.keras.counting import UntrackedLayerWarning, count_ops  # noqa: E402
from tests.keras._count_helpers import count  # noqa: E402

L = keras.layers


def _both(model, shape):
    analytic = count(model, shape)
    graph = count(model, shape, method="graph")  # nothing untracked either: the graph is complete
    return analytic, graph


def _residual():
    x = keras.Input((6, 6, 4))
    h = L.Conv2D(4, 3, padding="same")(x)
    h = L.DepthwiseConv2D(3, padding="same")(h)
    h = L.Add()([x, h])
    h = L.MaxPooling2D(2)(h)
    h = L.SeparableConv2D(5, 2)(h)
    h = L.Flatten()(h)
    return keras.Model(x, L.Dense(3)(h))


@pytest.mark.parametrize("build, shape", [
    (lambda: keras.Sequential([keras.Input((8,)), L.Dense(4), L.Dense(3, use_bias=False)]), (2, 8)),
    (lambda: keras.Sequential([keras.Input((10, 3)), L.Conv1D(4, 3, padding="same"), L.Conv1D(2, 3, strides=2)]),
     (2, 10, 3)),
    (lambda: keras.Sequential([keras.Input((8, 8, 3)), L.Conv2D(4, 3, padding="same", dilation_rate=2),
                               L.Conv2D(4, 3, strides=2)]), (2, 8, 8, 3)),
    (lambda: keras.Sequential([keras.Input((4, 4, 4, 2)), L.Conv3D(3, 2)]), (2, 4, 4, 4, 2)),
    (lambda: keras.Sequential([keras.Input((5, 6)), L.EinsumDense("abc,cd->abd", (None, 4), bias_axes="d")]),
     (2, 5, 6)),
    (_residual, (2, 6, 6, 4)),
])
def test_graph_and_analytic_agree_where_both_are_complete(build, shape):
    analytic, graph = _both(build(), shape)
    assert (graph.macs, graph.flops) == (analytic.macs, analytic.flops)
    assert graph.untracked == {} and graph.batch_size == shape[0]


def test_graph_counts_by_tensorflow_op_type_with_macs_from_contractions():
    # Dense 8 -> 4 on batch 2: MatMul 2*(2*8*4) = 128 float ops = 64 MACs; BiasAdd 8
    model = keras.Sequential([keras.Input((8,)), L.Dense(4)])
    graph = count(model, (2, 8), method="graph")
    assert {k: (v.macs, v.flops) for k, v in graph.by_operator.items()} == {"MatMul": (64, 128), "BiasAdd": (0, 8)}
    assert graph.by_module[""].flops == graph.flops == 136


def test_the_batch_is_fixed_because_an_unknown_batch_silently_counts_nothing():
    from deeplite_like.backends.keras.counting.tf_ops import _profile

    model = keras.Sequential([keras.Input((8,)), L.Dense(4)])
    forward = tf.function(lambda x: model(x, training=False), autograph=False)
    unknown = forward.get_concrete_function(tf.TensorSpec((None, 8), tf.float32))
    assert _profile(tf, unknown.graph).total_float_ops == 0  # the profiler's silent undercount
    # count_ops fixes the batch: batch 3 -> 3*8*4 = 96 MACs; 192 + 12 = 204
    graph = count(model, (None, 8), method="graph", batch_size=3)
    assert (graph.macs, graph.flops) == (96, 204)


def test_documented_differences_average_pool_and_activations():
    # AveragePooling2D(2) on (2,4,4,3): out 24; analytic K + 1 = 5 per output (120), TF K = 4 (96)
    pool = keras.Sequential([keras.Input((4, 4, 3)), L.AveragePooling2D(2)])
    assert count(pool, (2, 4, 4, 3)).flops == 120 and count(pool, (2, 4, 4, 3), method="graph").flops == 96
    # ReLU has no TF statistic: the graph misses 1 per element and lists it
    relu = keras.Sequential([keras.Input((4,)), L.Dense(4, activation="relu")])
    with pytest.warns(UntrackedLayerWarning, match="Relu"):
        graph = count_ops(relu, (2, 4), method="graph")
    assert graph.untracked == {"Relu": 1} and count(relu, (2, 4)).flops - graph.flops == 8


def test_a_recurrent_loop_is_invisible_to_the_profiler_and_listed():
    model = keras.Sequential([keras.Input((5, 6)), L.LSTM(4)])
    graph = count_ops(model, (2, 5, 6), method="graph", warn_untracked=False)
    assert "While" in graph.untracked
    assert graph.macs < count(model, (2, 5, 6)).macs  # 1600 analytic: the loop body is not profiled
