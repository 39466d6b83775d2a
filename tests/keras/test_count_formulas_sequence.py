"""Recurrent, wrapper and attention layers, each against a hand derivation.

RNN convention (formulas/rnn.py, as torch): rows = batch x steps; MACs rows*G*H*(I+H);
FLOPs 2*MACs + rows*G*H per bias vector + rows*H*gate math (LSTM 22, GRU 16, RNN 2).
Attention (formulas/core.py): projections (einsum), scale q, QK^T, softmax 5/score, PV.
"""
import numpy as np
import pytest

keras = pytest.importorskip("keras")

from tests.keras._count_helpers import count, layer_cost  # noqa: E402

L = keras.layers


# -- recurrent layers ------------------------------------------------------------------------
# (2, 5, 6): rows = 10, I = 6, H = 4.
@pytest.mark.parametrize("layer, expected", [
    # MACs 10 * 16 * 10 = 1600; FLOPs 3200 + one bias 10*16 = 160 + gates 10*4*22 = 880 -> 4240
    (lambda: L.LSTM(4), (1600, 4240)),
    (lambda: L.LSTM(4, return_sequences=True), (1600, 4240)),
    # no bias: 3200 + 880 = 4080
    (lambda: L.LSTM(4, use_bias=False), (1600, 4080)),
    # sigmoid for g and c: gates 4 + 3*4 + 2*4 + 4 = 28 -> 10*4*28 = 1120; 3200 + 160 + 1120 = 4480
    (lambda: L.LSTM(4, activation="sigmoid"), (1600, 4480)),
    # MACs 10 * 12 * 10 = 1200; two bias vectors (reset_after) 2 * 10*12 = 240; gates 10*4*16 = 640
    # -> 2400 + 240 + 640 = 3280
    (lambda: L.GRU(4), (1200, 3280)),
    # one bias vector: 2400 + 120 + 640 = 3160
    (lambda: L.GRU(4, reset_after=False), (1200, 3160)),
    # MACs 10 * 4 * 10 = 400; FLOPs 800 + bias 40 + (add, tanh) 10*4*2 = 80 -> 920
    (lambda: L.SimpleRNN(4), (400, 920)),
])
def test_recurrent_layers(layer, expected):
    assert layer_cost(keras, layer(), (2, 5, 6)) == expected


def test_a_generic_rnn_prices_its_cell_once_per_step_and_equals_the_fused_layer():
    # RNN(LSTMCell(4)): 5 steps of the cell on 2 rows: 5 * 2*16*10 = 1600 MACs, 4240 FLOPs.
    # (Keras also runs the cell once more on step 0 to learn its output shape: not counted.)
    model = keras.Sequential([keras.Input((5, 6)), L.RNN(L.LSTMCell(4, name="cell"), name="rnn")])
    result = count(model, (2, 5, 6))
    assert (result.macs, result.flops) == (1600, 4240)
    assert result.by_operator["RNN"].flops == 4240 and "rnn.cell" not in result.by_module


def test_stacked_cells_feed_each_other():
    # StackedRNNCells([GRUCell(4), SimpleRNNCell(3)]) over 5 steps of (2, 6), reset_after GRU:
    #   GRU step: 2*12*(6+4) = 240 MACs; 480 + 2 biases 2*2*12 = 48 + gates 2*4*16 = 128 -> 656
    #   RNN step on the GRU's 4 outputs: 2*3*(4+3) = 42 MACs; 84 + bias 6 + 2*3*2 = 12 -> 102
    #   x 5 steps: MACs 5 * 282 = 1410; FLOPs 5 * 758 = 3790
    cells = [L.GRUCell(4), L.SimpleRNNCell(3)]
    model = keras.Sequential([keras.Input((5, 6)), L.RNN(L.StackedRNNCells(cells))])
    result = count(model, (2, 5, 6))
    assert (result.macs, result.flops) == (1410, 3790)


def test_the_cell_inside_a_fused_layer_is_not_counted_twice():
    result = count(keras.Sequential([keras.Input((5, 6)), L.GRU(4, name="gru")]), (2, 5, 6))
    assert set(result.by_module) == {"", "gru"} and result.by_operator["GRU"].flops == 3280


def test_recurrent_dropout_in_training_multiplies_the_masks():
    # dropout only (implementation 2): + one multiply per input element and step, 10 * 6 = 60
    assert layer_cost(keras, L.LSTM(4, dropout=0.5), (2, 5, 6), training=True) == (1600, 4300)
    # with recurrent_dropout Keras switches to implementation 1, one masked copy per gate:
    # + 4 * 60 (inputs) + 4 * 10*4 (hidden) = 400 -> 4640; inference is unchanged
    layer = L.LSTM(4, dropout=0.5, recurrent_dropout=0.5)
    assert layer.cell.implementation == 1
    assert layer_cost(keras, layer, (2, 5, 6), training=True) == (1600, 4640)
    assert layer_cost(keras, L.LSTM(4, dropout=0.5), (2, 5, 6)) == (1600, 4240)


def test_bidirectional_counts_both_directions_and_its_merge():
    # concat: 2 x 4240, the concatenation is free
    model = keras.Sequential([keras.Input((5, 6)), L.Bidirectional(L.LSTM(4, name="lstm"), name="bi")])
    result = count(model, (2, 5, 6))
    assert (result.macs, result.flops) == (3200, 8480)
    assert result.by_module["bi.forward_lstm"].flops == 4240 == result.by_module["bi.backward_lstm"].flops
    # sum of sequences: + 1 add per output element of (2, 5, 4) = 40 -> 8520
    summed = keras.Sequential([keras.Input((5, 6)),
                               L.Bidirectional(L.LSTM(4, return_sequences=True), merge_mode="sum")])
    assert count(summed, (2, 5, 6)).flops == 8520


def test_time_distributed_runs_its_layer_once_per_step():
    # Dense(3) on each of 5 steps of (2, 4): 5 x (2*4*3 = 24) = 120 MACs; 5 x (48 + 6) = 270 FLOPs
    model = keras.Sequential([keras.Input((5, 4)), L.TimeDistributed(L.Dense(3, name="fc"), name="td")])
    result = count(model, (2, 5, 4))
    assert (result.macs, result.flops) == (120, 270)
    assert result.by_module["td.fc"].calls == 5 and result.by_module["td"].flops == 270


# -- attention -------------------------------------------------------------------------------
def _self_attention(**call_kwargs):
    x = keras.Input((5, 8))
    out = L.MultiHeadAttention(num_heads=2, key_dim=4, name="mha", **call_kwargs.pop("layer", {}))(
        x, x, **call_kwargs)
    return keras.Model(x, out)


# MultiHeadAttention(2 heads, key_dim 4) on (2, 5, 8):
#   q, k, v projections (2,5,8) x (8,2,4): 2*5*8*8 = 640 MACs each, bias 2*5*8 = 80 each
#   scores 2*2*5*5 = 100: QK^T 100*4 = 400 MACs, PV 400 MACs; scale q 80; softmax 500
#   output (2,5,2,4) x (2,4,8): 640 MACs, bias 80
#   MACs 1920 + 800 + 640 = 3360; FLOPs 6720 + 240 + 80 + 80 + 500 = 7620
def test_multi_head_self_attention():
    result = count(_self_attention(), (2, 5, 8))
    assert (result.macs, result.flops) == (3360, 7620)
    assert set(result.by_module) == {"", "mha"}  # projections are priced inside (opaque)


def test_causal_attention_is_dense_by_default_and_half_on_request():
    model = _self_attention(use_causal_mask=True)
    # + the mask add, 1 per score: 7620 + 100 = 7720
    dense = count(model, (2, 5, 8))
    assert (dense.macs, dense.flops) == (3360, 7720)
    # causal_half: QK^T and PV 200 MACs each: MACs 3360 - 400 = 2960;
    # FLOPs 2 * 2960 + biases 320 + scale 80 + softmax 500 + mask 100 = 6920
    half = count(model, (2, 5, 8), causal_half=True)
    assert (half.macs, half.flops) == (2960, 6920)


def test_attention_dropout_in_training_and_the_explicit_path():
    # dropout 0.1 takes Keras' explicit path (its Softmax and Dropout sublayers run inside):
    # inference 7620 as before; training + 2 per score = 7820
    model = _self_attention(layer={"dropout": 0.1})
    assert count(model, (2, 5, 8)).flops == 7620
    assert count(model, (2, 5, 8), training=True).flops == 7820


def test_cross_attention_with_different_lengths_and_sizes():
    # query (2,3,8), value = key (2,5,6), 2 heads, key_dim 4:
    #   q proj 2*3*8*8 = 384 (bias 48); k, v proj 2*5*6*8 = 480 each (bias 80 each)
    #   scores 2*2*3*5 = 60: QK 240, PV 240; scale q 48; softmax 300; output 2*3*8*8 = 384 (bias 48)
    #   MACs 384 + 960 + 480 + 384 = 2208; FLOPs 4416 + 256 + 48 + 300 = 5020
    q, v = keras.Input((3, 8)), keras.Input((5, 6))
    model = keras.Model([q, v], L.MultiHeadAttention(2, 4)(q, v))
    result = count(model, [(2, 3, 8), (2, 5, 6)])
    assert (result.macs, result.flops) == (2208, 5020)


def test_grouped_query_attention_repeats_key_value_heads():
    # head_dim 4, 4 query heads, 2 key/value heads on (2, 5, 8):
    #   q proj 2*5*8*16 = 1280 (bias 160); k, v proj 2*5*8*8 = 640 each (bias 80 each)
    #   scores 2*4*5*5 = 200 (keys repeated to 4 heads): QK 800, PV 800; scale q 160; softmax 1000
    #   output (2,5,4,4) x (4,4,8): 1280 (bias 80)
    #   MACs 1280 + 1280 + 1600 + 1280 = 5440; FLOPs 10880 + 400 + 160 + 1000 = 12440
    x = keras.Input((5, 8))
    model = keras.Model(x, L.GroupQueryAttention(4, 4, 2)(x, x))
    result = count(model, (2, 5, 8))
    assert (result.macs, result.flops) == (5440, 12440)


@pytest.mark.parametrize("layer, expected", [
    # q (2,3,4), v (2,5,4): S = 30. dot: QK 120 MACs; softmax 150; PV 120 MACs -> (240, 480 + 150)
    (lambda: L.Attention(), (240, 630)),
    (lambda: L.Attention(use_scale=True), (240, 660)),  # + the scale, 1 per score
    # concat: per score and feature add, tanh, sum 3 * 120 = 360, + score weight 30; softmax 150;
    # PV 120 MACs -> (120, 240 + 390 + 150)
    (lambda: L.Attention(score_mode="concat"), (120, 780)),
    # additive, scaled: add, tanh, scale, sum 4 * 120 = 480; softmax 150; PV 120 -> (120, 240 + 630)
    (lambda: L.AdditiveAttention(), (120, 870)),
])
def test_luong_and_bahdanau_attention(layer, expected):
    q, v = keras.Input((3, 4)), keras.Input((5, 4))
    model = keras.Model([q, v], layer()([q, v]))
    inputs = [np.ones((2, 3, 4), "float32"), np.ones((2, 5, 4), "float32")]
    result = count(model, inputs)
    assert (result.macs, result.flops) == expected
