"""estimate_training_memory against the allocator on architectures the other tests do not name.

Each model is small (a step well under a second on CPU) and is run as users write the loop
(``allocator_steps.allocator_step``), with AdamW (foreach) and SGD with momentum, some with other
optimizers and loops. The check is the one of ``test_training_memory_allocator.py``: the allocator's
running total as each operator returns equals the estimate's peak plus the optimizer's host
counters, to the byte, apart from what the dispatcher cannot see, named per case with its size.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

from deeplite_like.backends.torch import estimate_training_memory
from deeplite_like.backends.torch.counting.meta import device_storage
from tests.torch.allocator_steps import allocator_step

pytestmark = pytest.mark.slow  # (about 60 steps of the estimate and of the allocator: tens of seconds)


# ---------------------------------------------------------------------------------------------- models

class ConvNeXtBlock(nn.Module):
    """ConvNeXt: depthwise 7x7, LayerNorm over channels-last (permute), 4x MLP with GELU, layer scale."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 2, 2)
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        h = self.dw(x).permute(0, 2, 3, 1)
        h = self.pw2(F.gelu(self.pw1(self.norm(h))))
        x = x + (self.gamma * h).permute(0, 3, 1, 2)
        return self.head(x.mean((2, 3)))


class UNet(nn.Module):
    """Two levels: Conv2d + GroupNorm + ReLU, max-pool down, ConvTranspose2d and interpolate up, cat skips."""

    def __init__(self) -> None:
        super().__init__()

        def block(i: int, o: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(4, o), nn.ReLU())
        self.down1, self.down2, self.mid = block(3, 8), block(8, 16), block(16, 16)
        self.up2 = nn.ConvTranspose2d(16, 16, 2, 2)
        self.dec2 = block(32, 8)
        self.dec1 = block(16, 8)
        self.out = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s1 = self.down1(x)
        s2 = self.down2(F.max_pool2d(s1, 2))
        m = self.mid(F.max_pool2d(s2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), s2], 1))
        up = F.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=False)
        d1 = self.dec1(torch.cat([up, s1], 1))
        nearest = F.interpolate(self.out(d1), scale_factor=0.5, mode="nearest")
        return F.interpolate(nearest, size=x.shape[-2:], mode="nearest")


class MobileNetV3Block(nn.Module):
    """Inverted residual with hardswish, squeeze-excitation (hardsigmoid gate) and BatchNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(8, 24, 1, bias=False), nn.BatchNorm2d(24), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(24, 24, 3, 1, 1, groups=24, bias=False), nn.BatchNorm2d(24), nn.Hardswish())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(24, 8, 1), nn.ReLU(), nn.Conv2d(8, 24, 1),
                                nn.Hardsigmoid())
        self.project = nn.Sequential(nn.Conv2d(24, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        h = self.dw(self.expand(x))
        x = x + self.project(h * self.se(h))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class MBConv(nn.Module):
    """EfficientNet's MBConv: 1x1 expand, depthwise 3x3, SE with SiLU, 1x1 project, BatchNorm + SiLU."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU())
        self.expand = nn.Sequential(nn.Conv2d(8, 32, 1, bias=False), nn.BatchNorm2d(32), nn.SiLU())
        self.dw = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 1, groups=32, bias=False), nn.BatchNorm2d(32), nn.SiLU())
        self.reduce, self.restore = nn.Conv2d(32, 2, 1), nn.Conv2d(2, 32, 1)
        self.project = nn.Sequential(nn.Conv2d(32, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        h = self.dw(self.expand(x))
        gate = torch.sigmoid(self.restore(F.silu(self.reduce(h.mean((2, 3), keepdim=True)))))
        x = x + self.project(h * gate)
        return self.head(x.mean((2, 3)))


class ViT(nn.Module):
    """Class token, learned positions, nn.TransformerEncoderLayer (pre-norm, batch-first, GELU, dropout 0.1)."""

    def __init__(self, dropout: float = 0.1) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, 32, 4, 4)
        self.cls = nn.Parameter(torch.zeros(1, 1, 32))
        self.pos = nn.Parameter(0.02 * torch.randn(1, 17, 32))
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(32, 4, 64, dropout=dropout, batch_first=True, norm_first=True,
                                       activation="gelu") for _ in range(2))
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], 1) + self.pos
        for layer in self.layers:
            tokens = layer(tokens)
        return self.head(self.norm(tokens)[:, 0])


class GPT(nn.Module):
    """A causal GPT block: fused qkv, F.scaled_dot_product_attention(is_causal=True), GELU MLP, LM head."""

    def __init__(self, vocab: int = 64, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(16, d)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        x = x + self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return self.lm_head(self.ln_f(x))


class MathGPT(GPT):
    """The GPT with torch's math attention chosen by the model (``sdpa_kernel``), as on a CPU without flash."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        with sdpa_kernel(SDPBackend.MATH):
            return super().forward(ids)


class Audio1d(nn.Module):
    """A 1-D conv audio classifier: Conv1d + BatchNorm1d + ReLU, strided, AdaptiveAvgPool1d."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 8, 9, 4, 4), nn.BatchNorm1d(8), nn.ReLU(),
            nn.Conv1d(8, 16, 5, 2, 2), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 16, 3, 1, 1), nn.BatchNorm1d(16), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class SuperResolution(nn.Module):
    """ESPCN-style: convs with PReLU, then PixelShuffle(2)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 5, padding=2), nn.PReLU(), nn.Conv2d(16, 16, 3, padding=1),
                                  nn.PReLU(16), nn.Conv2d(16, 3 * 4, 3, padding=1), nn.PixelShuffle(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class GraphLayer(nn.Module):
    """Message passing: gather source features, index_add_ to destinations, scatter_add degree, mean."""

    def __init__(self, edges: torch.Tensor, nodes: int = 12, d: int = 16) -> None:
        super().__init__()
        self.register_buffer("edges", edges)
        self.nodes = nodes
        self.msg = nn.Linear(d, d)
        self.update = nn.Linear(2 * d, d)
        self.head = nn.Linear(d, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        src, dst = self.edges
        messages = self.msg(x)[src]
        agg = torch.zeros_like(x).index_add_(0, dst, messages)
        degree = torch.zeros(self.nodes, dtype=x.dtype, device=x.device).scatter_add_(
            0, dst, torch.ones_like(dst, dtype=x.dtype))
        h = F.relu(self.update(torch.cat([x, agg / degree.clamp(min=1).unsqueeze(1)], 1)))
        return self.head(h)


class MixtureOfExperts(nn.Module):
    """Top-2 routing over 4 expert MLPs: topk, softmax of the chosen logits, per-expert index_add_."""

    def __init__(self, d: int = 16, experts: int = 4) -> None:
        super().__init__()
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))
                                     for _ in range(experts))
        self.head = nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.router(x)
        top, chosen = torch.topk(logits, 2, dim=-1)
        weights = F.softmax(top, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            w = weights[token, slot].unsqueeze(1)
            out = out.index_add(0, token, expert(x[token]) * w)
        gate_probs = torch.gather(F.softmax(logits, -1), 1, chosen)
        return self.head(out + x) + gate_probs.sum(-1, keepdim=True)


class Siamese(nn.Module):
    """Contrastive: a shared encoder, F.normalize, a cosine-similarity matrix over the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(24, 32), nn.ELU(), nn.Linear(32, 16))
        self.temperature = 0.1

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        za, zb = F.normalize(self.encoder(a), dim=1), F.normalize(self.encoder(b), dim=1)
        pair = F.cosine_similarity(za, zb, dim=1)
        return za @ zb.t() / self.temperature + pair.mean()


class TiedLM(nn.Module):
    """Embedding and LM head sharing one weight, a GRU-free MLP body with Mish and Softplus."""

    def __init__(self, vocab: int = 50, d: int = 24) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.body = nn.Sequential(nn.Linear(d, 48), nn.Mish(), nn.Linear(48, d), nn.Softplus())
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        return self.lm_head(h + self.body(h))


class FrozenBackbone(nn.Module):
    """A frozen conv backbone (requires_grad False, BatchNorm in train mode) and a trainable head."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.head = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.2), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


class BilinearNet(nn.Module):
    """nn.Bilinear of two projections, PReLU, Dropout in train mode."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(10, 12), nn.Linear(10, 8)
        self.bilinear = nn.Bilinear(12, 8, 16)
        self.act = nn.PReLU()
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(self.act(self.bilinear(self.a(x), self.b(x)))))


class Distillation(nn.Module):
    """A student trained against a frozen teacher run under no_grad (KL divergence of softened outputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.teacher = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 10))
        self.teacher.requires_grad_(False)
        self.student = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            teacher = self.teacher(x)
        return torch.stack([self.student(x), teacher])


# ---------------------------------------------------------------------------------------------- losses

def distillation_loss(out: torch.Tensor) -> torch.Tensor:
    student, teacher = out
    return F.kl_div(F.log_softmax(student / 2.0, -1), F.log_softmax(teacher / 2.0, -1), reduction="batchmean",
                    log_target=True)


def lm_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                           label_smoothing=0.1, ignore_index=0)


def contrastive_loss(similarity: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(similarity, torch.arange(similarity.shape[0], device=similarity.device))


def edges() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randint(0, 12, (2, 40))


def gen(seed: int, *shape: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(*shape)


# (name, model factory, inputs, loss_fn, target, estimate options)
CASES = {
    "convnext": (ConvNeXtBlock, lambda: (gen(1, 2, 3, 16, 16),), F.cross_entropy, torch.tensor([1, 7]), {}),
    "unet": (UNet, lambda: (gen(1, 2, 3, 16, 16),), F.mse_loss, gen(2, 2, 2, 16, 16), {}),
    "mobilenetv3": (MobileNetV3Block, lambda: (gen(1, 2, 3, 16, 16),), F.cross_entropy, torch.tensor([3, 0]), {}),
    "mbconv": (MBConv, lambda: (gen(1, 2, 3, 16, 16),), F.cross_entropy, torch.tensor([3, 0]), {}),
    "vit": (ViT, lambda: (gen(1, 2, 3, 16, 16),), F.cross_entropy, torch.tensor([3, 9]), {"attention": "cpu"}),
    "gpt_cpu": (GPT, lambda: (torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(3)),),
                lm_loss, "ids", {"attention": "cpu"}),
    "gpt_math": (MathGPT, lambda: (torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(3)),),
                 lm_loss, "ids", {"attention": "math"}),
    "gpt_math_cpu": (MathGPT, lambda: (torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(3)),),
                     lm_loss, "ids", {"attention": "cpu"}),
    "audio1d": (Audio1d, lambda: (gen(1, 4, 1, 256),), F.cross_entropy, torch.tensor([0, 1, 2, 4]), {}),
    "superres": (SuperResolution, lambda: (gen(1, 2, 3, 8, 8),), F.smooth_l1_loss, gen(2, 2, 3, 16, 16), {}),
    "gnn": (lambda: GraphLayer(edges()), lambda: (gen(1, 12, 16),), F.cross_entropy,
            torch.tensor([0, 1, 2] * 4), {}),
    "moe": (MixtureOfExperts, lambda: (gen(1, 10, 16),), F.binary_cross_entropy_with_logits,
            gen(2, 10, 4).gt(0).float(), {}),
    "siamese": (Siamese, lambda: (gen(1, 6, 24), gen(2, 6, 24)), contrastive_loss, None, {}),
    "tied_lm": (TiedLM, lambda: (torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(3)),),
                lm_loss, "ids", {}),
    "frozen": (FrozenBackbone, lambda: (gen(1, 2, 3, 16, 16),), F.cross_entropy, torch.tensor([1, 2]), {}),
    "bilinear": (BilinearNet, lambda: (gen(1, 6, 10),), F.binary_cross_entropy_with_logits, gen(2, 6, 1).gt(0).float(),
                 {}),
    "distill": (Distillation, lambda: (gen(1, 6, 20),), distillation_loss, None, {}),
}


def made(name: str):
    factory, inputs, loss_fn, target, options = CASES[name]
    torch.manual_seed(0)
    model = factory()
    xs = inputs()
    if isinstance(target, str):
        target = xs[0]
    return model, xs, loss_fn, target, options


OPTIMIZERS = {
    "adamw": lambda foreach: (lambda p: torch.optim.AdamW(p, foreach=foreach)),
    "sgd": lambda foreach: (lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=foreach)),
    "adam": lambda foreach: (lambda p: torch.optim.Adam(p, foreach=foreach)),
    "rmsprop": lambda foreach: (lambda p: torch.optim.RMSprop(p, foreach=foreach)),
    "adagrad": lambda foreach: (lambda p: torch.optim.Adagrad(p, foreach=foreach)),
}


def compare(name: str, opt: str, foreach: bool = True, meta: bool = True, **loop):
    """(the allocator's dispatcher peak - the estimate's peak - host counters, the estimate)."""
    model, xs, loss_fn, target, options = made(name)
    result = estimate_training_memory(model, *xs, optimizer=OPTIMIZERS[opt](foreach), loss_fn=loss_fn,
                                      target=target, meta=meta, **options, **loop)
    model, xs, loss_fn, target, options = made(name)
    real = allocator_step(model, xs, optimizer=OPTIMIZERS[opt](foreach), loss_fn=loss_fn, target=target, **loop)
    return real.dispatcher_peak_bytes - result.peak_bytes - result.optimizer_host_bytes, result


# ---------------------------------------------------------------------------------------------- checks

# What the dispatcher cannot see, by class (docs/memory.rst, the allocator checks):
# * WRAPPED: the float64 CPU scalar torch wraps a Python number in before dispatch, alive while the
#   per-tensor loops of Adam / AdamW / Adagrad divide by it (bias correction, clr): 8 B, at the peak when
#   the peak is that loop's division (the peak in the optimizer phase).
# * COUNTERS_LATER: with steady_state=False the optimizer's host `step` counters (optimizer_host_bytes,
#   4 B per parameter tensor) are made in the first optimizer.step(): a peak before the optimizer phase
#   does not hold them, so the real step reads optimizer_host_bytes less there than peak + host.
WRAPPED = 8
WRAPPING_LOOPS = {"adam", "adamw", "adagrad"}


def unseen(opt: str, foreach: bool, result, steady_state: bool = True) -> int:
    """The bytes the allocator holds at its dispatcher peak beyond peak + host counters (the classes above)."""
    if not steady_state and result.peak_phase != "optimizer":
        return -result.optimizer_host_bytes
    return WRAPPED if opt in WRAPPING_LOOPS and not foreach and result.peak_phase == "optimizer" else 0


ON_META = [name for name in CASES if name != "moe"]


@pytest.mark.parametrize("meta", [True, False])
@pytest.mark.parametrize("opt", ["adamw", "sgd"])
@pytest.mark.parametrize("name", ON_META)
def test_models_match_the_allocator(name, opt, meta):
    difference, result = compare(name, opt, meta=meta)
    assert difference == unseen(opt, True, result)


LOOPS = [("adam", False, {}), ("rmsprop", True, {}), ("adagrad", False, {}), ("adamw", True, {"clip_grad_norm": 1.0}),
         ("sgd", True, {"accumulation_steps": 2}), ("adamw", True, {"accumulation_steps": 2, "set_to_none": False}),
         ("sgd", False, {"zero_grad_at": "after_forward", "keep_output": True}),
         ("adamw", True, {"steady_state": False})]


@pytest.mark.parametrize("opt, foreach, loop", LOOPS)
@pytest.mark.parametrize("name", ON_META)
def test_optimizers_and_loops_match_the_allocator(name, opt, foreach, loop):
    difference, result = compare(name, opt, foreach, **loop)
    assert difference == unseen(opt, foreach, result, loop.get("steady_state", True))


def test_the_unseen_classes_occur_in_the_audit():
    # (so that neither exception above is dead code: each is met at least once)
    difference, result = compare("bilinear", "adam", False)  # the per-tensor Adam peaks at its division
    assert result.peak_op == "aten.div.Tensor" and difference == WRAPPED
    difference, result = compare("convnext", "adamw", steady_state=False)  # 13 parameter tensors: 52 B of counters
    assert result.peak_phase == "backward" and result.optimizer_host_bytes == 13 * 4 and difference == -52


@pytest.mark.parametrize("opt", ["adamw", "sgd"])
def test_top_k_routing_is_refused_on_meta_and_measured_for_real(opt):
    # torch.where(chosen == e) on the top-k of the router's logits: a shape that depends on the weights
    with pytest.raises(Exception, match="aten.nonzero in the root module"):
        compare("moe", opt)
    difference, result = compare("moe", opt, meta=False)
    assert difference == 0


@pytest.mark.parametrize("opt, foreach, loop", LOOPS)
def test_top_k_routing_loops_match_the_allocator_for_real(opt, foreach, loop):
    difference, result = compare("moe", opt, foreach, meta=False, **loop)
    assert difference == unseen(opt, foreach, result, loop.get("steady_state", True))


# ---------------------------------------------------------------------------------------------- the fixes

def test_reduced_losses_hold_the_elementwise_storage():
    # The U-Net's mse_loss over a 2 x 2 x 16 x 16 fp32 output: the scalar loss keeps the elementwise
    # loss's storage, 2 * 2 * 16 * 16 * 4 = 4,096 B (the meta kernel's own scalar: 4 B). The loss phase
    # allocates only the loss: its end is 4,096 B above its start, on meta as for real.
    for meta in (True, False):
        model, xs, loss_fn, target, options = made("unet")
        result = estimate_training_memory(model, *xs, loss_fn=loss_fn, target=target, meta=meta, optimizer="sgd")
        (loss,) = [p for p in result.phases if p.name == "loss"]
        assert loss.end_bytes - loss.start_bytes == 2 * 2 * 16 * 16 * 4 == 4096


@pytest.mark.parametrize("loss, shape", [
    (lambda a, b, r: F.mse_loss(a, b, reduction=r), (2, 3, 4)),
    (lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r), (2, 3, 4)),
    (lambda a, b, r: F.binary_cross_entropy(a.sigmoid(), b.sigmoid(), reduction=r), (2, 3, 4)),
    (lambda a, b, r: F.soft_margin_loss(a, b.sign(), reduction=r), (2, 3, 4)),
    (lambda a, b, r: F.mse_loss(a, b[:1], reduction=r), (2, 3, 4)),  # a broadcast target: the broadcast shape
])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.filterwarnings("ignore:Using a target size")
def test_meta_loss_storage_is_the_cpu_kernels(loss, shape, reduction):
    class Storages(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[int] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = device_storage(func, func)(*args, **(kwargs or {}))
            self.seen.append(out.untyped_storage().nbytes())
            return out
    sizes = []
    for device in ("cpu", "meta"):
        a, b = torch.randn(*shape, device=device), torch.randn(*shape, device=device)
        with Storages() as mode:
            loss(a, b, reduction)
        sizes.append(mode.seen[-1])
    # reduced: 2 * 3 * 4 fp32 = 96 B (the elementwise loss); none: the same, the output itself
    assert sizes == [96, 96]


def test_fold_output_holds_its_columns_storage():
    # F.fold: col2im makes its output empty_like the columns, then resizes it: 2 x 36 x 64 fp32 columns
    # = 18,432 B held by the 2 x 4 x 8 x 8 output (2,048 B of it used); the meta run equals the CPU's.
    class Fold(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.fold(F.unfold(self.conv(x), 3, padding=1), (8, 8), 3, padding=1)
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8, 8)
    meta = estimate_training_memory(Fold(), x, optimizer="sgd")
    real = estimate_training_memory(Fold(), x, optimizer="sgd", meta=False)
    assert meta.phases == real.phases and meta.activations_bytes == real.activations_bytes
    # what the forward leaves: the output alone (the conv saves its input x, which is the caller's; unfold's
    # and fold's backward need only shapes), i.e. the fold's whole storage, 2 * 36 * 64 * 4 = 18,432 B
    assert meta.activations_bytes == 2 * 36 * 64 * 4 == 18432
    allocator = allocator_step(Fold(), (x,), optimizer=lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9))
    assert allocator.dispatcher_peak_bytes == meta.peak_bytes


def test_mish_backward_runs_as_one_operator_on_meta_and_the_kernel_is_removed_after():
    # nn.Mish's backward on meta decomposed into 11 operators (softplus, tanh, sigmoid, ...) holding up
    # to four tensors of the input's size: the tied LM's peak was 29,952 B above the CPU's.
    model, xs, loss_fn, target, options = made("tied_lm")
    meta = estimate_training_memory(model, *xs, loss_fn=loss_fn, target=target, optimizer="sgd")
    real = estimate_training_memory(model, *xs, loss_fn=loss_fn, target=target, optimizer="sgd", meta=False)
    assert meta.phases == real.phases
    # the meta kernel lives only while a measurement runs
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::mish_backward", "Meta")


def test_a_cpu_tensor_beside_meta_ones_is_named_with_what_to_do():
    # torch.arange(n) without device= in the loss stays on the CPU while the step runs on meta (a GPU
    # run fails there too): the error says so, not that values are missing
    def loss(similarity: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(similarity, torch.arange(similarity.shape[0]))
    with pytest.raises(Exception, match=r"aten.nll_loss_forward in the root module got a cpu tensor of shape \(6,\) "
                                        r"beside meta tensors.*device=x.device"):
        estimate_training_memory(Siamese(), gen(1, 6, 24), gen(2, 6, 24), loss_fn=loss)
    # with meta=False both are on the CPU: nothing to say
    assert estimate_training_memory(Siamese(), gen(1, 6, 24), gen(2, 6, 24), loss_fn=loss, meta=False).peak_bytes > 0


class FractionalPool3d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3d(2, 3, 1)
        self.pool = nn.FractionalMaxPool3d(2, output_size=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(x)).flatten(1)


def multi_margin(out: torch.Tensor) -> torch.Tensor:
    return F.multi_margin_loss(out, torch.arange(4, device=out.device) % 5)


def multilabel_margin(out: torch.Tensor) -> torch.Tensor:
    target = torch.zeros(4, 5, dtype=torch.long, device=out.device)
    return F.multilabel_margin_loss(out, target.index_fill(1, torch.tensor([2], device=out.device), -1))


class CTCHead(nn.Module):
    """Per-frame log-probabilities over 5 classes (blank 0) for 10 frames of batch 2."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).log_softmax(-1)


def ctc(log_probs: torch.Tensor) -> torch.Tensor:
    frames, batch = log_probs.shape[:2]
    targets = torch.ones(batch, 3, dtype=torch.long, device=log_probs.device)
    return F.ctc_loss(log_probs, targets, [frames] * batch, [3] * batch)


@pytest.mark.parametrize("factory, shape, loss", [
    (lambda: nn.Linear(6, 5), (4, 6), multi_margin), (lambda: nn.Linear(6, 5), (4, 6), multilabel_margin),
    (FractionalPool3d, (2, 2, 4, 4, 4), None), (CTCHead, (10, 2, 8), ctc),
])
def test_operators_without_a_meta_kernel_train_on_meta(factory, shape, loss):
    # multi_margin_loss_backward, multilabel_margin_loss_backward, fractional_max_pool3d_backward and
    # _ctc_loss_backward have a CPU kernel and none for meta (refused before): each gradient is shaped as
    # the forward's input
    torch.manual_seed(0)
    x = torch.randn(*shape)
    torch.manual_seed(0)
    meta = estimate_training_memory(factory(), x, optimizer="sgd", loss_fn=loss)
    torch.manual_seed(0)
    real = estimate_training_memory(factory(), x, optimizer="sgd", loss_fn=loss, meta=False)
    assert meta.phases == real.phases and meta.activations_bytes == real.activations_bytes
    torch.manual_seed(0)
    allocator = allocator_step(factory(), (x,), optimizer=lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9),
                               loss_fn=loss)
    assert allocator.dispatcher_peak_bytes == meta.peak_bytes


def multilabel_from_data(out: torch.Tensor) -> torch.Tensor:
    return F.multilabel_margin_loss(out, torch.tensor([[0, 1, -1, 0, 0]] * 4, device=out.device))


def test_a_target_made_from_python_data_is_counted_for_real_and_unseen_on_meta():
    # torch.tensor(data, device=...) is allocated before dispatch (the dispatcher shows its lift_fresh, an
    # alias by schema): with meta=False it is counted on the step's device, 4 x 5 int64 = 160 B, alive at
    # the multilabel_margin_loss_backward peak; on meta no dispatch mode sees it at all: 160 B unseen.
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    results = {}
    for meta in (True, False):
        torch.manual_seed(0)
        results[meta] = estimate_training_memory(nn.Linear(6, 5), x, optimizer="sgd", loss_fn=multilabel_from_data,
                                                 meta=meta)
    torch.manual_seed(0)
    allocator = allocator_step(nn.Linear(6, 5), (x,), optimizer=lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9),
                               loss_fn=multilabel_from_data)
    assert results[False].peak_op == "aten.multilabel_margin_loss_backward.default"
    assert allocator.dispatcher_peak_bytes == results[False].peak_bytes
    assert allocator.dispatcher_peak_bytes == results[True].peak_bytes + 4 * 5 * 8 == results[True].peak_bytes + 160
