"""onnxruntime's contrib ops of LLM and transformer graphs (com.microsoft), each on a graph built by hand with its
count derived in a comment; where ONNX Runtime's CPU provider has the kernel the graph is also run (it is a
valid graph), and checked against a numpy / torch reference where that is cheap."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from deeplite_like.backends.onnx import count_ops  # noqa: E402
from deeplite_like.backends.onnx.formulas import UntrackedOnnxOpWarning  # noqa: E402
from deeplite_like.backends.onnx.transformer import ROTARY_PER_PAIR  # noqa: E402
from deeplite_like.backends.onnx.graph import initializer_stats  # noqa: E402

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
MS = "com.microsoft"


def model(nodes, inputs, outputs, initializers=(), opset=21):
    """A ModelProto importing com.microsoft: inputs/outputs are (name, elem_type, shape) triples."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])


def run(proto, feeds):
    """The outputs of one ONNX Runtime CPU run (skipped where onnxruntime is not installed)."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def rng_array(*shape):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def rotate(x, cos, sin):
    """Non-interleaved rotary embedding of x (..., S, H) by cos / sin (S, H / 2): HF's rotate-half spelling."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def caches(positions, half):
    angles = np.arange(positions)[:, None] / (10_000 ** (np.arange(half)[None, :] / half))
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def test_rotary_embedding_prices_what_torch_prices_of_hf_rotate_half():
    torch = pytest.importorskip("torch")
    from deeplite_like.backends.torch import count_ops as torch_count_ops

    class Rope(torch.nn.Module):  # transformers' apply_rotary_pos_emb, spelled as it is there
        def forward(self, q, k, cos, sin):
            def rotate_half(x):
                x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
                return torch.cat((-x2, x1), dim=-1)
            return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    # torch: q and k (2, 2, 3, 8), 96 elements each: mul 2 x 96 x 2 + neg 48 x 2 + add 96 x 2 = 672 = 3.5 x 192
    live = torch_count_ops(Rope(), torch.randn(2, 2, 3, 8), torch.randn(2, 2, 3, 8), torch.randn(3, 8),
                           torch.randn(3, 8))
    assert live.flops == 672 == ROTARY_PER_PAIR * 192 // 2
    # the same two rotations as com.microsoft.RotaryEmbedding on (B, N, S, H) = (2, 2, 3, 8): 96 pairs x 7 = 672
    cos, sin = caches(8, 4)
    nodes = [helper.make_node("RotaryEmbedding", [x, "pos", "cos", "sin"], [y], domain=MS) for x, y in
             (("q", "qr"), ("k", "kr"))]
    inits = [numpy_helper.from_array(cos, "cos"), numpy_helper.from_array(sin, "sin")]
    proto = model(nodes, [("q", F, [2, 2, 3, 8]), ("k", F, [2, 2, 3, 8]), ("pos", I64, [2, 3])],
                  [("qr", F, None), ("kr", F, None)], inits)
    q, k, pos = rng_array(2, 2, 3, 8), rng_array(2, 2, 3, 8), np.tile(np.arange(3), (2, 1))
    counted = count_ops(proto, {"q": q, "k": k, "pos": pos})
    assert (counted.macs, counted.flops, counted.untracked) == (0, 672, {})
    qr, _ = run(proto, {"q": q, "k": k, "pos": pos})
    np.testing.assert_allclose(qr, rotate(q, cos[:3], sin[:3]), rtol=1e-5, atol=1e-5)


def test_rotary_embedding_layouts_partial_rotation_and_the_standard_op():
    cos, sin = caches(8, 4)
    inits = [numpy_helper.from_array(cos, "cos"), numpy_helper.from_array(sin, "sin")]
    x, pos = rng_array(2, 3, 16), np.tile(np.arange(3), (2, 1))
    # (B, S, hidden) = (2, 3, 16), 2 heads of 8, fully rotated: 96 elements, 48 pairs x 7 = 336
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, num_heads=2)
    proto = model([node], [("x", F, [2, 3, 16]), ("pos", I64, [2, 3])], [("y", F, None)], inits)
    assert count_ops(proto, {"x": x, "pos": pos}).flops == 336
    (y_full,) = run(proto, {"x": x, "pos": pos})
    split = x.reshape(2, 3, 2, 8).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(y_full, rotate(split, cos[:3], sin[:3]).transpose(0, 2, 1, 3).reshape(2, 3, 16),
                               atol=1e-5)
    # partial: rotary_embedding_dim 4 of each head of 8 (caches (8, 2)): 2 x 3 x 2 heads x 4 = 48 rotated, 24
    # pairs x 7 = 168; the other half of each head passes through (free)
    half_inits = [numpy_helper.from_array(cos[:, :2].copy(), "cos"), numpy_helper.from_array(sin[:, :2].copy(), "sin")]
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, num_heads=2,
                            rotary_embedding_dim=4)
    proto = model([node], [("x", F, [2, 3, 16]), ("pos", I64, [2, 3])], [("y", F, None)], half_inits)
    assert count_ops(proto, {"x": x, "pos": pos}).flops == 168
    (y,) = run(proto, {"x": x, "pos": pos})
    np.testing.assert_allclose(y.reshape(2, 3, 2, 8)[..., 4:], x.reshape(2, 3, 2, 8)[..., 4:])  # passed through
    # the default domain's RotaryEmbedding (opset 23: X, cos_cache, sin_cache, position_ids): the same 336
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], num_heads=2)
    proto = model([node], [("x", F, [2, 3, 16]), ("pos", I64, [2, 3])], [("y", F, None)], inits, opset=23)
    counted = count_ops(proto, {"x": x, "pos": pos})
    assert (counted.flops, list(counted.by_operator)) == (336, ["RotaryEmbedding"])
    np.testing.assert_allclose(run(proto, {"x": x, "pos": pos})[0], y_full, atol=1e-5)  # the contrib op's result


def gqa(past: int, seq: int, rotary: bool):
    """GroupQueryAttention, 4 query heads and 2 key / value heads of 16 (ONNX Runtime's CPU kernel takes head sizes
    that are multiples of 16), batch 2, ``seq`` new tokens after ``past``."""
    inputs = ["q", "k", "v", "pk" if past else "", "pv" if past else "", "seqlens", "total"]
    inits = []
    if rotary:
        cos, sin = caches(16, 8)
        inputs += ["cos", "sin"]
        inits = [numpy_helper.from_array(cos, "cos"), numpy_helper.from_array(sin, "sin")]
    node = helper.make_node("GroupQueryAttention", inputs, ["y", "present_k", "present_v"], domain=MS, num_heads=4,
                            kv_num_heads=2, do_rotary=int(rotary))
    graph_inputs = [("q", F, [2, seq, 64]), ("k", F, [2, seq, 32]), ("v", F, [2, seq, 32]),
                    ("seqlens", I32, [2]), ("total", I32, [])]
    if past:
        graph_inputs[3:3] = [("pk", F, [2, 2, past, 16]), ("pv", F, [2, 2, past, 16])]
    feeds = {"q": rng_array(2, seq, 64), "k": rng_array(2, seq, 32) + 1, "v": rng_array(2, seq, 32) + 2,
             "seqlens": np.full(2, past + seq - 1, np.int32), "total": np.array(past + seq, np.int32)}
    if past:
        feeds.update(pk=rng_array(2, 2, past, 16) + 3, pv=rng_array(2, 2, past, 16) + 4)
    proto = model([node], graph_inputs, [("y", F, None), ("present_k", F, None), ("present_v", F, None)], inits)
    return proto, feeds


def attention_reference(q, k, v, causal):
    """Softmax(q k^T / sqrt(H)) v over (B, N, S, H) with the key / value heads repeated to the query heads."""
    repeat = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, repeat, axis=1), np.repeat(v, repeat, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if causal:
        s, length = scores.shape[-2:]
        scores = np.where(np.arange(length)[None, :] <= np.arange(s)[:, None] + length - s, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


def heads(x, n):
    return x.reshape(x.shape[0], x.shape[1], n, -1).transpose(0, 2, 1, 3)


def test_group_query_attention_prefill_and_decode():
    # Prefill: 4 tokens, no past: keys L = 4, widths N x H = 64. MACs Q K^T + P V = 2 x 4 x 4 x (64 + 64) = 4,096;
    # FLOPs 8,192 + q and k scaled 2 x (4 + 4) x 64 = 1,024 + (causal mask 1 + softmax 5) x 2 x 4 heads x 4 x 4 =
    # 768: 9,984.
    proto, feeds = gqa(0, 4, rotary=False)
    counted = count_ops(proto, feeds)
    assert (counted.macs, counted.flops, counted.untracked) == (4_096, 9_984, {})
    assert count_ops(proto).flops == 9_984  # from shapes alone (the present length then past + new)
    y = run(proto, feeds)[0]
    expected = attention_reference(heads(feeds["q"], 4), heads(feeds["k"], 2), heads(feeds["v"], 2), causal=True)
    np.testing.assert_allclose(y, expected.transpose(0, 2, 1, 3).reshape(2, 4, 64), rtol=1e-4, atol=1e-5)
    # + rotary: q 2 x 4 x 64 = 512 and the new k 2 x 4 x 32 = 256 elements rotated, 384 pairs x 7 = 2,688: 12,672
    proto, feeds = gqa(0, 4, rotary=True)
    assert count_ops(proto, feeds).flops == 12_672
    run(proto, feeds)
    # Decode: 1 token after a past of 4: L = 5 (present_key (2, 2, 5, 16)). MACs 2 x 1 x 5 x 128 = 1,280; FLOPs
    # 2,560 + scaled 2 x (1 + 5) x 64 = 768 + softmax 5 x 2 x 4 x 1 x 5 = 200 (one query row: the causal mask
    # masks nothing, no add, as HF's SDPA decode passes no mask): 3,528.
    proto, feeds = gqa(4, 1, rotary=False)
    counted = count_ops(proto, feeds)
    assert (counted.macs, counted.flops) == (1_280, 3_528)
    y, present_k, _ = run(proto, feeds)
    assert present_k.shape == (2, 2, 5, 16)
    keys = np.concatenate([feeds["pk"], heads(feeds["k"], 2)], axis=2)
    values = np.concatenate([feeds["pv"], heads(feeds["v"], 2)], axis=2)
    expected = attention_reference(heads(feeds["q"], 4), keys, values, causal=True)
    np.testing.assert_allclose(y, expected.transpose(0, 2, 1, 3).reshape(2, 1, 64), rtol=1e-4, atol=1e-5)
    # + rotary: q 128 + k 64 elements, 96 pairs x 7 = 672: 4,200
    proto, feeds = gqa(4, 1, rotary=True)
    assert count_ops(proto, feeds).flops == 4_200
    run(proto, feeds)


def test_group_query_attention_packed_softcap_and_qk_norm():
    # Packed Q/K/V in query (2, 4, 64 + 2 x 32 = 128): H = 128 / (4 + 2 x 2) = 16, the prefill above: 9,984.
    node = helper.make_node("GroupQueryAttention", ["qkv", "", "", "", "", "seqlens", "total"], ["y", "pk", "pv"],
                            domain=MS, num_heads=4, kv_num_heads=2)
    proto = model([node], [("qkv", F, [2, 4, 128]), ("seqlens", I32, [2]), ("total", I32, [])],
                  [("y", F, None), ("pk", F, None), ("pv", F, None)])
    feeds = {"qkv": rng_array(2, 4, 128), "seqlens": np.full(2, 3, np.int32), "total": np.array(4, np.int32)}
    assert count_ops(proto, feeds).flops == 9_984
    assert run(proto, feeds)[0].shape == (2, 4, 64)
    # softcap 30: + 3 per score (divide, tanh, multiply), 3 x 2 x 4 heads x 4 x 4 = 384: 10,368. + Qwen3's per-head
    # RMS norms of q (512 elements, 32 rows of 16: 3 x 512 + 3 x 32 + 512 = 2,144) and the new k (256, 16 rows:
    # 768 + 48 + 256 = 1,072): 13,584.
    proto, feeds = gqa(0, 4, rotary=False)
    proto.graph.node[0].attribute.append(helper.make_attribute("softcap", 30.0))
    assert count_ops(proto, feeds).flops == 10_368
    run(proto, feeds)
    names = list(proto.graph.node[0].input) + ["", "", "", "", "", "", "", "qn", "kn"]
    proto.graph.node[0].ClearField("input")
    proto.graph.node[0].input.extend(names)
    proto.graph.initializer.extend([numpy_helper.from_array(np.ones(16, np.float32), n) for n in ("qn", "kn")])
    assert count_ops(proto, feeds).flops == 13_584  # (ONNX Runtime runs the q / k norms on CUDA and WebGPU only)


def test_decoder_masked_multi_head_attention_self_and_cross():
    # Self attention, one new token after a past of 3, 2 heads of 8: keys 4. MACs 2 x 1 x 4 x (16 + 16) = 256;
    # FLOPs 512 + scaled 2 x (1 + 4) x 16 = 160 + softmax 5 x 2 x 2 x 1 x 4 = 80: 752. + bias (48): new q
    # 2 x 16 + new k and v 2 x 32 = 96: 848.
    inputs = [("q", F, [2, 1, 16]), ("k", F, [2, 1, 16]), ("v", F, [2, 1, 16]), ("pk", F, [2, 2, 3, 8]),
              ("pv", F, [2, 2, 3, 8])]
    for bias, expected in (([], 752), (["", "", "", "b"], 848)):
        node = helper.make_node("DecoderMaskedMultiHeadAttention", ["q", "k", "v", "", "", "pk", "pv"] + bias,
                                ["y", "present_k", "present_v"], domain=MS, num_heads=2)
        proto = model([node], inputs, [("y", F, [2, 1, 16]), ("present_k", F, None), ("present_v", F, None)],
                      [numpy_helper.from_array(np.zeros(48, np.float32), "b")] if bias else [])
        counted = count_ops(proto)
        assert (counted.macs, counted.flops, counted.untracked) == (256, expected, {})
    # ONNX Runtime's CPU kernel runs the shared buffer (past_key = present_key, sized to a maximum of 8): with
    # past_sequence_length a constant 3, keys 3 + 1 = 4 again: 752; given at run time, the whole buffer, 8 keys
    # (a static cache, as torch counts it): MACs 2 x 8 x 32 = 512, FLOPs 1,024 + 2 x 9 x 16 = 288 + 5 x 2 x 2 x 8
    # = 160: 1,472.
    shared = [("q", F, [2, 1, 16]), ("k", F, [2, 1, 16]), ("v", F, [2, 1, 16]), ("pk", F, [2, 2, 8, 8]),
              ("pv", F, [2, 2, 8, 8])]
    node = helper.make_node("DecoderMaskedMultiHeadAttention", ["q", "k", "v", "", "", "pk", "pv", "past"],
                            ["y", "present_k", "present_v"], domain=MS, num_heads=2, past_present_share_buffer=1)
    outputs = [("y", F, [2, 1, 16]), ("present_k", F, [2, 2, 8, 8]), ("present_v", F, [2, 2, 8, 8])]
    constant = model([node], shared, outputs, [numpy_helper.from_array(np.array(3, np.int32), "past")])
    assert (count_ops(constant).macs, count_ops(constant).flops) == (256, 752)
    fed = model([node], shared + [("past", I32, [])], outputs)
    assert (count_ops(fed).macs, count_ops(fed).flops) == (512, 1_472)
    feeds = {name: rng_array(*shape) for name, _, shape in shared}
    assert run(constant, feeds)[0].shape == (2, 1, 16)
    # Cross attention: key / value (2, 2, 6, 8), the encoder's, whole: keys 6. MACs 2 x 6 x 32 = 384; FLOPs 768 +
    # 2 x (1 + 6) x 16 = 224 + 5 x 2 x 2 x 6 = 120: 1,112.
    node = helper.make_node("DecoderMaskedMultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS, num_heads=2)
    proto = model([node], [("q", F, [2, 1, 16]), ("k", F, [2, 2, 6, 8]), ("v", F, [2, 2, 6, 8])], [("y", F, [2, 1, 16])])
    assert (count_ops(proto).macs, count_ops(proto).flops) == (384, 1_112)


def test_fused_elementwise_ops_of_diffusion_and_training_graphs():
    # No CPU kernel: the output shapes are declared, as the fusion tools write them. X (2, 4, 8): 64 elements.
    # BiasAdd X + bias + skip: 2 x 64 = 128. BiasDropout data + bias + residual 128, without residual 64 (the
    # dropout free, as Dropout). BiasSplitGelu X (2, 4, 16): bias 128 + (GELU 5 + mul 1) x 64 halves = 512.
    cases = [("BiasAdd", ["x", "b8", "x"], [2, 4, 8], [2, 4, 8], 128),
             ("BiasDropout", ["x", "b8", "x"], [2, 4, 8], [2, 4, 8], 128),
             ("BiasDropout", ["x", "b8"], [2, 4, 8], [2, 4, 8], 64),
             ("BiasSplitGelu", ["x", "b16"], [2, 4, 16], [2, 4, 8], 512)]
    inits = [numpy_helper.from_array(np.ones(8, np.float32), "b8"), numpy_helper.from_array(np.ones(16, np.float32), "b16")]
    for op, names, shape, out, expected in cases:
        proto = model([helper.make_node(op, names, ["y"], domain=MS)], [("x", F, shape)], [("y", F, out)], inits)
        counted = count_ops(proto)
        assert (counted.macs, counted.flops, counted.untracked) == (0, expected, {}), op


def test_gemm_fast_gelu_counts_the_linear_layer_and_tanh_gelu_it_fuses():
    torch = pytest.importorskip("torch")
    from deeplite_like.backends.torch import count_ops as torch_count_ops

    # X (2, 4, 8) @ W (8, 6) + bias, then tanh GELU: 48 outputs. MACs 48 x 8 = 384; FLOPs 768 + bias 48 + 9 x 48
    # = 1,248: what torch counts of Linear(8, 6) and gelu(approximate='tanh').
    node = helper.make_node("GemmFastGelu", ["x", "w", "b"], ["y"], domain=MS)
    proto = model([node], [("x", F, [2, 4, 8])], [("y", F, [2, 4, 6])],
                  [numpy_helper.from_array(np.ones((8, 6), np.float32), "w"), numpy_helper.from_array(np.ones(6, np.float32), "b")])
    counted = count_ops(proto)
    live = torch_count_ops(torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.GELU(approximate="tanh")), torch.randn(2, 4, 8))
    assert (counted.macs, counted.flops) == (live.macs, live.flops) == (384, 1_248)


def test_four_bit_weights_and_block_quantized_lookups():
    # MatMulBnb4 (NF4), A (2, 3, 32), K 32, N 8, blocks of 16: B packs 8 x 32 = 256 weights in 128 bytes, absmax
    # 256 / 16 = 16 floats. MACs 6 rows x 8 x 32 = 1,536; FLOPs 3,072. Params 256 + 16 = 272; bytes 128 + 64 = 192.
    rng = np.random.default_rng(0)
    node = helper.make_node("MatMulBnb4", ["a", "bq", "absmax"], ["y"], domain=MS, K=32, N=8, block_size=16, quant_type=1)
    inits = [numpy_helper.from_array(rng.integers(0, 256, 128, dtype=np.uint8), "bq"),
             numpy_helper.from_array(np.ones(16, np.float32), "absmax")]
    proto = model([node], [("a", F, [2, 3, 32])], [("y", F, None)], inits)
    counted = count_ops(proto)
    assert (counted.macs, counted.flops, counted.untracked) == (1_536, 3_072, {})
    stats = initializer_stats(proto)
    assert (stats.params, stats.bytes) == (272, 192)
    assert run(proto, {"a": rng_array(2, 3, 32)})[0].shape == (2, 3, 8)
    # GatherBlockQuantized: a uint8 table of 10 rows x 16 bytes = 10 x 32 int4 weights, scales per block of 16
    # (10, 2); a look-up (free). Params 320 + 20 = 340; bytes 160 + 80 = 240.
    node = helper.make_node("GatherBlockQuantized", ["table", "ids", "scales"], ["y"], domain=MS, bits=4,
                            block_size=16, gather_axis=0, quantize_axis=1)
    inits = [numpy_helper.from_array(rng.integers(0, 256, (10, 16), dtype=np.uint8), "table"),
             numpy_helper.from_array(np.ones((10, 2), np.float32), "scales")]
    proto = model([node], [("ids", I64, [2, 3])], [("y", F, None)], inits)
    counted = count_ops(proto)
    assert (counted.macs, counted.flops, counted.untracked) == (0, 0, {})
    assert "com.microsoft.GatherBlockQuantized" in counted.by_operator
    stats = initializer_stats(proto)
    assert (stats.params, stats.bytes) == (340, 240)
    assert run(proto, {"ids": np.array([[0, 1, 2], [9, 8, 7]], np.int64)})[0].shape == (2, 3, 32)


def test_packed_attention_prices_each_sequence_or_stays_untracked():
    # A batch of 3 sequences of 1, 2 and 4 tokens packed into T = 7 (cumulative lengths [0, 1, 3, 7], a constant);
    # 2 heads, widths 16: Σ len² = 1 + 4 + 16 = 21 pairs per head. PackedMultiHeadAttention: MACs 21 x (16 + 16) =
    # 672; FLOPs 1,344 + q and k scaled Σ 2 x len x 16 = 224 + softmax 5 x 2 heads x 21 = 210: 1,778; + bias (48)
    # 7 x 48 = 336: 2,114. PackedAttention on input (7, 8), weights (8, 48): + the projection 7 x 8 x 48 = 2,688
    # MACs and its bias 336: MACs 3,360, FLOPs 6,720 + 336 + 224 + 210 = 7,490.
    cumulative = numpy_helper.from_array(np.array([0, 1, 3, 7], np.int32), "cum")
    ones = lambda name, *shape: numpy_helper.from_array(np.ones(shape, np.float32), name)  # noqa: E731
    offsets = ("offsets", I32, [3, 4])
    mha = helper.make_node("PackedMultiHeadAttention", ["q", "k", "v", "b", "offsets", "cum"], ["y"], domain=MS,
                           num_heads=2)
    proto = model([mha], [("q", F, [7, 16]), ("k", F, [7, 16]), ("v", F, [7, 16]), offsets], [("y", F, [7, 16])],
                  [cumulative, ones("b", 48)])
    counted = count_ops(proto)
    assert (counted.macs, counted.flops, counted.untracked) == (672, 2_114, {})
    attention = helper.make_node("PackedAttention", ["x", "w", "b", "offsets", "cum"], ["y"], domain=MS, num_heads=2)
    proto = model([attention], [("x", F, [7, 8]), offsets], [("y", F, [7, 16])], [cumulative, ones("w", 8, 48), ones("b", 48)])
    assert (count_ops(proto).macs, count_ops(proto).flops) == (3_360, 7_490)
    # the lengths as a graph input (what a server feeds): the count cannot be known from the file; untracked, named
    proto = model([attention], [("x", F, [7, 8]), offsets, ("cum", I32, [4])], [("y", F, [7, 16])],
                  [ones("w", 8, 48), ones("b", 48)])
    with pytest.warns(UntrackedOnnxOpWarning, match=r"PackedAttention \(sequence lengths not static\) \(1 node\)"):
        counted = count_ops(proto)
    assert (counted.macs, counted.untracked) == (0, {"com.microsoft.PackedAttention (sequence lengths not static)": 1})


def test_every_new_contrib_op_has_a_formula_or_is_free():
    from deeplite_like.backends.onnx.formulas import FORMULAS, FREE

    ops = ["GroupQueryAttention", "RotaryEmbedding", "BiasAdd", "BiasSplitGelu", "GemmFastGelu", "BiasDropout",
           "DecoderMaskedMultiHeadAttention", "PackedAttention", "PackedMultiHeadAttention", "MatMulBnb4"]
    assert [op for op in ops if f"{MS}.{op}" not in FORMULAS] == []
    assert f"{MS}.GatherBlockQuantized" in FREE
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing in these graphs is untracked
        count_ops(model([helper.make_node("BiasAdd", ["x", "b", "x"], ["y"], domain=MS)], [("x", F, [1, 2, 2])],
                        [("y", F, [1, 2, 2])], [numpy_helper.from_array(np.ones(2, np.float32), "b")]))
