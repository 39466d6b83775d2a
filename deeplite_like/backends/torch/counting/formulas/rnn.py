"""Recurrent layers that reach the counter as one fused op.

On CPU, ``nn.LSTM`` (no projection, not packed) runs as ``mkldnn_rnn_layer``, one call per
layer and direction; GRU, vanilla RNN, LSTM with ``proj_size`` and packed sequences
decompose into ``addmm``/``mm``, ``sigmoid``, ``tanh``, ``mul``, ``add`` (priced by those
ops' formulas). The fused ops here are priced as exactly that decomposition, so the count
does not depend on which path ran.

The forward's count is in ``recurrent_layer_cost``, the backward's in
``recurrent_layer_backward_cost``.
"""
from __future__ import annotations

from ..registry import Cost, OpCall, register_formula
from ._common import bind, numel, ops, shape

RNN_RELU, RNN_TANH, LSTM, GRU = 0, 1, 2, 3  # the mode numbers of mkldnn / cuDNN
GATES = {RNN_RELU: 1, RNN_TANH: 1, LSTM: 4, GRU: 3}
GATE_MATH = {RNN_RELU: 2, RNN_TANH: 2, LSTM: 22, GRU: 16}
GATE_MATH_BACKWARD = {RNN_RELU: 2, RNN_TANH: 4, LSTM: 23, GRU: 16}


def recurrent_layer_cost(mode: int, rows: int, input_size: int, hidden: int, biases: bool, proj: int = 0) -> Cost:
    """One layer, one direction, over ``rows`` (time x batch) input vectors.

    Per layer and direction, with ``rows`` = time steps x
    batch (``sum(batch_sizes)`` when packed), input size I, hidden size H, G gates
    (LSTM 4, GRU 3, RNN 1) and P = proj_size (hidden input size Hh = P or H)::

        MACs   rows * G*H * (I + Hh)            input and recurrent projections
               + rows * H * P                   LSTM projection
        FLOPs  2 * MACs
               + 2 * rows * G*H                 the two biases (when present)
               + rows * H * c                   gate math, c per hidden unit and step:
                   LSTM 22: gates add 4, 3 sigmoids 12, tanh g 1, f*c 1, i*g 1, c add 1,
                            tanh c 1, o*tanh(c) 1
                   GRU 16:  r add 1 + sigmoid 4, z add 1 + sigmoid 4, r*hn 1, add 1, tanh 1,
                            h - n 1, z*(h - n) 1, add 1
                   RNN 2:   add 1 + tanh or relu 1
    """
    gates = GATES[mode] * hidden
    macs = rows * gates * (input_size + (proj or hidden)) + rows * hidden * proj
    flops = (2 * rows * gates if biases else 0) + rows * hidden * GATE_MATH[mode]
    return Cost.contraction(macs, flops)


def _rows(x) -> tuple[int, int]:
    """(rows, input size) of a recurrent input (..., I): rows = its input vectors (time x batch)."""
    input_size = shape(x)[-1]
    return numel(x) // max(input_size, 1), input_size


@register_formula(*ops("mkldnn_rnn_layer"))
def mkldnn_rnn_layer(call: OpCall) -> Cost:
    """oneDNN recurrent layer (CPU LSTM): ``recurrent_layer_cost`` = its decomposition's cost."""
    a = bind(call)
    rows, input_size = _rows(a["input"])
    return recurrent_layer_cost(int(a["mode"]), rows, input_size, int(a["hidden_size"]), bool(a["has_biases"]))


def recurrent_layer_backward_cost(mode: int, rows: int, input_size: int, hidden: int, biases: bool) -> Cost:
    """Backward of one layer and direction: 2 x the forward MACs, bias grads, gate math.

    Backward of a fused layer computes every gradient (input, both weights and biases, initial
    h and c): the four products dX, dW_ih, dH, dW_hh are 2 x the forward MACs, the bias grads
    sum the gate grads (rows * G*H each), and the gate math costs, per hidden unit and step:
    LSTM 23 (dh + dh_next 1; o, tanh(c) grads 2; tanh backward 3; dc + dc_next 1; f, c_prev,
    i, g grads 4; three sigmoid backward 9; tanh backward of g 3), GRU 16, RNN tanh 4, RNN relu 2.
    (The decomposed path differs by a few adds: no dh/dc add at the last step, and per-step
    accumulation of dW_hh, which a fused kernel does inside one product.)
    """
    gates = GATES[mode] * hidden
    macs = 2 * rows * gates * (input_size + hidden)
    flops = (2 * rows * gates if biases else 0) + rows * hidden * GATE_MATH_BACKWARD[mode]
    return Cost.contraction(macs, flops)


@register_formula(*ops("mkldnn_rnn_layer_backward"))
def mkldnn_rnn_layer_backward(call: OpCall) -> Cost:
    """oneDNN recurrent layer backward: ``recurrent_layer_backward_cost`` (all gradients)."""
    a = bind(call)
    rows, input_size = _rows(a["input"])
    return recurrent_layer_backward_cost(int(a["mode"]), rows, input_size, int(a["hidden_size"]),
                                         bool(a["has_biases"]))


def _cudnn_stack(a: dict) -> tuple[int, int, int, bool, int, int, list[int]]:
    """(mode, rows, hidden, biases, proj, directions, each layer's input size) of a cuDNN/MIOpen RNN call."""
    rows, input_size = _rows(a["input"])
    hidden, proj = int(a["hidden_size"]), int(a.get("proj_size") or 0)
    directions = 2 if a["bidirectional"] else 1
    biases = int(a["weight_stride0"]) - (1 if proj else 0) == 4
    inputs = [input_size if layer == 0 else (proj or hidden) * directions for layer in range(int(a["num_layers"]))]
    return int(a["mode"]), rows, hidden, biases, proj, directions, inputs


@register_formula(*ops("_cudnn_rnn", "miopen_rnn"))
def cudnn_rnn(call: OpCall) -> Cost:
    """cuDNN/MIOpen multi-layer RNN in one op: the sum of ``recurrent_layer_cost`` over layers and
    directions, + 2 FLOPs per element of each non-last layer's output for inter-layer dropout."""
    a = bind(call)
    mode, rows, hidden, biases, proj, directions, inputs = _cudnn_stack(a)
    cost = Cost()
    for layer, layer_in in enumerate(inputs):
        for _ in range(directions):
            cost = cost + recurrent_layer_cost(mode, rows, layer_in, hidden, biases, proj)
        if layer < len(inputs) - 1 and a["train"] and float(a["dropout"] or 0.0) > 0.0:
            cost = cost + Cost.elementwise(2 * rows * (proj or hidden) * directions)
    return cost


@register_formula(*ops("_thnn_fused_lstm_cell"))
def fused_lstm_cell(call: OpCall) -> Cost:
    """CUDA LSTM cell on precomputed gates: 22 FLOPs per hidden unit and row (+4H per bias given)."""
    a = bind(call)
    rows, hidden = shape(a["cx"])[0] if a["cx"].dim() > 1 else 1, shape(a["cx"])[-1]
    biases = (a["input_bias"] is not None) + (a["hidden_bias"] is not None)
    return Cost.elementwise(rows * hidden * (GATE_MATH[LSTM] + 4 * biases))


@register_formula(*ops("_thnn_fused_gru_cell"))
def fused_gru_cell(call: OpCall) -> Cost:
    """CUDA GRU cell on precomputed gates: 16 FLOPs per hidden unit and row (+3H per bias given)."""
    a = bind(call)
    rows, hidden = shape(a["hx"])[0] if a["hx"].dim() > 1 else 1, shape(a["hx"])[-1]
    biases = (a["input_bias"] is not None) + (a["hidden_bias"] is not None)
    return Cost.elementwise(rows * hidden * (GATE_MATH[GRU] + 3 * biases))


@register_formula(*ops("_cudnn_rnn_backward"))
def cudnn_rnn_backward(call: OpCall) -> Cost:
    """cuDNN multi-layer RNN backward: ``recurrent_layer_backward_cost`` summed over layers and directions."""
    mode, rows, hidden, biases, _, directions, inputs = _cudnn_stack(bind(call))
    cost = Cost()
    for layer_in in inputs:
        for _ in range(directions):
            cost = cost + recurrent_layer_backward_cost(mode, rows, layer_in, hidden, biases)
    return cost


@register_formula(*ops("_thnn_fused_lstm_cell_backward_impl"))
def fused_lstm_cell_backward(call: OpCall) -> Cost:
    """CUDA LSTM cell backward: gate math 23 FLOPs per hidden unit and row, + the bias grad sum (4H per row)."""
    a = bind(call)
    rows, hidden = shape(a["cx"])[0] if a["cx"].dim() > 1 else 1, shape(a["cx"])[-1]
    return Cost.elementwise(rows * hidden * (GATE_MATH_BACKWARD[LSTM] + (4 if a["has_bias"] else 0)))


@register_formula(*ops("_thnn_fused_gru_cell_backward"))
def fused_gru_cell_backward(call: OpCall) -> Cost:
    """CUDA GRU cell backward: gate math 16 FLOPs per hidden unit and row, + two bias grad sums (2 * 3H per row)."""
    a = bind(call)
    grad = a["grad_hy"]
    rows, hidden = shape(grad)[0] if grad.dim() > 1 else 1, shape(grad)[-1]
    return Cost.elementwise(rows * hidden * (GATE_MATH_BACKWARD[GRU] + (6 if a["has_bias"] else 0)))
