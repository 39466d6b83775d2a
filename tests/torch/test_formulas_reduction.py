"""Reductions (N input elements, R outputs) and softmax (5 FLOPs per element; backward 4)."""
import pytest
import torch
from torch.nn import functional as F

from tests.torch._formula_harness import count, run_counted

torch.manual_seed(0)
X = torch.randn(2, 4, 3)  # N = 24; reducing dim 1 leaves R = 6


@pytest.mark.parametrize("fn, flops", [
    (lambda: X.sum(), 24),                         # N
    (lambda: X.sum(dim=1), 24),
    (lambda: X.mean(), 25),                        # N + R = 24 + 1
    (lambda: X.mean(dim=1), 30),                   # 24 + 6
    (lambda: X.var(dim=1), 108),                   # 4N + 2R = 96 + 12
    (lambda: X.std(dim=1), 114),                   # 4N + 3R = 96 + 18
    (lambda: torch.var_mean(X, dim=1), 108),
    (lambda: X.amax(dim=1), 24),                   # one max per element
    (lambda: X.max(dim=1), 24),
    (lambda: X.max(), 24),
    (lambda: X.argmax(dim=1), 24),
    (lambda: torch.aminmax(X), 48),
    (lambda: X.prod(dim=1), 24),
    (lambda: X.cumsum(dim=1), 24),
    (lambda: X.logsumexp(dim=1), 108),             # 4N + 2R = 96 + 12
    (lambda: X.norm(), 49),                        # p=2 over all: square, sum 2N + sqrt 1
    (lambda: X.norm(p=1), 48),                     # abs, sum
    (lambda: torch.linalg.vector_norm(X, ord=3, dim=1), 78),  # abs, pow, sum 3N + root R = 72 + 6
    (lambda: torch.dist(X, X + 0), 24 + 24 + 49),  # the add, then sub N + norm 2N + 1
    (lambda: (X > 0).sum(), 0),                    # counting a mask: integer book-keeping, free
    (lambda: X.sort(dim=1), 0),                    # ordering and selection: free
    (lambda: X.topk(2, dim=1), 0),
])
def test_reductions(fn, flops):
    result = run_counted(fn)
    assert (result.macs, result.flops) == (0, flops)


def test_cdist_pairs():
    # cdist of (2, 4, 3) with itself: 2 batches x 4 x 4 = 32 pairs, D = 3: 3*32*3 + 32 = 320
    assert run_counted(lambda: torch.cdist(X, X)).flops == 320


@pytest.mark.parametrize("fn, flops", [
    (lambda x: F.softmax(x, dim=-1), 120),         # 5 * 24: max, sub, exp, sum, div
    (lambda x: F.log_softmax(x, dim=1), 120),
    (lambda x: F.softmin(x, dim=1), 24 + 120),     # neg + softmax
])
def test_softmax_forward(fn, flops):
    assert count(fn, X).flops == flops


def test_softmax_backward():
    # _softmax_backward_data: y * (g - sum(g*y)): 4 per element = 96; log-softmax backward the same
    x = X.clone().requires_grad_()
    assert run_counted(lambda: F.softmax(x, -1).sum().backward()).op("aten._softmax_backward_data") == (0, 96)
    assert run_counted(lambda: F.log_softmax(x, -1).sum().backward()).op("aten._log_softmax_backward_data") == (0, 96)
