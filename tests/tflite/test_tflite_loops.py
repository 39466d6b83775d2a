"""``WHILE`` loops in ``.tflite`` files: the condition and body subgraphs are counted as they run,
trip-count times when the file fixes it (``formulas.trip_count``), else the body once, and said."""
from __future__ import annotations

import numpy as np
import pytest

from tests.tflite.conftest import convert, keras

from deeplite_like.backends.tflite import count_ops  # noqa: E402
from deeplite_like.backends.tflite.formulas import trip_count  # noqa: E402
from deeplite_like.backends.tflite.graph import load_model  # noqa: E402

L = keras.layers


class Counted(L.Layer):
    """``fori_loop(0, 5, h -> h @ W)`` on (1, 8) with W (8, 8)."""

    def build(self, shape):
        self.w = self.add_weight(shape=(8, 8), initializer="ones")

    def call(self, x):
        return keras.ops.fori_loop(0, 5, lambda i, h: keras.ops.matmul(h, self.w), x)


class Open(L.Layer):
    """``while_loop(sum(h) < 100, h -> h * 2)``: how often depends on the data."""

    def call(self, x):
        return keras.ops.while_loop(lambda h: keras.ops.sum(h) < 100.0, lambda h: (h * 2.0,), (x,))[0]


@pytest.fixture(scope="module")
def counted_file():
    return convert(keras.Sequential([keras.Input((8,)), Counted(name="loop")]))


@pytest.mark.slow  # (a conversion: about 2 s)
def test_a_counted_loop_runs_its_body_trip_count_times_as_keras_counts_it(counted_file):
    from deeplite_like.backends.keras.counting import count_ops as count_keras

    model = load_model(counted_file)
    assert model.subgraphs == 3 and [op.op for op in model.ops] == ["WHILE"]
    # the condition compares the counter (entering as the constant 0) with the constant 5; the body adds 1
    assert trip_count(model, model.ops[0]) == 5
    counted = count_ops(counted_file, bytes_moved=True)
    # 5 x (1x8 @ 8x8) = 5 x 64 = 320 MACs, 640 FLOPs; the int32 counter and comparison are free
    assert (counted.macs, counted.flops, counted.untracked) == (320, 640, {})
    live = count_keras(keras.Sequential([keras.Input((8,)), Counted(name="loop")]), (1, 8))
    assert (counted.macs, counted.flops) == (live.macs, live.flops)
    # in running order: LESS, then ADD and FULLY_CONNECTED, five times, then the last LESS: 16 records
    ops = [r.op for r in counted.records]
    assert ops == ["LESS", "ADD", "FULLY_CONNECTED"] * 5 + ["LESS"]
    # each FULLY_CONNECTED reads h (1x8 float32, 32 bytes) and W (8x8, 256) and writes h (32)
    assert {r.bytes for r in counted.records if r.op == "FULLY_CONNECTED"} == {320}


@pytest.mark.slow
def test_a_loop_whose_trip_count_depends_on_the_data_counts_its_body_once_and_says_so():
    data = convert(keras.Sequential([keras.Input((8,)), Open(name="open")]))
    model = load_model(data)
    loops = [op for op in model.ops if op.op == "WHILE"]
    assert loops and trip_count(model, loops[0]) is None
    with pytest.warns(UserWarning, match="trip count not static"):
        counted = count_ops(data)
    # the condition and the body once (a lower bound, said in untracked): SUM of 8 elements (8 FLOPs, the
    # reduction convention), LESS (a comparison: free), MUL h * 2.0 on 8 elements (8): 16 FLOPs
    assert counted.untracked == {"WHILE (trip count not static: body counted once)": 1}
    assert counted.flops == 16
