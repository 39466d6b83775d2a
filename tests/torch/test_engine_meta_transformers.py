"""meta=True counts transformers 5 decoders exactly, with and without use_cache (skips without transformers).

transformers 5 decides from the position ids whether a batch holds packed sequences, with a
``bool()`` of a tensor (``find_packed_sequence_indices``); on meta that needs the values kept by
``counting/meta_values.py``.
"""
from __future__ import annotations

import time

import pytest
import torch

from deeplite_like.backends.torch.counting import count_ops

transformers = pytest.importorskip("transformers", reason="transformers is not installed here")


def both(model, *args, **kwargs):
    real = count_ops(model, *args, kwargs=kwargs, warn_untracked=False)
    meta = count_ops(model, *args, kwargs=kwargs, meta=True, warn_untracked=False)
    return real, meta

transformers = pytest.importorskip("transformers", reason="transformers is not installed here")


def _tiny_decoders():
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=64, bos_token_id=0, eos_token_id=0))
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=100))
    return {"gpt2": gpt2.eval(), "llama": llama.eval()}


@pytest.mark.parametrize("use_cache", [False, True])
def test_transformers_decoders_count_the_same_on_meta(use_cache):
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (2, 16))
    for name, model in _tiny_decoders().items():
        real, meta = both(model, ids, use_cache=use_cache)
        assert (meta.macs, meta.flops) == (real.macs, real.flops), name
        assert meta.macs > 0 and not meta.untracked, name


def test_llama_7b_config_counts_on_meta_from_its_config():
    # Llama-2-7B's shapes, 128 tokens, batch 1, use_cache=False (as in training).
    # Per layer per token: q, k, v, o 4 * 4096 * 4096 + MLP 3 * 4096 * 11008 = 202,375,168 MACs;
    # x 32 layers x 128 tokens = 828,928,688,128; lm_head 128 * 4096 * 32000 = 16,777,216,000;
    # attention Q.K^T and P.V: 32 layers * 2 * 128 * 128 * 4096 = 4,294,967,296.
    # Total 828,928,688,128 + 16,777,216,000 + 4,294,967,296 = 850,000,871,424 MACs.
    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32000)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    start = time.perf_counter()
    counted = count_ops(model, torch.randint(0, 32000, (1, 128)), kwargs={"use_cache": False}, warn_untracked=False)
    elapsed = time.perf_counter() - start
    assert counted.macs == 850_000_871_424
    assert elapsed < 30  # a loose bound against a hang; the speed itself is measured in benchmarks/
