"""Per-element costs and cost shapes shared with the torch backend (framework-free).

These are the same numbers as ``deeplite_like/backends/torch/counting/formulas/*``: that
package imports torch, which this backend must not, so the values are restated here and
``tests/keras/test_count_conventions.py`` checks them against the torch modules wherever
torch is installed (a drift fails the test). Each elementary step is 1 FLOP (a
transcendental such as ``exp`` or ``tanh`` is one); selecting a branch is free.
"""
from __future__ import annotations

from ..registry import Cost

# -- activations, FLOPs per output element (torch formulas/activation.py) -------------------
RELU = 1            # max(x, 0)
HARDTANH = 2        # min(max(x, lo), hi)      (relu6)
LEAKY_RELU = 2      # max(x, a*x)              (prelu)
ELU = 3             # x>0 ? x : alpha*(exp(x)-1)
SELU = 4            # elu + scale
CELU = 4            # x>0 ? x : alpha*(exp(x/alpha)-1)
SIGMOID = 4         # 1 / (1 + exp(-x))
TANH = 1
SILU = 5            # x * sigmoid(x)
GELU = 5            # x/2 * (1 + erf(x/sqrt2))
GELU_TANH = 9       # x/2 * (1 + tanh(c*(x + 0.044715 x^3)))
HARDSIGMOID = 4     # min(max(x+3, 0), 6) / 6
HARDSWISH = 5       # x * hardsigmoid(x)
SOFTPLUS = 3        # log(1 + exp(x))
MISH = 5            # x * tanh(softplus(x))
LOG_SIGMOID = 5     # -log(1 + exp(-x))
GLU = 5             # a * sigmoid(b), per output element
SOFTSHRINK = 2      # x -/+ lambda, select
THRESHOLD = 1       # select (hardshrink, threshold)
SOFTSIGN = 3        # x / (1 + |x|): abs, add, div (torch: decomposed into those ops)
TANHSHRINK = 2      # x - tanh(x) (torch: decomposed into tanh, sub)
EXP = 1             # exponential

# -- softmax (torch formulas/activation.py): max, sub, exp, sum, div --------------------------
SOFTMAX = 5

# -- interpolation, FLOPs per output element (torch formulas/interpolate.py) ---------------
NEAREST, LINEAR, BILINEAR, TRILINEAR, BICUBIC = 0, 3, 7, 15, 31

# -- dropout in training (torch formulas/elementwise.py): scale the kept mask, multiply ----
DROPOUT = 2

# -- recurrent layers (torch formulas/rnn.py) ----------------------------------------------
GATES = {"rnn": 1, "lstm": 4, "gru": 3}


def lstm_gate_math(activation: int = TANH, recurrent_activation: int = SIGMOID) -> int:
    """FLOPs per hidden unit and step: gate adds 4, 3 recurrent activations, activation of g and
    of c, f*c, i*g, c add, o*act(c) (22 with sigmoid/tanh, as torch)."""
    return 4 + 3 * recurrent_activation + 2 * activation + 4


def gru_gate_math(activation: int = TANH, recurrent_activation: int = SIGMOID) -> int:
    """FLOPs per hidden unit and step: r and z adds 2, 2 recurrent activations, r*hn 1, add 1,
    activation, h - n, z*(h - n), add (16 with sigmoid/tanh, as torch)."""
    return 2 + 2 * recurrent_activation + 2 + activation + 3


def rnn_gate_math(activation: int = TANH) -> int:
    """FLOPs per hidden unit and step of a vanilla RNN: add 1 + activation (2 with tanh, as torch)."""
    return 1 + activation


# -- normalisation (torch formulas/norm.py) ------------------------------------------------
def normalisation_cost(n: int, groups: int, weight: bool, bias: bool) -> Cost:
    """Normalise ``n`` elements with batch statistics over ``groups`` groups: 6N + 4R (+N, +N)."""
    return Cost.elementwise(6 * n + 4 * groups + n * int(weight) + n * int(bias))


def running_stats_cost(n: int, channels: int, weight: bool, bias: bool) -> Cost:
    """Batch norm from running statistics (inference): 2N + 2C (+N weight, +N bias)."""
    return Cost.elementwise(2 * n + 2 * channels + n * int(weight) + n * int(bias))


def rms_norm_cost(n: int, rows: int, weight: bool) -> Cost:
    """RMS norm: square N, mean N + R, add eps R, rsqrt R, scale N -> 3N + 3R (+N weight)."""
    return Cost.elementwise(3 * n + 3 * rows + n * int(weight))


# -- pooling (torch formulas/pooling.py) ---------------------------------------------------
def adaptive_window_elements(in_sizes, out_sizes) -> int:
    """Input elements summed over all output windows of an adaptive pool (per batch-channel):
    window i spans [floor(i*In/Out), ceil((i+1)*In/Out)) in each dimension."""
    total = 1
    for size_in, size_out in zip(in_sizes, out_sizes):
        total *= sum(-(-(i + 1) * size_in // size_out) - (i * size_in // size_out) for i in range(size_out))
    return total
