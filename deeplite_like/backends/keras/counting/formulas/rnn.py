"""Recurrent layers and cells, as the torch backend's recurrent formulas.

The counts are in ``_recurrent_formula``; ``rnn`` says which calls are priced whole and which
step by step.

Convolutional LSTMs:

    Convolutional LSTMs (``ConvLSTM1D/2D/3D``), as the LSTM formula with convolutions for matmuls.
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas._common as c
from ..registry import Cost, FREE, LayerCall, OP_MARKS, TensorSpec, lookup, register_layer_formula
from ._common import activation_flops, float_elements, named, prod


def _recurrent(call: LayerCall, kind: str, rows: int) -> Cost:
    layer = call.layer
    cell = getattr(layer, "cell", layer)
    x = call.input
    in_size, hidden = x.shape[-1], cell.units
    gates = c.GATES[kind] * hidden
    activation = activation_flops(call, cell.activation)
    if kind == "lstm":
        gate_math = c.lstm_gate_math(activation, activation_flops(call, cell.recurrent_activation))
        biases = 1
    elif kind == "gru":
        gate_math = c.gru_gate_math(activation, activation_flops(call, cell.recurrent_activation))
        biases = 2 if cell.reset_after else 1
    else:
        gate_math = c.rnn_gate_math(activation)
        biases = 1
    flops = rows * gates * biases * int(bool(cell.use_bias)) + rows * hidden * gate_math
    if call.training:
        copies = c.GATES[kind] if getattr(cell, "implementation", 2) == 1 else 1
        if 0.0 < float(cell.dropout or 0.0) < 1.0:
            flops += copies * rows * in_size
        if 0.0 < float(cell.recurrent_dropout or 0.0) < 1.0:
            flops += copies * rows * hidden
    return Cost.contraction(rows * gates * (in_size + hidden), flops)


def _recurrent_formula(kind: str, cell: bool, name: str, doc: str):
    """A whole layer over ``(batch, time, features)`` (rows = batch x time), or a cell over ``(batch,
    features)`` (rows = batch).

    Per direction, with ``rows`` = batch x time steps (a cell call: rows = batch), input size I,
    hidden size H and G gates (LSTM 4, GRU 3, SimpleRNN 1)::

        MACs   rows * G*H * (I + H)         input and recurrent projections
        FLOPs  2 * MACs
               + rows * G*H per bias vector  LSTM and SimpleRNN have one; GRU with
                                             ``reset_after=True`` (the default) has two, as torch
               + rows * H * gate math        per hidden unit and step, with a = activation and
                                             r = recurrent_activation costs (tanh 1, sigmoid 4):
                   LSTM  4 + 3r + 2a + 4  = 22   gate adds, i/f/o, g and c activations, f*c, i*g, add, o*act(c)
                   GRU   2 + 2r + 2 + a + 3 = 16 r/z adds and activations, r*hn, add, activation,
                                                 h - n, z*(h - n), add (torch's form of the blend)
                   RNN   1 + a            = 2
        training with dropout / recurrent_dropout: one multiply per input / hidden element and
        step (LSTM and GRU with ``implementation=1`` multiply once per gate: G per element).
    """
    def formula(call: LayerCall) -> Cost:
        x = call.input
        rows = x.numel // max(x.shape[-1], 1) if cell else x.shape[0] * x.shape[1]
        return _recurrent(call, kind, rows)

    return named(formula, name, doc)


register_layer_formula("keras.layers.LSTM")(_recurrent_formula(
    "lstm", False, "lstm", "rows*4H*(I+H) MACs; + rows*4H bias; + rows*H*22 gate math (sigmoid/tanh)."))
register_layer_formula("keras.layers.GRU")(_recurrent_formula(
    "gru", False, "gru", "rows*3H*(I+H) MACs; + rows*3H per bias vector (2 with reset_after); + rows*H*16 gate math."))
register_layer_formula("keras.layers.SimpleRNN")(_recurrent_formula(
    "rnn", False, "simple_rnn", "rows*H*(I+H) MACs; + rows*H bias; + rows*H*2 (add, tanh)."))
register_layer_formula("keras.layers.LSTMCell")(_recurrent_formula(
    "lstm", True, "lstm_cell", "One step of an LSTM over a batch: as ``lstm`` with rows = batch."))
register_layer_formula("keras.layers.GRUCell")(_recurrent_formula(
    "gru", True, "gru_cell", "One step of a GRU over a batch: as ``gru`` with rows = batch."))
register_layer_formula("keras.layers.SimpleRNNCell")(_recurrent_formula(
    "rnn", True, "simple_rnn_cell", "One step of a vanilla RNN over a batch: as ``simple_rnn`` with rows = batch."))


@register_layer_formula("keras.layers.RNN")
def rnn(call: LayerCall) -> Cost:
    """T steps of each cell's formula (StackedRNNCells: cell by cell), T = the time axis.

    ``LSTM``, ``GRU`` and ``SimpleRNN`` are priced whole (opaque): the cell calls that may run
    inside them are not counted again, whichever path Keras takes. The generic ``RNN(cell)``
    layer (and ``StackedRNNCells``) is priced as T steps of each cell's own formula, T = the
    input's time axis: Keras' backends also call the cell once more on the first step to learn
    its output shape (a probe), which is not the model's arithmetic and is not counted. A cell
    with no formula (``ConvLSTMCell``, a user cell) is reported untracked.
    """
    layer, x = call.layer, call.input
    batch, steps = x.shape[0], x.shape[1]
    cells = list(getattr(layer.cell, "cells", None) or [layer.cell])
    step_input = TensorSpec((batch,) + tuple(x.shape[2:]), x.dtype)
    total = Cost()
    for i, cell in enumerate(cells):
        entry = lookup(type(cell), {})
        size = getattr(cell, "output_size", None)
        if entry is None or entry is FREE or entry in OP_MARKS or not isinstance(size, int):
            call.report_untracked(type(cell).__name__)
            break
        step_output = TensorSpec((batch, size), x.dtype)
        step = LayerCall(cell, f"{call.path}.cell{i}", (step_input,), {"training": call.training}, step_output,
                         call.options, call.untracked_parts)
        cost = entry.formula(step)
        total = total + Cost(cost[0] * steps, cost[1] * steps)
        step_input = step_output
    return total


_MERGE = {"sum": 1, "mul": 1, "ave": 2, "concat": 0, None: 0}


@register_layer_formula("keras.layers.Bidirectional", opaque=False)
def bidirectional(call: LayerCall) -> Cost:
    """The merge of the two directions: sum/mul 1, ave 2 per output element, concat and None free.

    ``Bidirectional`` prices its merge (``sum``/``mul`` 1, ``ave`` 2 per output element;
    ``concat`` free); its two layers are counted as children. ``TimeDistributed`` does no
    arithmetic of its own: the inner layer is recorded once per time step.
    """
    mode = call.layer.merge_mode
    if mode not in _MERGE:
        call.report_untracked(f"Bidirectional(merge_mode={mode!r})")
        return Cost()
    return Cost.elementwise(_MERGE[mode] * float_elements(call.output))


# -- Convolutional LSTMs ----------------------------------------------------------------------------
@register_layer_formula("keras.layers.ConvLSTM1D", "keras.layers.ConvLSTM2D", "keras.layers.ConvLSTM3D")
def conv_lstm(call: LayerCall) -> Cost:
    """rows * 4F * K * (C + F) MACs; 2 per MAC + bias 4F + LSTM gate math per hidden element and step.

    Per time step, with S = the output's spatial positions per sample, K = prod(kernel_size),
    C = input channels, F = filters (the hidden channels), rows = batch x steps x S::

        MACs   rows * 4F * K * (C + F)      input convolution (the layer's padding, strides,
                                            dilation) + recurrent convolution ('same', stride 1,
                                            on the hidden state, whose positions are the output's)
        FLOPs  2 * MACs
               + rows * 4F                  the input convolution's bias (use_bias)
               + rows * F * gate math       as LSTM: 4 + 3r + 2a + 4 (22 with sigmoid/tanh)
        training with dropout / recurrent_dropout: one multiply per gate (4) per input / hidden
        element and step.

    Priced whole (opaque): the cell's steps, and the probe call Keras makes on the first step to
    learn the output shape, are not counted again.
    """
    layer, x = call.layer, call.input  # (batch, time, *spatial, C) or (batch, time, C, *spatial)
    cell = layer.cell
    first = cell.data_format == "channels_first"
    out = call.output.shape
    positions = prod(out[3:] if first else out[2:-1]) if layer.return_sequences else \
        prod(out[2:] if first else out[1:-1])
    batch, steps = x.shape[0], x.shape[1]
    channels, filters = (x.shape[2] if first else x.shape[-1]), cell.filters
    rows = batch * steps * positions
    kernel = prod(cell.kernel_size)
    macs = rows * 4 * filters * kernel * (channels + filters)
    gate_math = c.lstm_gate_math(activation_flops(call, cell.activation),
                                 activation_flops(call, cell.recurrent_activation))
    flops = rows * 4 * filters * int(bool(cell.use_bias)) + rows * filters * gate_math
    if call.training:
        if 0.0 < float(cell.dropout or 0.0) < 1.0:
            flops += 4 * batch * steps * prod(x.shape[2:])
        if 0.0 < float(cell.recurrent_dropout or 0.0) < 1.0:
            flops += 4 * rows * filters
    return Cost.contraction(macs, flops)
