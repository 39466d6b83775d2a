"""Elementwise arithmetic and activations: FLOPs per OUTPUT element, in-place the same."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from tests.torch._formula_harness import aten, call, count, flop_counter_flops, run_counted

torch.manual_seed(0)
A = torch.randn(2, 3, 1)
B = torch.randn(1, 3, 4)
X = torch.randn(2, 3, 4)  # 24 elements


def test_broadcast_add_costs_per_output_element():
    # (2, 3, 1) + (1, 3, 4) -> (2, 3, 4): 24 adds, although the inputs hold 6 and 12 elements
    result = count(torch.add, A, B)
    assert (result.macs, result.flops) == (0, 24)
    assert flop_counter_flops(lambda: A + B) == 0  # the peer does not count elementwise ops at all


def test_inplace_ops_cost_the_same():
    # x.add_(b) with b (4,) broadcast into (2, 3, 4): 24; x.mul_(2): 24; relu_: 24
    def inplace(x, b):
        return x.add_(b).mul_(2).relu_()
    result = count(inplace, X.clone(), torch.randn(4))
    assert result.flops == 72
    assert set(result.by_operator) == {"aten.add_", "aten.mul_", "aten.relu_"}

    def functional(x, b):
        return torch.relu(torch.mul(torch.add(x, b), 2))
    assert count(functional, X, torch.randn(4)).flops == 72


@pytest.mark.parametrize("fn, flops", [
    (lambda: torch.add(X, X, alpha=2), 48),          # alpha != 1: + a multiply, 2 per element
    (lambda: torch.sub(X, 1.0), 24),
    (lambda: X * 3, 24),
    (lambda: X / X, 24),
    (lambda: X.pow(2), 24),
    (lambda: X.sqrt().exp().log(), 72),               # 3 ops x 24
    (lambda: torch.rsqrt(X.abs()), 48),
    (lambda: torch.addcmul(X, X, X), 48),             # mul + add
    (lambda: torch.addcmul(X, X, X, value=0.5), 72),  # + the value multiply
    (lambda: torch.addcdiv(X, X, X), 48),
    (lambda: torch.clamp(X, min=0.0), 24),            # one bound: 1 per element
    (lambda: torch.clamp(X, -1.0, 1.0), 48),          # two bounds
    (lambda: torch.lerp(X, X, 0.3), 72),              # sub, mul, add
    (lambda: torch.logaddexp(X, X), 96),              # 4 per element
    (lambda: torch.maximum(X, A), 24),                # elementwise max: 1
    (lambda: torch.max(X, A), 24),                    # the binary overload of max is elementwise
    (lambda: X.floor(), 24),
    (lambda: torch.arange(6) * 2 + 1, 0),             # integer arithmetic is index book-keeping: free
    (lambda: (X > 0) & (X < 1), 0),                   # comparisons and logic: free
    (lambda: torch.where(X > 0, X, A), 0),            # selection: free
    (lambda: X.masked_fill(X > 0, 0.0), 0),
])
def test_elementwise_costs(fn, flops):
    result = run_counted(fn)
    assert (result.macs, result.flops) == (0, flops)


Y = torch.randn(3, 4)  # 12 elements

ACTIVATIONS = [
    (nn.ReLU(), 12), (nn.ReLU(inplace=True), 12), (nn.ReLU6(), 24), (nn.Hardtanh(), 24),
    (nn.LeakyReLU(), 24), (nn.LeakyReLU(inplace=True), 24), (nn.PReLU(), 24), (nn.RReLU(), 24),
    (nn.ELU(), 36), (nn.ELU(inplace=True), 36),
    (nn.SELU(), 48),                     # elu with scale != 1: 3 + 1
    (nn.CELU(), 48),
    (nn.GELU(), 60), (nn.GELU("tanh"), 108),  # 5 and 9 per element
    (nn.SiLU(), 60), (nn.SiLU(inplace=True), 60),
    (nn.Sigmoid(), 48), (nn.Tanh(), 12), (nn.Hardsigmoid(), 48),
    (nn.Hardswish(), 60), (nn.Hardswish(inplace=True), 60), (nn.Mish(), 60),
    (nn.Softplus(), 36), (nn.Softplus(beta=2), 60),
    (nn.Softsign(), 36),                 # decomposes: abs, add, div
    (nn.LogSigmoid(), 60),
    (nn.Hardshrink(), 12), (nn.Softshrink(), 24),
    (nn.Tanhshrink(), 24),               # decomposes: tanh, sub
    (nn.Threshold(0.1, 0.0), 12),
    (nn.GLU(), 30),                      # (3, 4) -> (3, 2): 6 outputs x 5
    (nn.Softmin(1), 72),                 # neg 12 + softmax 5*12
    (nn.LogSoftmax(1), 60),
]


@pytest.mark.parametrize("module, flops", ACTIVATIONS, ids=lambda m: repr(m) if isinstance(m, nn.Module) else "")
def test_activation_costs(module, flops):
    result = count(module, Y.clone())
    assert (result.macs, result.flops) == (0, flops)


def test_dropout_counts_in_training_only():
    # train: bernoulli_ (free) + div_ 12 (scale the mask) + mul 12 = 24; eval: identity, 0
    dropout = nn.Dropout(0.5)
    assert count(dropout.train(), Y).flops == 24
    assert count(dropout.eval(), Y).flops == 0
    # native_dropout (what autograd-compiled and CUDA paths run) is priced the same
    meta = Y.to("meta")
    assert call(aten.native_dropout.default, meta, 0.5, True) == (0, 24)
    assert call(aten.native_dropout.default, meta, 0.5, False) == (0, 0)


BACKWARD = [
    (F.relu, "aten.threshold_backward", 12),        # 1 per element
    (F.relu6, "aten.hardtanh_backward", 12),
    (F.leaky_relu, "aten.leaky_relu_backward", 24),  # 2
    (F.elu, "aten.elu_backward", 36),                # 3
    (torch.sigmoid, "aten.sigmoid_backward", 36),    # g*y*(1-y): 3
    (torch.tanh, "aten.tanh_backward", 36),          # g*(1-y^2): 3
    (F.gelu, "aten.gelu_backward", 132),             # 11
    (F.silu, "aten.silu_backward", 108),             # 9
    (F.hardswish, "aten.hardswish_backward", 48),    # 4
    (F.hardsigmoid, "aten.hardsigmoid_backward", 12),
    (F.softplus, "aten.softplus_backward", 60),      # 5
    (F.logsigmoid, "aten.log_sigmoid_backward", 72),  # 6
    (F.mish, "aten.mish_backward", 168),             # 14
    (F.glu, "aten.glu_backward", 54),                # 9 per grad_output element, grad (3, 2)
]


@pytest.mark.parametrize("fn, op, flops", BACKWARD, ids=[b[1] for b in BACKWARD])
def test_activation_backward(fn, op, flops):
    x = Y.clone().requires_grad_()
    result = run_counted(lambda: fn(x).sum().backward())
    assert result.op(op) == (0, flops)


def test_prelu_backward():
    # _prelu_kernel_backward: grad_input and the weight's per-element grad, 2 per element = 24
    layer = nn.PReLU()
    result = count(layer, Y.clone().requires_grad_(), backward=True)
    stats = result.by_operator["aten._prelu_kernel_backward"]
    assert (stats.macs, stats.flops) == (0, 24)
