"""meta=True counts without allocating, and counts exactly what a real run counts."""
from __future__ import annotations

import math
import time
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from deeplite_like.backends.torch.counting import ForwardError, UntrackedOpWarning, count_ops

from .engine_fixtures import toy_table  # noqa: F401  (fixture)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# -- models ----------------------------------------------------------------------------------
def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def small_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 4))


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = (proj(x).view(b, t, h, d // h).transpose(1, 2) for proj in (self.q, self.k, self.v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        mask = torch.full((t, t), float("-inf")).triu(1)  # created without a device: meta in a meta run
        out = (torch.softmax(scores + mask, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        return self.o(out)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.norm1, self.attn = nn.RMSNorm(dim), Attention(dim, heads)
        self.norm2, self.mlp = nn.RMSNorm(dim), MLP(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    """A decoder-only transformer in the Llama shape; ``tie`` shares the embedding with the head."""

    def __init__(self, vocab: int, dim: int, layers: int, heads: int, hidden: int, tie: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(DecoderLayer(dim, heads, hidden) for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        if tie:
            self.head.weight = self.embed.weight

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def tiny_decoder() -> nn.Module:
    return Decoder(vocab=50, dim=16, layers=2, heads=4, hidden=24, tie=True)


CASES = {
    "cnn": (small_cnn, lambda: (torch.randn(2, 3, 16, 16),)),
    "mlp": (small_mlp, lambda: (torch.randn(5, 16),)),
    "encoder": (lambda: nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), lambda: (torch.randn(2, 7, 16),)),
    "decoder": (tiny_decoder, lambda: (torch.randint(0, 50, (2, 9)),)),
}


# -- tests -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("train", [False, True])
def test_meta_counts_equal_real_counts(name, train):
    """With the real formula table: every op, module and untracked entry is the same."""
    torch.manual_seed(0)
    build, inputs = CASES[name]
    model = build().train(train)
    args = inputs()
    real, meta = count_ops(model, *args).as_dict(), count_ops(model, *args, meta=True).as_dict()
    if name == "encoder":
        # Scaled-dot-product attention picks a kernel per device (a fused CPU kernel on real tensors,
        # the math decomposition on meta): the operators differ, the counts must not (a fused path
        # is counted as the unfused one).
        for result in (real, meta):
            for key in ("by_operator", "untracked", "module_ops"):
                del result[key]
            result["phases"] = {k: (v["macs"], v["flops"]) for k, v in result["phases"].items()}
    assert meta == real
    assert real["by_module"][""]["calls"] == 1


@pytest.mark.usefixtures("toy_table")
def test_meta_run_sees_meta_tensors_and_leaves_real_ones():
    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
            self.seen = None

        def forward(self, x):
            self.seen = (x.device.type, self.fc.weight.device.type, torch.zeros(1).device.type, x.requires_grad)
            return self.fc(x)

    model = Probe()
    weight = model.fc.weight
    result = count_ops(model, torch.randn(3, 4, requires_grad=True), meta=True)
    assert model.seen == ("meta", "meta", "meta", True)
    assert model.fc.weight is weight and weight.device.type == "cpu"
    # Linear(4, 2), batch 3: MACs 3*4*2 = 24; FLOPs 48 + bias 6 = 54
    assert (result.macs, result.flops) == (24, 54)


def test_model_built_on_meta_counts_like_the_real_one():
    torch.manual_seed(0)
    real_model = tiny_decoder()
    with torch.device("meta"):
        meta_model = tiny_decoder()
    ids = torch.randint(0, 50, (2, 9))
    on_meta = count_ops(meta_model, ids)  # meta=False: the meta parameters are detected
    assert on_meta.as_dict() == count_ops(real_model, ids).as_dict()
    assert all(p.is_meta for p in meta_model.parameters())


@pytest.mark.usefixtures("toy_table")
def test_seven_billion_parameter_decoder_on_meta_counts_in_seconds():
    vocab, dim, layers, heads, hidden, tokens = 32000, 4096, 32, 32, 11008, 128
    with torch.device("meta"):
        model = Decoder(vocab, dim, layers, heads, hidden)
    params = sum(p.numel() for p in model.parameters())
    assert 6.5e9 < params < 7e9  # 2*32000*4096 + 32*(4*4096^2 + 3*4096*11008 + 2*4096) + 4096 = 6.74e9
    ids = torch.randint(0, vocab, (1, tokens))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UntrackedOpWarning)
        result = count_ops(model, ids)
    elapsed = time.perf_counter() - start
    # per layer: q, k, v, o: 4*T*d*d; gate, up, down: 3*T*d*f; Q.K^T and P.V: 2*T*T*d (all heads);
    # head: T*d*V.  = 32*128*(4*4096^2 + 3*4096*11008) + 32*2*128^2*4096 + 128*4096*32000
    #              = 828928688128 + 4294967296 + 16777216000 = 850000871424
    assert result.macs == 850_000_871_424
    assert result.by_module["layers.0.attn"].macs == tokens * 4 * dim * dim + 2 * tokens * tokens * dim
    assert elapsed < 30, f"counting a meta 7B decoder took {elapsed:.1f} s"


@pytest.mark.usefixtures("toy_table")
def test_tied_weights_survive_a_meta_run():
    model = tiny_decoder()
    assert model.head.weight is model.embed.weight
    result = count_ops(model, torch.randint(0, 50, (1, 3)), meta=True)
    assert model.head.weight is model.embed.weight and not model.head.weight.is_meta
    # head: 1*3 tokens x 16 x 50 = 2400 MACs
    assert result.by_module["head"].macs == 2400


def test_a_forward_that_reads_values_fails_clearly_on_meta():
    class ReadsValues(nn.Module):
        def forward(self, x):
            return x * x.max().item()

    with pytest.raises(ForwardError) as info:
        count_ops(ReadsValues(), torch.randn(2, 3), meta=True)
    assert "meta device" in str(info.value) and "meta=False" in str(info.value)
    assert "the root module (ReadsValues)" in str(info.value)
