"""Serving a causal LM: prefill and one decode step on meta (``backends/torch/serving.count_serving``).

The tiny Llama: 2 layers, hidden 64, 4 heads of 16, 2 key/value heads, MLP 128, vocabulary 100,
float32. Every figure is derived by hand in a comment.
"""
import pytest
import torch
import torch.nn as nn

transformers = pytest.importorskip("transformers")

from deeplite_like.backends.torch.serving import count_serving  # noqa: E402


@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    return transformers.LlamaForCausalLM(config).eval()


def test_prefill_decode_and_kv_cache_of_a_tiny_llama(llama):
    cost = count_serving(llama, prompt_tokens=8, context=16, batch_size=2)
    # KV cache at 16 tokens: keys and values, 2 layers, batch 2, 2 heads, 16 tokens, 16 dims, 4 bytes:
    #   2 · 2 · 2 · 2 · 16 · 16 · 4 = 16,384
    assert cost.kv_cache_bytes == 16_384
    # prefill, 2 · 8 = 16 tokens: per token and layer q 64·64 = 4,096, k and v 64·32 = 2,048 each,
    #   o 4,096, MLP 3 · 64·128 = 24,576 -> 36,864; x 16 tokens = 589,824; attention Q·Kᵀ and P·V
    #   2 · (2 · 4 heads · 8 · 8 · 16) = 16,384 -> 606,208 a layer, 1,212,416 for 2; lm_head 16 · 6,400
    #   = 102,400 -> 1,314,816
    assert cost.prefill.macs == 1_314_816
    # decode, 1 token at position 17 (16 cached + itself), batch 2: projections and MLP 2 · 36,864 =
    #   73,728 a layer; attention 2 · (2 · 4 · 1 · 17 · 16) = 4,352 -> 78,080; 2 layers 156,160;
    #   lm_head 2 · 6,400 = 12,800 -> 168,960
    assert cost.decode.macs == 168_960
    # the decode step reads every projection's weight once: q and o 64·64·4 = 16,384, k and v 8,192,
    # the MLP's three 32,768, lm_head 100·64·4 = 25,600; and 2 · 64 · 4 = 512 of the input each time
    weights = {r.module.rsplit(".", 1)[-1]: r.bytes_read for r in cost.decode.records
               if r.op == "aten.mm" and r.module.startswith(("model.layers.0.", "lm_head"))}
    assert weights == {"q_proj": 16_896, "k_proj": 8_704, "v_proj": 8_704, "o_proj": 16_896,
                       "gate_proj": 33_280, "up_proj": 33_280, "down_proj": 32_768 + 1_024,
                       "lm_head": 25_600 + 512}
    # (down_proj reads the MLP's 2 · 128 · 4 = 1,024-byte activation)
    # its embedding reads the two rows it looks up (2 · 64 · 4 = 512) and the ids (2 · 8 = 16)
    (embedding,) = [r for r in cost.decode.records if r.op == "aten.embedding"]
    assert embedding.bytes_read == 528
    # parameters: embedding 6,400 + lm_head 6,400 + per layer (4,096·2 + 2,048·2 + 3·8,192 + 2 norms of 64)
    #   = 36,992 · 2 + final norm 64 = 86,848 floats -> 347,392 bytes
    assert cost.param_bytes == 347_392


def test_the_model_stays_where_it_was_and_context_defaults_to_the_prompt(llama):
    before = {k: v.clone() for k, v in llama.state_dict().items()}
    cost = count_serving(llama, prompt_tokens=4)
    assert cost.context == 4 and cost.batch_size == 1
    # cache at 4 tokens, batch 1: 2 · 2 · 1 · 2 · 4 · 16 · 4 = 2,048
    assert cost.kv_cache_bytes == 2_048
    assert all(t.device.type == "cpu" and torch.equal(before[k], t) for k, t in llama.state_dict().items())


def test_a_model_that_is_not_a_causal_lm_is_refused_by_name():
    with pytest.raises(TypeError, match="Sequential"):
        count_serving(nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(ValueError, match=r"count_serving\(context=...\) must be >= 1 \(tokens\)"):
        count_serving(nn.Sequential(nn.Linear(2, 2)), context=0)
