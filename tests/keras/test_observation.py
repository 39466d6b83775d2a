"""Keras: MACs/FLOPs and the per-layer table read from one recorded forward per status computation."""
from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras import KerasProfiler  # noqa: E402
from deeplite_like.backends.keras.compute import ComputeComplexity, ComputeLayerwiseSummary  # noqa: E402
from deeplite_like.backends.keras.params import layerwise_summary  # noqa: E402


class CountedDense(keras.layers.Layer):
    """Dense(3) that counts the times its ``call`` runs in Python (eager runs: each forward once)."""

    calls = 0

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], 3), initializer="ones")

    def call(self, x):
        CountedDense.calls += 1
        return keras.ops.matmul(x, self.kernel)


def model() -> keras.Model:
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.ReLU()(CountedDense(name="dense")(inputs)))


def test_complexity_and_layers_share_one_recorded_forward():
    net = model()
    x = np.ones((2, 4), "float32")
    profiler = KerasProfiler(net, {"test": [(x, np.zeros(2))]}, register_defaults=False)
    profiler.register_default_function(ComputeComplexity())
    profiler.register_default_function(ComputeLayerwiseSummary())
    CountedDense.calls = 0
    profiler.compute_network_status(batch_size=2)
    assert CountedDense.calls == 1  # one forward for both keys (two before)
    # matmul 2x4 by 4x3: 2 * 4 * 3 = 24 MACs
    assert profiler.get_status("macs").value == 24
    rows = {row["module"]: row for row in profiler.get_status("layerwise_summary").value.rows}
    assert rows["dense"]["macs"] == 24 and rows["dense"]["output_shapes"] == "2x3"
    # the table equals the one layerwise_summary makes alone
    alone = {row["module"]: row for row in layerwise_summary(net, x).rows}
    assert alone["dense"] == rows["dense"]


def test_get_model_profile_counts_once_then_times():
    import deeplite_like

    net = model()
    net(np.ones((2, 4), "float32"))  # built
    CountedDense.calls = 0
    profile = deeplite_like.get_model_profile(net, args=(np.ones((2, 4), "float32"),), print_profile=False)
    # the counted call is the first warm-up (warm_up=1): counted, timed, then one call timing each layer
    assert CountedDense.calls == 3
    assert profile.macs == 24
