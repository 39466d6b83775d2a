"""A Llama-shaped decoder (RMSNorm, rotary embeddings, grouped-query attention, SwiGLU, untied head),
built on the meta device for the training-memory benchmark and the ``memory`` command.

``llama_7b()``: d 4096, 32 layers, 32 heads, SwiGLU 11008, vocab 32000 (6,738,415,616 parameters,
as Llama-2-7B). ``llama_13b()``: d 5120, 40 layers, 40 heads, SwiGLU 13824, vocab 32000
(13,015,864,320 parameters, as Llama-2-13B). ``llama_70b()``: d 8192, 80 layers, 64 heads / 8 KV heads, SwiGLU 28672, vocab 32000
(68,976,648,192 parameters, as Llama-2-70B).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 32_000
    d: int = 4096
    layers: int = 32
    heads: int = 32
    kv_heads: int = 32
    ff: int = 11_008
    max_seq: int = 4096

    @property
    def params(self) -> int:
        """Embedding + per layer (q, o: d^2; k, v: d * kv_dim; 3 d ff; 2 norms d) + final norm + head."""
        kv = self.d // self.heads * self.kv_heads
        per_layer = 2 * self.d * self.d + 2 * self.d * kv + 3 * self.d * self.ff + 2 * self.d
        return 2 * self.vocab * self.d + self.layers * per_layer + self.d


LLAMA_7B = LlamaConfig()
LLAMA_13B = LlamaConfig(d=5120, layers=40, heads=40, kv_heads=40, ff=13_824)
LLAMA_70B = LlamaConfig(d=8192, layers=80, heads=64, kv_heads=8, ff=28_672)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)).to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-b, a), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.d // cfg.heads
        self.q_proj = nn.Linear(cfg.d, cfg.d, bias=False)
        self.k_proj = nn.Linear(cfg.d, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.d, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.d, cfg.d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        groups = self.heads // self.kv_heads
        if groups > 1:  # as transformers' repeat_kv
            k, v = (y.repeat_interleave(groups, dim=1) for y in (k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.d)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.d)
        self.gate_proj = nn.Linear(cfg.d, cfg.ff, bias=False)
        self.up_proj = nn.Linear(cfg.d, cfg.ff, bias=False)
        self.down_proj = nn.Linear(cfg.ff, cfg.d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    """``forward(ids, labels=None)``: logits, or the next-token cross-entropy when labels are given."""

    def __init__(self, cfg: LlamaConfig = LLAMA_7B) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.d)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.d)
        self.lm_head = nn.Linear(cfg.d, cfg.vocab, bias=False)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        t = ids.shape[1]
        half = self.cfg.d // self.cfg.heads // 2
        freq = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32, device=ids.device) / half))
        angles = torch.outer(torch.arange(t, dtype=torch.float32, device=ids.device), freq)
        cos, sin = torch.cat((angles.cos(),) * 2, -1), torch.cat((angles.sin(),) * 2, -1)
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        if labels is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())


def llama_7b() -> Llama:
    """Llama-2-7B-shaped, on the meta device (nothing allocated)."""
    with torch.device("meta"):
        return Llama(LLAMA_7B)


def llama_13b() -> Llama:
    """Llama-2-13B-shaped, on the meta device (nothing allocated)."""
    with torch.device("meta"):
        return Llama(LLAMA_13B)


def llama_70b() -> Llama:
    """Llama-2-70B-shaped, on the meta device (nothing allocated)."""
    with torch.device("meta"):
        return Llama(LLAMA_70B)
