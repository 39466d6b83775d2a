"""The formula table as a whole: documented, consistent, and covering what real models run."""
import inspect

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from deeplite_like.backends.torch.counting import registry
from deeplite_like.backends.torch.counting.formulas._common import MISSING
from tests.torch._formula_harness import aten, count, run_counted


def test_every_named_op_exists_in_this_torch():
    assert MISSING == []  # a typo in an op name would leave that op silently uncounted


def test_every_formula_documents_its_cost():
    undocumented = sorted({registry.op_name(op) for op, fn in registry._FORMULAS.items()
                           if not (inspect.getdoc(fn) or "").strip()})
    assert undocumented == []


def test_no_op_is_both_priced_and_free():
    assert [registry.op_name(op) for op in registry._FORMULAS if op in registry._FREE] == []


@pytest.mark.parametrize("op", [aten.view, aten.permute, aten.cat, aten.index_select, aten.embedding, aten.eq,
                                aten.where, aten._to_copy, aten.upsample_nearest2d, aten.zeros, aten.masked_fill])
def test_moves_comparisons_and_casts_are_free(op):
    assert registry.is_free(op) and registry.lookup(op) is None


def test_data_movement_costs_nothing():
    x = torch.randn(2, 3, 4)

    def shuffle():
        y = x.permute(2, 0, 1).reshape(4, 6).t().contiguous()
        z = torch.cat([y, y.flip(0)], 0)[::2].unsqueeze(0).expand(3, -1, -1).clone()
        idx = torch.tensor([0, 2])
        return z.index_select(1, idx), torch.gather(z, 2, torch.zeros(3, 6, 1, dtype=torch.long)), z.half().float()
    result = run_counted(shuffle)
    assert (result.macs, result.flops) == (0, 0)


class _Mixed(nn.Module):
    """A bit of everything: conv, norm, pooling, attention, recurrence, interpolation, heads."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(), nn.MaxPool2d(2))
        self.up = nn.Upsample(scale_factor=2, mode="bilinear")
        self.encoder = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True, activation="gelu")
        self.rnn = nn.LSTM(8, 8, batch_first=True, bidirectional=True)
        self.head = nn.Sequential(nn.LayerNorm(16), nn.Dropout(0.1), nn.Linear(16, 4))

    def forward(self, x):
        x = self.up(self.stem(x))                       # (2, 8, 8, 8)
        x = F.adaptive_avg_pool2d(x, (2, 3)).flatten(2).transpose(1, 2)  # (2, 6, 8)
        x = self.encoder(x)
        x, _ = self.rnn(x)
        return F.log_softmax(self.head(x.mean(1)), -1)


@pytest.mark.parametrize("meta", [False, True])
def test_a_mixed_model_trains_with_no_untracked_op(meta):
    torch.manual_seed(0)
    model = _Mixed().train()
    result = count(model, torch.randn(2, 3, 8, 8), backward=True, meta=meta,
                   loss_fn=lambda out: F.nll_loss(out, torch.tensor([1, 2], device=out.device)))
    assert result.macs > 0 and result.untracked == {}


def test_meta_and_real_runs_count_the_same_forward():
    # meta runs SDPA's math path and LSTM decomposed; the fused CPU kernels are priced as those paths
    torch.manual_seed(0)
    model = _Mixed().eval()
    x = torch.randn(2, 3, 8, 8)
    real, meta = count(model, x), count(model, x, meta=True)
    assert (real.macs, real.flops) == (meta.macs, meta.flops)


def test_model_macs_agree_with_flop_counter_on_contractions():
    # FlopCounterMode counts 2 x MACs of convolutions and matmuls only: on a CNN with grouped, depthwise,
    # dilated and transposed convs and linears, our MACs are exactly half of its FLOPs
    from tests.torch._formula_harness import flop_counter_flops

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16), nn.Conv2d(16, 32, 1, groups=4), nn.Hardswish(),
        nn.ConvTranspose2d(32, 8, 4, stride=2, padding=1), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, 10),
    ).eval()
    x = torch.randn(2, 3, 16, 16)
    assert 2 * count(model, x).macs == flop_counter_flops(lambda: model(x))
