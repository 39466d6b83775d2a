"""``counting/jax_ops.py`` on plain jaxprs (``jax.make_jaxpr``, no Keras backend switch): primitive
prices, loops, branches and unknown primitives. Importing jax here does not change Keras' backend.
"""
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from deeplite_like.backends.keras.counting.jax_ops import UNKNOWN_WHILE, count_jaxpr  # noqa: E402


def _count(f, *args):
    return count_jaxpr(jax.make_jaxpr(f)(*args))


def test_dot_general_with_a_batch_dimension():
    # (2, 3, 4) @ (2, 4, 5): batch 2 x free 3*5 x contracting 4 = 120 MACs, 240 FLOPs
    r = _count(lambda a, b: a @ b, jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5)))
    assert (r.macs, r.flops, r.untracked) == (120, 240, {})


def test_grouped_convolution_counts_its_groups():
    # depthwise 3x3 over 4 channels (feature_group_count 4), 6x6 -> 4x4 valid:
    # out 1*4*4*4 = 64 elements x (C_in/groups = 1) x 9 = 576 MACs
    x, w = jnp.ones((1, 4, 6, 6)), jnp.ones((4, 1, 3, 3))
    r = _count(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=4), x, w)
    assert (r.macs, r.flops) == (576, 1152)


def test_transposed_convolution_is_priced_by_its_input():
    # lhs_dilation 2 (a stride-2 transposed conv), 3x3 kernel 2 -> 3 channels, input 1x2x4x4:
    # numel(in) 32 x C_out 3 x 9 = 864 MACs (as torch's conv_transpose)
    x, w = jnp.ones((1, 2, 4, 4)), jnp.ones((3, 2, 3, 3))
    r = _count(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), ((2, 2), (2, 2)), lhs_dilation=(2, 2)), x, w)
    assert r.macs == 864


def test_elementwise_reductions_and_free_ops():
    # exp 6 + sum over 6 inputs 6 + add 2 = 14 FLOPs; reshape and transpose free
    r = _count(lambda x: jnp.exp(x.reshape(3, 2).T).sum(axis=1) + 1.0, jnp.ones((6,)))
    assert (r.macs, r.flops, r.untracked) == (0, 14, {})


def test_integer_arithmetic_is_free():
    r = _count(lambda i: i * 3 + 1, jnp.ones((5,), jnp.int32))
    assert (r.macs, r.flops) == (0, 0)


def test_a_while_with_a_provable_trip_count_counts_every_trip():
    # counter from 0 by 1 while < 5: 5 trips of a (1x4)@(4x4) = 16 MACs -> 80 MACs
    def f(x, w):
        return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] @ w), (0, x))[1]

    r = _count(f, jnp.ones((1, 4)), jnp.ones((4, 4)))
    assert (r.macs, r.untracked) == (80, {})


def test_a_while_with_an_unknown_trip_count_is_counted_once_and_named():
    # the bound is an argument: the body is counted once (16 MACs) and the loop named as untracked
    def f(n, x, w):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] @ w), (0, x))[1]

    r = _count(f, 5, jnp.ones((1, 4)), jnp.ones((4, 4)))
    assert r.macs == 16 and r.untracked == {UNKNOWN_WHILE: 1}


def test_a_cond_counts_its_costliest_branch():
    # branch 1: (1x4)@(4x4) = 16 MACs; branch 0: a negation, 4 FLOPs -> the matmul branch, 16 MACs 32 FLOPs
    def f(p, x, w):
        return lax.cond(p, lambda x: x @ w, lambda x: -x, x)

    r = _count(f, True, jnp.ones((1, 4)), jnp.ones((4, 4)))
    assert (r.macs, r.flops) == (16, 32)


def test_an_unknown_primitive_is_untracked_by_name_never_a_silent_zero():
    r = _count(lambda x: jnp.fft.fft(x), jnp.ones((8,), jnp.complex64))
    assert r.untracked == {"jax.fft": 1}


def test_sigmoid_and_softmax_follow_the_torch_conventions():
    # sigmoid: 4 FLOPs per element (neg, exp, add, divide) -> 3 elements: 12
    assert _count(jax.nn.sigmoid, jnp.ones((3,))).flops == 12
    # softmax over rows of 4, 2 rows: max, sub, exp, sum, div = 5 per element -> 40 (torch's softmax
    # formula); jax's guard max(-inf, row max) is the identity on the row max: free -> 40
    assert _count(lambda x: jax.nn.softmax(x, axis=-1), jnp.ones((2, 4))).flops == 40


def test_arithmetic_on_scalars_alone_is_free_as_on_tensorflow_and_torch():
    # 1 / sqrt(8.0) on a rank-0 value (a scale computed from a shape): 0, as Keras' TensorFlow and torch
    # taps price it; the same ops on 3 elements: sqrt 3 + div 3 = 6
    assert _count(lambda s: 1.0 / jnp.sqrt(s), jnp.float32(8.0)).flops == 0
    assert _count(lambda x: 1.0 / jnp.sqrt(x), jnp.ones((3,))).flops == 6
