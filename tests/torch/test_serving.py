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
    #   2 · (2 · 4 heads · 8 · 8 · 16) = 16,384 -> 606,208 a layer, 1,212,416 for 2; lm_head on the last
    #   token of each sequence only, as generate (logits_to_keep=1): 2 · 6,400 = 12,800 -> 1,225,216
    assert cost.prefill.macs == 1_225_216
    # every prompt token's logits (all_logits=True): lm_head 16 · 6,400 = 102,400 -> 1,314,816
    assert count_serving(llama, prompt_tokens=8, context=16, batch_size=2, all_logits=True).prefill.macs == 1_314_816
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


def test_one_llama2_7b_layer_agrees_with_llm_viewer_on_every_contraction():
    """One decoder layer of Llama-2-7B (hidden 4096, 32 heads of 128, MLP 11008, vocabulary 32000),
    float16 (2 bytes), eager attention, batch 1: the prefill of 1,024 tokens and a decode step that
    attends to 1,024 (1,023 cached + itself), LLM-Viewer's defaults. Each linear layer (in, out) moves
    its weight, its input and its output once: prefill 1,024 · in · out MACs and 2 · (in · out + 1,024 ·
    in + 1,024 · out) bytes; decode in · out MACs and 2 · (in · out + in + out) bytes. These are
    LLM-Viewer's numbers too (its OPs are 2 · MACs; benchmarks/bench_llm_viewer.py, docs/benchmarks.rst).
    """
    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=1,
                                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                                      max_position_embeddings=4096, attn_implementation="eager")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config).to(torch.float16).eval()
    cost = count_serving(model, prompt_tokens=1024, context=1023)

    def contractions(count):
        return {(r.module.rsplit(".", 1)[-1], r.op): (r.macs, r.flops, r.bytes) for r in count.records if r.macs}

    # q, k, v, o: 4096 · 4096 = 16,777,216 MACs a token; gate, up: 4096 · 11008 = 45,088,768; down the same.
    # prefill q: 1,024 · 16,777,216 = 17,179,869,184 MACs; bytes 2 · (16,777,216 + 4,194,304 + 4,194,304)
    #   = 50,331,648; gate: 1,024 · 45,088,768 = 46,170,898,432 MACs, bytes 2 · (45,088,768 + 4,194,304
    #   + 11,272,192) = 121,110,528 (down: in 11,272,192 and out 4,194,304: the same sum)
    square = (17_179_869_184, 34_359_738_368, 50_331_648)
    wide = (46_170_898_432, 92_341_796_864, 121_110_528)
    # attention, 32 heads: Q·Kᵀ 32 · 1,024 · 1,024 · 128 = 4,294,967,296 MACs, reading q and k (2 · 4,194,304
    #   bytes each) and writing the fp16 scores 32 · 1,024 · 1,024 · 2 = 67,108,864 -> 83,886,080 bytes;
    #   P·V the same MACs, reading the scores and v, writing the output: the same bytes
    attention = (4_294_967_296, 8_589_934_592, 83_886_080)
    # lm_head on the last token (logits_to_keep=1, as generate): 4096 · 32000 = 131,072,000 MACs,
    #   bytes 2 · (131,072,000 + 4096 + 32000) = 262,216,192
    head = (131_072_000, 262_144_000, 262_216_192)
    prefill = contractions(cost.prefill)
    assert {name: prefill[name, "aten.mm"] for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                         "up_proj", "down_proj", "lm_head")} == {
        "q_proj": square, "k_proj": square, "v_proj": square, "o_proj": square,
        "gate_proj": wide, "up_proj": wide, "down_proj": wide, "lm_head": head}
    bmms = [(r.macs, r.flops, r.bytes) for r in cost.prefill.records if r.op == "aten.bmm"]
    assert bmms == [attention, attention]
    # decode: q 16,777,216 MACs, bytes 2 · (16,777,216 + 4096 + 4096) = 33,570,816; gate 45,088,768 MACs,
    #   bytes 2 · (45,088,768 + 4096 + 11008) = 90,207,744; lm_head 131,072,000 MACs, bytes
    #   2 · (131,072,000 + 4096 + 32000) = 262,216,192
    square, wide = (16_777_216, 33_554_432, 33_570_816), (45_088_768, 90_177_536, 90_207_744)
    decode = contractions(cost.decode)
    assert {name: decode[name, "aten.mm"] for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                        "up_proj", "down_proj", "lm_head")} == {
        "q_proj": square, "k_proj": square, "v_proj": square, "o_proj": square, "gate_proj": wide,
        "up_proj": wide, "down_proj": wide, "lm_head": (131_072_000, 262_144_000, 262_216_192)}
    # Q·Kᵀ at 1,024 keys: 32 · 1,024 · 128 = 4,194,304 MACs; reads q (4096 · 2 = 8,192) and the cached K
    #   (1,024 · 4096 · 2 = 8,388,608), writes the scores (32 · 1,024 · 2 = 65,536): 8,462,336 bytes;
    #   P·V: the same MACs, reads the scores and V, writes 8,192: the same bytes
    bmms = [(r.macs, r.flops, r.bytes) for r in cost.decode.records if r.op == "aten.bmm"]
    assert bmms == [(4_194_304, 8_388_608, 8_462_336)] * 2
    # the softmax: 5 FLOPs an element (LLM-Viewer's max, sub, exp, sum, div), 32 · 1,024 · 1,024 in the
    #   prefill = 167,772,160; 32 · 1,024 in the decode = 163,840
    assert [r.flops for r in cost.prefill.records if r.op == "aten._softmax"] == [167_772_160]
    assert [r.flops for r in cost.decode.records if r.op == "aten._softmax"] == [163_840]


def test_the_gpu_flash_kernel_reads_q_k_v_once_and_writes_no_scores(llama):
    flash = count_serving(llama, prompt_tokens=8, context=16, batch_size=2)  # attention="cuda", the default
    math = count_serving(llama, prompt_tokens=8, context=16, batch_size=2, attention=None)
    # decode at 17 keys, batch 2, 4 query heads and 2 key/value heads of 16, float32: CUDA's flash kernel takes
    # the 2 key/value heads as they are (no repeat): reads q 2·4·1·16·4 = 512, k and v 2·2·17·16·4 = 4,352
    # each -> 9,216; writes the output 512, the log-sum-exp 2·4·1·4 = 32 and its random-number state (a
    # 2-element uint64 seed and a uint64 offset, 24) -> 568; Q·Kᵀ and P·V: 2 · 2·4·1·17·16 = 4,352 MACs
    assert [(r.op, r.macs, r.bytes_read, r.bytes_written) for r in flash.decode.records
            if "attention" in r.op] == [("aten._scaled_dot_product_flash_attention", 4_352, 9_216, 568)] * 2
    # the math path repeats K and V to 4 heads (a clone each: reads 4,352, writes 8,704) and writes the
    # scores: same MACs, more bytes
    assert flash.decode.macs == math.decode.macs
    assert flash.decode.bytes < math.decode.bytes
    assert flash.attention == "cuda" and math.attention is None


def test_attention_kernel_needs_meta():
    from deeplite_like.backends.torch import count_ops

    with pytest.raises(ValueError, match="meta=True"):
        count_ops(nn.Linear(2, 2), torch.randn(1, 2), attention="cuda")
    with pytest.raises(ValueError, match="expected one of"):
        count_ops(nn.Linear(2, 2), torch.randn(1, 2), attention="tpu")
