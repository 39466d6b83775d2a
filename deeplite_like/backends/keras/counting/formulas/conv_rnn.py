"""Convolutional LSTMs (``ConvLSTM1D/2D/3D``), as the LSTM formula with convolutions for matmuls.
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas.conventions as c
from ..registry import Cost, LayerCall, register_layer_formula
from ._common import activation_flops, prod


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
