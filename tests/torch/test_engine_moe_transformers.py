"""transformers 5's mixture-of-experts layers (``grouped_mm`` experts by default) count exactly,
also on meta (skips without transformers; run with ``/work/venv-hf``)."""
from __future__ import annotations

import pytest
import torch

from deeplite_like.backends.torch.counting import count_ops

transformers = pytest.importorskip("transformers", reason="transformers is not installed here")


def _tiny_mixtral():
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=2,
        num_local_experts=4, num_experts_per_tok=2, vocab_size=500)
    return transformers.MixtralForCausalLM(config).eval()


# 32 tokens, batch 1. Per layer: q and o 2 * 32*128*128 = 1,048,576; k and v (2 kv heads x 8) 2 * 32*128*16
# = 131,072; router 32*128*4 = 16,384; attention QK^T and PV 2 * 16 heads * 32*32*8 = 262,144; experts:
# 32 tokens x top-2 = 64 routed rows, gate_up 64*128*512 + down 64*256*128 = 6,291,456.
# Per layer 7,749,632; 2 layers 15,499,264; lm_head 32*128*500 = 2,048,000. Total 17,547,264.
MIXTRAL_MACS = 17_547_264
EXPERT_MACS = 2 * 6_291_456


@pytest.mark.parametrize("meta", [False, True])
def test_mixtral_with_grouped_mm_experts_counts_every_expert_product(meta):
    model = _tiny_mixtral()
    ids = torch.randint(0, 500, (1, 32))
    counted = count_ops(model, ids, kwargs={"use_cache": False}, meta=meta, warn_untracked=False)
    assert counted.macs == MIXTRAL_MACS
    assert counted.by_operator["aten._grouped_mm"].macs == EXPERT_MACS
    assert counted.untracked == {}


def test_mixtral_routing_does_not_change_the_count():
    # Whatever the router picks, 64 rows go through the experts: the same MACs for other tokens.
    model = _tiny_mixtral()
    counts = {count_ops(model, torch.randint(0, 500, (1, 32)), kwargs={"use_cache": False}, warn_untracked=False).macs
              for _ in range(3)}
    assert counts == {MIXTRAL_MACS}


def test_mixtral_backward_prices_the_grouped_backward():
    # Each expert product has a dX and a dW product of its own size in backward, except where the
    # input needs no gradient; the expert products alone: forward 12,582,912, backward 2 x that.
    model = _tiny_mixtral().train()
    counted = count_ops(model, torch.randint(0, 500, (1, 32)), kwargs={"use_cache": False}, backward=True,
                        warn_untracked=False)
    assert counted.untracked == {}
    assert counted.by_operator["aten._grouped_mm"].macs == 3 * EXPERT_MACS


@pytest.mark.parametrize("backward", [False, True])
def test_transformers_grouped_mm_fallback_is_priced_like_grouped_mm(backward):
    # transformers' custom op for where torch._grouped_mm cannot run: (10, 16) x (3, 16, 8) with offs
    # ending at 10: 10*16*8 = 1,280 MACs forward; backward dX and dW, 2 * 1,280.
    import transformers.integrations.moe  # noqa: F401  (defines torch.ops.transformers.*)

    class Fallback(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 16, 8))

        def forward(self, x, offs):
            return torch.ops.transformers.grouped_mm_fallback(x, self.w, offs)

    counted = count_ops(Fallback(), torch.randn(10, 16), torch.tensor([4, 7, 10]), backward=backward)
    assert counted.phases["forward"].macs == 1_280
    assert counted.macs == (3 if backward else 1) * 1_280
    assert counted.untracked == {}
