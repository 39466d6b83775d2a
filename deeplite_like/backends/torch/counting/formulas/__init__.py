"""The built-in formula table of the torch counting engine, one module per operator family.

Importing this package registers every formula (``registry.register_formula``) and every
op known to be free (``registry.register_free``). Each formula's one-line docstring states
its cost; each module's docstring states the family's conventions:

    conv         sliding windows of rank 1-3: convolutions (grouped, depthwise, dilated,
                 transposed), max / avg / adaptive pools; backward
    attention    scaled-dot-product kernels, fused MultiheadAttention / TransformerEncoderLayer
    rnn          fused recurrent layers (oneDNN LSTM, cuDNN RNNs, CUDA fused cells)
    elementwise  arithmetic per output element, dropout; activations, softmax, log-softmax and
                 their backward
    reduction    sum, mean, var, std, max, vector norms, ...; batch / layer / group / instance /
                 RMS norm and backward
    indexing     free: views, copies, casts, indexing, creation, comparisons (0 FLOPs); with
                 arithmetic: embedding bags, scatter-adds, embedding backward
    training     loss functions and their backward; optimizer kernels (_foreach_*, fused)
    quantized    quantized:: kernels (static and dynamic), priced as their float twins
    linalg       mm, addmm, bmm, baddbmm, mv, dot, linear, einsum, nn.Bilinear; decompositions,
                 solves, inverses: LAPACK / Golub & Van Loan counts; FFTs
                 (_fft_r2c / _fft_c2r / _fft_c2c): 5 N log2 N per complex transform, half for real
    vision       upsample (nearest is free), grid_sample, affine_grid; torchvision::nms,
                 torchvision::roi_align (by name: torchvision need not be loaded)
"""
from __future__ import annotations

from . import (  # noqa: F401  (imported for their registrations)
    attention,
    conv,
    elementwise,
    indexing,
    linalg,
    quantized,
    reduction,
    rnn,
    training,
    vision,
)
