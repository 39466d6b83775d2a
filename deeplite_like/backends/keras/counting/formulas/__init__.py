"""The built-in formula table of the Keras counting engine, one module per layer family.

Importing this package registers every formula and every layer known to be free, by the
public name of the Keras class (resolved when a model is first counted; nothing here imports
Keras). Each formula's docstring states its cost; each module's docstring states the
family's conventions, which are the torch backend's (restated in ``_common.py``):

    conv            Conv1D/2D/3D, DepthwiseConv1D/2D, SeparableConv1D/2D, Conv*DTranspose; max /
                    average / global / adaptive pooling of ranks 1-3
    core            Dense, EinsumDense, Embedding, ReversibleEmbedding; the attention layers
                    MultiHeadAttention, GroupedQueryAttention, Attention, AdditiveAttention
    rnn             LSTM, GRU, SimpleRNN, their cells, Bidirectional (TimeDistributed: its child);
                    ConvLSTM1D/2D/3D
    norm            BatchNormalization, LayerNormalization, GroupNormalization, RMSNormalization,
                    UnitNormalization
    elementwise     per-element layers: Activation, ReLU, LeakyReLU, PReLU, ELU, Softmax; the
                    merges Add, Subtract, Multiply, Average, Maximum, Minimum, Dot (Concatenate:
                    free); the Dropout family and noise layers (training only)
    reshaping       UpSampling, Resizing, Rescaling, Normalization, Masking; free shape layers;
                    preprocessing, augmentation, spectrogram and wrapper layers: priced by the
                    operators they run (``OP_LEVEL``; random augmentation: identity at inference)
    ops             operation nodes of functional models (``x + y``, ``keras.ops.relu``)

Beside the layer table, ``counting/tf_ops.py`` prices single *TensorFlow operations* with the
same conventions (``MatMul``, ``ReluGrad``, ``AssignSubVariableOp``...): the training-step
profiles use it for what runs outside the layers (backward, optimizer).
"""
from __future__ import annotations

from . import (  # noqa: F401  (imported for their registrations)
    conv,
    core,
    elementwise,
    norm,
    ops,
    reshaping,
    rnn,
)
