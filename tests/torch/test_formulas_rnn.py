"""Recurrent layers. Per layer and direction, rows = steps x batch (sum of batch sizes when packed):

MACs  = rows * G*H * (I + H)      (G gates: LSTM 4, GRU 3, RNN 1)
FLOPs = 2*MACs + 2 * rows * G*H (biases) + rows * H * c   (c: LSTM 22, GRU 16, RNN 2)

CPU runs nn.LSTM as the fused ``mkldnn_rnn_layer`` and everything else decomposed; the fused
formula must equal the decomposition exactly (checked by switching oneDNN off, and on meta).
"""
import warnings

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from deeplite_like.backends.torch.counting.formulas.rnn import GRU, LSTM, recurrent_layer_cost
from deeplite_like.backends.torch.counting.registry import OpCall, lookup
from tests.torch._formula_harness import aten, call, count, run_counted

torch.manual_seed(0)
X = torch.randn(3, 2, 4)  # T=3, B=2, I=4 -> rows 6


def _decomposed(fn, *inputs):
    """The count of ``fn(*inputs)`` with oneDNN off: CPU LSTM then runs as addmm/sigmoid/tanh/mul/add."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about oneDNN TF32 when the flag is toggled
        with torch.backends.mkldnn.flags(enabled=False):
            return run_counted(lambda: fn(*inputs))


def test_lstm_fused_layer_equals_its_decomposition():
    # LSTM(4, 5): rows 6, G*H = 20: MACs = 6*20*(4+5) = 1080;
    # FLOPs = 2160 + biases 2*6*20 = 240 + gate math 6*5*22 = 660 -> 3060
    lstm = nn.LSTM(4, 5)
    fused = run_counted(lambda: lstm(X))
    assert fused.ops.keys() == {"aten.mkldnn_rnn_layer"}
    decomposed = _decomposed(lstm, X)
    assert "aten.mkldnn_rnn_layer" not in decomposed.ops
    assert (fused.macs, fused.flops) == (decomposed.macs, decomposed.flops) == (1080, 3060)
    assert (count(lstm, X, meta=True).macs, count(lstm, X, meta=True).flops) == (1080, 3060)


def test_lstm_bidirectional_two_layers():
    # layer 0, each direction: 1080 MACs, 3060 FLOPs; layer 1 input 2*5 = 10:
    # MACs = 6*20*(10+5) = 1800, FLOPs = 3600 + 240 + 660 = 4500. Total: 2*(1080 + 1800) = 5760 MACs,
    # 2*(3060 + 4500) = 15120 FLOPs
    lstm = nn.LSTM(4, 5, num_layers=2, bidirectional=True)
    fused = count(lstm, X)
    assert fused.by_operator["aten.mkldnn_rnn_layer"].calls == 4
    decomposed = _decomposed(lstm, X)
    assert (fused.macs, fused.flops) == (decomposed.macs, decomposed.flops) == (5760, 15120)


def test_lstm_batch_first_and_no_bias():
    # batch_first (2, 3, 4) is the same 6 rows: 1080 MACs; bias=False drops the 240 bias FLOPs
    lstm = nn.LSTM(4, 5, batch_first=True, bias=False)
    x = X.transpose(0, 1).contiguous()
    fused = count(lstm, x)
    decomposed = _decomposed(lstm, x)
    assert (fused.macs, fused.flops) == (decomposed.macs, decomposed.flops) == (1080, 2820)


def test_lstm_with_projection_decomposes():
    # proj_size=3 (decomposed on CPU): recurrent input is 3: MACs = 6*20*(4+3) + projection 6*5*3 = 930;
    # FLOPs = 1860 + 240 + 660 = 2760
    lstm = nn.LSTM(4, 5, proj_size=3)
    result = count(lstm, X)
    assert (result.macs, result.flops) == (930, 2760)
    assert recurrent_layer_cost(LSTM, 6, 4, 5, True, proj=3) == (930, 2760)


@pytest.mark.parametrize("module, macs, flops", [
    # GRU(4, 5): G*H = 15: MACs = 6*15*9 = 810; FLOPs = 1620 + 2*6*15 = 180 + 6*5*16 = 480 -> 2280
    (nn.GRU(4, 5), 810, 2280),
    # RNN(4, 5) tanh / relu: G*H = 5: MACs = 6*5*9 = 270; FLOPs = 540 + 60 + 6*5*2 = 660
    (nn.RNN(4, 5), 270, 660),
    (nn.RNN(4, 5, nonlinearity="relu"), 270, 660),
    # GRU(4, 5, num_layers=2, bidirectional=True): layer 0: 2 * 810; layer 1 (input 10): 6*15*15 = 1350 each
    # -> MACs 2*(810 + 1350) = 4320; FLOPs 2*(2280 + 2700 + 180 + 480) = 2*(2280 + 3360) = 11280
    (nn.GRU(4, 5, num_layers=2, bidirectional=True), 4320, 11280),
])
def test_decomposed_rnns_match_the_same_formula(module, macs, flops):
    result = count(module, X)
    assert (result.macs, result.flops) == (macs, flops)


def test_fused_formula_for_modes_that_cpu_decomposes():
    # mkldnn_rnn_layer / cuDNN could run GRU too: the formula gives the decomposed GRU's count
    assert recurrent_layer_cost(GRU, 6, 4, 5, True) == (810, 2280)


@pytest.mark.parametrize("module, macs, flops", [
    # LSTM, lengths [3, 1]: batch sizes [2, 1, 1] -> 4 rows: MACs 4*20*9 = 720; FLOPs 1440 + 160 + 4*5*22 = 2040
    (nn.LSTM(4, 5), 720, 2040),
    # GRU: 4 rows: MACs 4*15*9 = 540; FLOPs 1080 + 120 + 4*5*16 = 1520
    (nn.GRU(4, 5), 540, 1520),
    # bidirectional 2-layer GRU: layer 0 2*540; layer 1 (input 10) 4*15*15 = 900 each -> MACs 2880;
    # FLOPs 2*1520 + 2*(1800 + 120 + 320) = 3040 + 4480 = 7520
    (nn.GRU(4, 5, num_layers=2, bidirectional=True), 2880, 7520),
])
def test_packed_sequences_count_only_real_steps(module, macs, flops):
    packed = pack_padded_sequence(torch.randn(3, 2, 4), torch.tensor([3, 1]))
    result = count(module, packed)
    assert (result.macs, result.flops) == (macs, flops)


@pytest.mark.parametrize("cell, macs, flops", [
    # one step, batch 2: LSTMCell MACs 2*20*9 = 360, FLOPs 720 + 80 + 2*5*22 = 1020
    (nn.LSTMCell(4, 5), 360, 1020),
    # GRUCell: 2*15*9 = 270; 540 + 60 + 2*5*16 = 760
    (nn.GRUCell(4, 5), 270, 760),
    # RNNCell: 2*5*9 = 90; 180 + 20 + 2*5*2 = 220
    (nn.RNNCell(4, 5), 90, 220),
])
def test_cells(cell, macs, flops):
    result = count(cell, torch.randn(2, 4))
    assert (result.macs, result.flops) == (macs, flops)


def test_cuda_fused_rnn_ops_priced_on_meta():
    meta = dict(device="meta")
    # _cudnn_rnn: a 1-layer LSTM(4, 5) over (3, 2, 4): as mkldnn_rnn_layer, 1080 MACs, 3060 FLOPs
    x = torch.empty(3, 2, 4, **meta)
    w = [torch.empty(20, 4, **meta), torch.empty(20, 5, **meta), torch.empty(20, **meta), torch.empty(20, **meta)]
    h = torch.empty(1, 2, 5, **meta)
    assert call(aten._cudnn_rnn.default, x, w, 4, None, h, h, LSTM, 5, 0, 1, False, 0.0, True, False, [], None) \
        == (1080, 3060)
    # fused LSTM cell on precomputed gates, batch 2, H 5: 2*5*22 = 220 + two biases 2*(2*20) = 80 -> 300
    gates, cx, bias = torch.empty(2, 20, **meta), torch.empty(2, 5, **meta), torch.empty(20, **meta)
    assert call(aten._thnn_fused_lstm_cell.default, gates, gates, cx, bias, bias) == (0, 300)
    # fused GRU cell (no meta kernel: priced from its arguments): 2*5*16 = 160 + two biases 2*(2*15) = 60 -> 220
    gates, bias = torch.empty(2, 15, **meta), torch.empty(15, **meta)
    op = aten._thnn_fused_gru_cell.default
    assert lookup(op)(OpCall(op, (gates, gates, cx, bias, bias), {}, None)) == (0, 220)


def test_lstm_fused_backward_and_its_decomposition():
    # mkldnn_rnn_layer_backward computes every gradient: MACs 2*1080 = 2160;
    # FLOPs 4320 + bias grads 2*6*20 = 240 + gate math 6*5*23 = 690 -> 5250
    lstm = nn.LSTM(4, 5)
    x = torch.randn(3, 2, 4, requires_grad=True)
    h0, c0 = torch.zeros(1, 2, 5, requires_grad=True), torch.zeros(1, 2, 5, requires_grad=True)

    def step():
        for tensor in (x, h0, c0, *lstm.parameters()):
            tensor.grad = None  # each run starts without grads: no accumulation adds
        lstm(x, (h0, c0))[0].sum().backward()
    fused = run_counted(step)
    assert fused.op("aten.mkldnn_rnn_layer_backward") == (2160, 5250)
    decomposed = _decomposed(step)
    # with every gradient needed, the decomposition does the same products; it skips the dh and dc adds
    # of the last step (2*B*H = 20) and accumulates dW_hh, db_hh per step ((T-1)*(4H*H + 4H) = 2*120 = 240)
    assert decomposed.macs == fused.macs
    assert decomposed.flops - fused.flops == 240 - 20


def test_cuda_fused_rnn_backward_ops_priced_from_arguments():
    meta = dict(device="meta")
    x = torch.empty(3, 2, 4, **meta)
    w = [torch.empty(20, 4, **meta), torch.empty(20, 5, **meta), torch.empty(20, **meta), torch.empty(20, **meta)]
    h = torch.empty(1, 2, 5, **meta)
    # _cudnn_rnn_backward, 1-layer LSTM(4, 5) over 6 rows: as mkldnn_rnn_layer_backward, 2160 MACs, 5250 FLOPs
    op = aten._cudnn_rnn_backward.default
    args = (x, w, 4, x, h, h, x, x, h, h, LSTM, 5, 0, 1, False, 0.0, True, False, [], None, x, [True] * 4)
    assert lookup(op)(OpCall(op, args, {}, None)) == (2160, 5250)
    # fused LSTM cell backward, batch 2, H 5: 2*5*(23 + 4 bias) = 270; GRU: 2*5*(16 + 6) = 220
    cx = torch.empty(2, 5, **meta)
    op = aten._thnn_fused_lstm_cell_backward_impl.default
    assert lookup(op)(OpCall(op, (cx, cx, cx, cx, torch.empty(2, 20, **meta), True), {}, None)) == (0, 270)
    op = aten._thnn_fused_gru_cell_backward.default
    assert lookup(op)(OpCall(op, (cx, torch.empty(2, 25, **meta), True), {}, None)) == (0, 220)
