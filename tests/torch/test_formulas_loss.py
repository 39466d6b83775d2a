"""Loss functions and arithmetic indexing (embedding bags, scatter-adds). N = 20 input elements;
a mean reduction adds N + 1 (sum, one divide), a sum N, none 0."""
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from tests.torch._formula_harness import count, run_counted

torch.manual_seed(0)
X = torch.randn(4, 5)
T = torch.tensor([0, 3, 1, 4])
P = torch.rand(4, 5)


@pytest.mark.parametrize("fn, flops", [
    # cross entropy: _log_softmax 5*20 = 100 + nll: 4 picked values summed + 1 divide = 105
    (lambda: F.cross_entropy(X, T), 105),
    (lambda: F.nll_loss(X, T, weight=torch.ones(5)), 9),      # 4 + 4 weights + 1
    (lambda: F.mse_loss(X, P), 61),                           # sub, square 2*20 + mean 21
    (lambda: F.mse_loss(X, P, reduction="sum"), 60),
    (lambda: F.mse_loss(X, P, reduction="none"), 40),
    (lambda: F.l1_loss(X, P), 61),                            # decomposes: sub 20, abs 20, mean 21
    (lambda: F.smooth_l1_loss(X, P), 121),                    # 5*20 + 21
    (lambda: F.huber_loss(X, P), 121),
    (lambda: F.soft_margin_loss(X, P), 121),
    (lambda: F.binary_cross_entropy(P, P), 181),              # 8*20 + 21
    (lambda: F.binary_cross_entropy_with_logits(X, P), 161),  # 7*20 + 21
    (lambda: F.binary_cross_entropy_with_logits(X, P, pos_weight=torch.ones(5)), 221),  # + 3*20
])
def test_losses(fn, flops):
    result = run_counted(fn)
    assert (result.macs, result.flops) == (0, flops)


@pytest.mark.parametrize("fn, op, flops", [
    (lambda x: F.cross_entropy(x, T), "aten.nll_loss_backward", 8),           # 4 + 4 (mean)
    (lambda x: F.cross_entropy(x, T), "aten._log_softmax_backward_data", 80),  # 4*20
    (lambda x: F.mse_loss(x, P), "aten.mse_loss_backward", 80),                # 3*20 + 20 (mean)
    (lambda x: F.smooth_l1_loss(x, P), "aten.smooth_l1_loss_backward", 100),   # 4*20 + 20
    (lambda x: F.binary_cross_entropy(torch.sigmoid(x), P), "aten.binary_cross_entropy_backward", 120),  # 5*20 + 20
])
def test_loss_backward(fn, op, flops):
    x = X.clone().requires_grad_()
    assert run_counted(lambda: fn(x).backward()).op(op) == (0, flops)


def test_loss_through_count_ops_loss_fn():
    # Linear(5, 5) on (4, 5): forward 100 MACs, 200 + 20 bias = 220 FLOPs; the loss phase: mse 61
    model = nn.Linear(5, 5)
    result = count(model, X, backward=True, loss_fn=lambda out: F.mse_loss(out, P))
    assert (result.phases["forward"].macs, result.phases["forward"].flops) == (100, 220)
    assert result.phases["loss"].flops == 61


def test_embedding_lookup_is_free_and_backward_scatters():
    emb = nn.Embedding(10, 3)
    ids = torch.tensor([1, 2, 3])
    assert count(emb, ids).flops == 0
    # backward: the (3, 3) grads scatter-added into the table: 9
    result = count(emb, ids, backward=True)
    assert result.by_operator["aten.embedding_dense_backward"].flops == 9


@pytest.mark.parametrize("mode, weights, flops", [
    ("sum", False, 12),   # 4 indices x D 3 = 12 adds
    ("sum", True, 24),    # + 12 per-sample multiplies
    ("mean", False, 18),  # + 2 bags x 3 divides
    ("max", False, 12),
])
def test_embedding_bag(mode, weights, flops):
    bag = nn.EmbeddingBag(10, 3, mode=mode)
    ids, offsets = torch.tensor([1, 2, 3, 4]), torch.tensor([0, 2])
    kwargs = dict(per_sample_weights=torch.rand(4)) if weights else {}
    assert count(lambda i, o: bag(i, o, **kwargs), ids, offsets).flops == flops


def test_scatter_and_index_adds():
    base, idx, src = torch.zeros(5, 3), torch.tensor([0, 1, 1, 4]), torch.randn(4, 3)
    assert run_counted(lambda: base.clone().index_add_(0, idx, src)).flops == 12          # 12 source elements
    assert run_counted(lambda: base.clone().index_add_(0, idx, src, alpha=2)).flops == 24  # + alpha multiply
    index = torch.tensor([[0, 1, 2], [4, 4, 4]])
    assert run_counted(lambda: base.clone().scatter_add_(0, index, src[:2])).flops == 6
    assert run_counted(lambda: base.clone().scatter_(0, index, src[:2])).flops == 0      # a plain write: free
    assert run_counted(lambda: base.clone().index_put_((idx,), src, accumulate=True)).flops == 12
    assert run_counted(lambda: base.clone().index_put_((idx,), src)).flops == 0


def test_multi_margin_and_ctc_losses():
    # multi_margin_loss on (4, 5): 3 per element * 20 + mean 21 = 81; backward 3*20 + 20 = 80
    x = X.clone().requires_grad_()
    result = run_counted(lambda: F.multi_margin_loss(x, T).backward())
    assert result.op("aten.multi_margin_loss") == (0, 81)
    assert result.op("aten.multi_margin_loss_backward") == (0, 80)
    # CTC: log-probs (T=5, B=2, C=4), padded targets (2, 2): states 5*2*(2*2 + 1) = 50:
    # forward 9*50 = 450; backward 11*50 + 3*40 = 670
    log_probs = torch.randn(5, 2, 4).log_softmax(2).requires_grad_()
    targets = torch.tensor([[1, 2], [1, 1]])
    result = run_counted(lambda: F.ctc_loss(log_probs, targets, [5, 5], [2, 2]).backward())
    assert result.op("aten._ctc_loss") == (0, 450)
    assert result.op("aten._ctc_loss_backward") == (0, 670)


def test_embedding_max_norm_renorm():
    # max_norm renorm of 2 looked-up rows of size 3: per row a norm (2*3 + 1) and a rescale (3) = 10 -> 20
    emb = nn.Embedding(5, 3, max_norm=1.0)
    assert count(emb, torch.tensor([1, 2])).flops == 20
