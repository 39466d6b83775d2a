"""``results.TensorLifetimes``: the live-tensor peak of a file's graph and the arena a static planner lays it out in."""
from __future__ import annotations

import random

import pytest

from deeplite_like.results import TensorLifetimes


def chain() -> TensorLifetimes:
    """Three steps. a (100 B, a graph input, held to the end), b (200 B, made at step 0, read at 1),
    c (100 B, made at 1, read at 2), d (50 B, made at 2, the output)."""
    t = TensorLifetimes(3)
    t.born("a", 0, 100)
    t.keep("a")
    t.born("b", 0, 200)
    t.read("b", 1)
    t.born("c", 1, 100)
    t.read("c", 2)
    t.born("d", 2, 50)
    t.keep("d")
    return t


def test_the_live_peak_and_the_planned_arena_of_a_chain():
    stats = chain().stats(["n0", "n1", "n2"], input_bytes=100, output_bytes=50)
    # live: n0 a + b = 300; n1 a + b + c = 400; n2 a + c + d = 250
    assert stats.by_step == {"n0": 300, "n1": 400, "n2": 250} and (stats.peak_bytes, stats.peak_at) == (400, "n1")
    # sizes rounded to 64: a 128, b 256, c 128, d 64. Largest first: b at 0; a overlaps b: above it, 256;
    # c overlaps both: 384; d (step 2 only) overlaps a and c but not b, and b's 256 bytes below them are
    # free at step 2: d at 0. Arena 384 + 128 = 512 = the aligned peak at n1 (256 + 128 + 128)
    plan = chain().plan()
    assert plan.offsets == {"b": 0, "a": 256, "c": 384, "d": 0} and plan.arena_bytes == 512
    assert stats.arena_bytes == 512


def test_views_share_their_storage_and_alignment_is_a_choice():
    t = TensorLifetimes(2)
    t.born("x", 0, 64)
    t.view("x_view", "x", 0)  # a Reshape of x: no storage of its own; reading it at step 1 keeps x alive
    t.read("x_view", 1)
    t.born("y", 1, 64)
    stats = t.stats(["reshape", "relu"], input_bytes=64, output_bytes=64)
    assert stats.tensors == 2 and stats.by_step == {"reshape": 64, "relu": 128}
    assert t.plan(alignment=1).arena_bytes == 128 and t.plan(alignment=256).arena_bytes == 512
    with pytest.raises(ValueError, match="alignment"):
        t.plan(alignment=0)


def test_no_two_overlapping_storages_share_a_byte_and_the_arena_holds_the_peak():
    rng = random.Random(0)
    for _ in range(50):
        steps = rng.randint(1, 12)
        t = TensorLifetimes(steps)
        spans = {}
        for k in range(rng.randint(1, 20)):
            start = rng.randrange(steps)
            end = rng.randrange(start, steps)
            t.born(k, start, rng.randint(1, 500))
            t.read(k, end)
            spans[k] = (start, end)
        plan = t.plan()
        sizes = {k: -(-t._size[k] // 64) * 64 for k in spans}
        for a in spans:
            for b in spans:
                if a < b and spans[a][0] <= spans[b][1] and spans[b][0] <= spans[a][1]:
                    lo_a, lo_b = plan.offsets[a], plan.offsets[b]
                    assert lo_a + sizes[a] <= lo_b or lo_b + sizes[b] <= lo_a, (a, b)
        aligned_peak = max(sum(sizes[k] for k, (s, e) in spans.items() if s <= step <= e) for step in range(steps))
        assert plan.arena_bytes >= aligned_peak
        assert plan.arena_bytes == max(plan.offsets[k] + sizes[k] for k in spans)
