"""A layer's own arithmetic (``keras.ops`` in ``call``) is counted op by op, next to its sublayers.

Keras on TensorFlow: every eager op a layer without a formula runs itself (outside the layers it
calls) is priced by ``counting/tf_ops.py``. Expected values are derived by hand in comments.
"""
import numpy as np
import pytest

keras = pytest.importorskip("keras")

from tests.keras._count_helpers import count  # noqa: E402

L, ops = keras.layers, keras.ops


class _Attention(keras.layers.Layer):
    """Single-head attention: Dense sublayers for Q, K, V and ops.matmul for QK^T and PV."""

    def __init__(self, d, **kwargs):
        super().__init__(**kwargs)
        self.d = d
        self.q, self.k, self.v = L.Dense(d, name="q"), L.Dense(d, name="k"), L.Dense(d, name="v")

    def call(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = ops.matmul(q, ops.transpose(k, (0, 2, 1))) / float(np.sqrt(self.d))
        return ops.matmul(ops.softmax(scores, axis=-1), v)


def test_a_custom_attention_layer_counts_its_own_matmuls():
    # x (2, 8, 16), d 16. Dense 16 -> 16: 2*8*16*16 = 4096 MACs, 8192 + 256 (bias) = 8448 FLOPs, x3.
    # Q K^T: (2, 8, 16) @ (2, 16, 8): 2*8*8*16 = 2048 MACs; P V: (2, 8, 8) @ (2, 8, 16): 2*8*16*8 = 2048.
    # Scale (tf.RealDiv) 2*8*8 = 128 FLOPs; softmax 5 per element: 640; transpose free.
    # MACs 3*4096 + 4096 = 16384; FLOPs 3*8448 + 2*4096 (2 per MAC) + 128 + 640 = 34304
    model = keras.Sequential([keras.Input((8, 16)), _Attention(16, name="attn")])
    result = count(model, (2, 8, 16))
    assert (result.macs, result.flops, result.untracked) == (16384, 34304, {})
    attn = result.by_module["attn"]
    assert (attn.macs, attn.flops) == (16384, 34304)
    own = result.module_ops["attn"]
    assert (own["tf.BatchMatMulV2"].macs, own["tf.BatchMatMulV2"].calls) == (4096, 2)
    assert own["tf.Softmax"].flops == 640 and own["tf.RealDiv"].flops == 128
    assert result.by_module["attn.q"].macs == 4096


@pytest.mark.parametrize("batch, tokens, d", [(1, 4, 8), (3, 5, 6)])
def test_attention_products_scale_with_tokens_and_width(batch, tokens, d):
    # 3 projections B*T*d*d + QK^T B*T*T*d + PV B*T*T*d
    model = keras.Sequential([keras.Input((tokens, d)), _Attention(d)])
    result = count(model, (batch, tokens, d))
    assert result.macs == 3 * batch * tokens * d * d + 2 * batch * tokens * tokens * d


class _Gated(keras.Model):
    """A subclassed model doing ops.matmul next to its sublayers, in its own call."""

    def __init__(self):
        super().__init__(name="gated")
        self.fc = L.Dense(6, name="fc")
        self.w = self.add_weight(shape=(6, 3), initializer="ones", name="w")

    def call(self, x):
        h = self.fc(x)
        return ops.matmul(h, self.w) * ops.sigmoid(ops.sum(h, axis=-1, keepdims=True))


def test_a_subclassed_model_counts_the_matmul_in_its_call():
    # x (4, 5). fc 5 -> 6: 4*5*6 = 120 MACs, 240 + 24 = 264 FLOPs.
    # h @ w: (4, 6) @ (6, 3): 4*3*6 = 72 MACs, 144 FLOPs; sum over 6: 24 input elements -> 24;
    # sigmoid on (4, 1): 4 per element -> 16; the product (4, 3): 12.
    # MACs 192; FLOPs 264 + 144 + 24 + 16 + 12 = 460
    model = _Gated()
    model(ops.zeros((4, 5)))
    result = count(model, (4, 5))
    assert (result.macs, result.flops, result.untracked) == (192, 460, {})
    assert result.module_ops[""]["tf.MatMul"].macs == 72
    assert (result.by_module["fc"].macs, result.by_module[""].macs) == (120, 192)


def test_a_lambda_with_a_contraction():
    # Lambda x @ x^T on (2, 3, 4): 2*3*3*4 = 72 MACs, 144 FLOPs
    model = keras.Sequential([keras.Input((3, 4)), L.Lambda(lambda t: ops.matmul(t, ops.transpose(t, (0, 2, 1))))])
    result = count(model, (2, 3, 4))
    assert (result.macs, result.flops, result.untracked) == (72, 144, {})


def test_einsum_in_a_layer_call():
    # "bqd,bkd->bqk" on (2, 5, 4), (2, 7, 4): joint space 2*5*7*4 = 280 MACs
    class Scores(keras.layers.Layer):
        def call(self, q, k):
            return ops.einsum("bqd,bkd->bqk", q, k)

    q, k = keras.Input((5, 4)), keras.Input((7, 4))
    model = keras.Model([q, k], Scores()(q, k))
    result = count(model, [np.ones((2, 5, 4), "float32"), np.ones((2, 7, 4), "float32")])
    assert (result.macs, result.flops, result.untracked) == (280, 560, {})


# -- a Llama-style backbone, built here (keras_hub is not installed) -------------------------
class _RMSNorm(keras.layers.Layer):
    def build(self, shape):
        self.scale = self.add_weight(shape=(shape[-1],), initializer="ones", name="scale")

    def call(self, x):
        return x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + 1e-6) * self.scale


class _LlamaAttention(keras.layers.Layer):
    """Grouped-query attention with rotary embeddings, as keras_hub's LlamaAttention."""

    def __init__(self, hidden, heads, kv_heads, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q = L.Dense(hidden, use_bias=False, name="q")
        self.k = L.Dense(kv_heads * self.head_dim, use_bias=False, name="k")
        self.v = L.Dense(kv_heads * self.head_dim, use_bias=False, name="v")
        self.o = L.Dense(hidden, use_bias=False, name="o")

    def _rotary(self, x, tokens):
        half = self.head_dim // 2
        freq = 1.0 / (10000.0 ** (ops.arange(half, dtype="float32") / half))
        angles = ops.einsum("t,f->tf", ops.arange(tokens, dtype="float32"), freq)
        cos, sin = ops.cos(angles)[None, :, None, :], ops.sin(angles)[None, :, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return ops.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def call(self, x):
        b, t = ops.shape(x)[0], ops.shape(x)[1]
        q = ops.reshape(self.q(x), (b, t, self.heads, self.head_dim))
        k = ops.reshape(self.k(x), (b, t, self.kv_heads, self.head_dim))
        v = ops.reshape(self.v(x), (b, t, self.kv_heads, self.head_dim))
        q, k = self._rotary(q, t), self._rotary(k, t)
        k = ops.repeat(k, self.heads // self.kv_heads, axis=2)
        v = ops.repeat(v, self.heads // self.kv_heads, axis=2)
        scores = ops.einsum("bqhd,bkhd->bhqk", q, k) / float(np.sqrt(self.head_dim))
        mask = ops.tril(ops.ones((t, t), dtype="bool"))
        probs = ops.softmax(ops.where(mask, scores, -1e9), axis=-1)
        out = ops.einsum("bhqk,bkhd->bqhd", probs, v)
        return self.o(ops.reshape(out, (b, t, self.heads * self.head_dim)))


class _LlamaBlock(keras.layers.Layer):
    def __init__(self, hidden, heads, kv_heads, intermediate, **kwargs):
        super().__init__(**kwargs)
        self.norm1, self.norm2 = _RMSNorm(name="norm1"), _RMSNorm(name="norm2")
        self.attn = _LlamaAttention(hidden, heads, kv_heads, name="attn")
        self.gate = L.Dense(intermediate, use_bias=False, name="gate")
        self.up = L.Dense(intermediate, use_bias=False, name="up")
        self.down = L.Dense(hidden, use_bias=False, name="down")

    def call(self, x):
        x = x + self.attn(self.norm1(x))
        h = self.norm2(x)
        return x + self.down(ops.silu(self.gate(h)) * self.up(h))


def _llama(vocab=100, hidden=128, heads=4, kv_heads=2, intermediate=256, layers=2):
    ids = keras.Input((None,), dtype="int32")
    x = L.Embedding(vocab, hidden)(ids)
    for i in range(layers):
        x = _LlamaBlock(hidden, heads, kv_heads, intermediate, name=f"block{i}")(x)
    return keras.Model(ids, _RMSNorm(name="final_norm")(x))


def test_a_llama_style_backbone_counts_qk_and_pv():
    # keras_hub's Llama backbone structure, 2 layers, 64 tokens, hidden 128, 4 heads of 32,
    # 2 KV heads (64 wide), MLP 256. Per token and layer: q, o 128*128 each = 32768; k, v
    # 128*64 each = 16384; gate, up, down 3*128*256 = 98304 -> 147456 per token, * 64 tokens
    # * 2 layers = 18,874,368 (all Dense). Attention: QK^T and PV, each heads*T*T*head_dim =
    # 4*64*64*32 = 524288 per layer -> 2 * 2 * 524288 = 2,097,152 (the products the layer-only
    # count lost). Total 20,971,520 (keras_hub's Llama at this config); the rotary einsum
    # t,f->tf sums nothing: 64*16 multiplies, FLOPs only (TensorFlow runs it as a MatMul
    # with k = 1, priced as the multiplies it is).
    model = _llama()
    ids = np.arange(64, dtype="int32")[None, :] % 100
    result = count(model, ids)
    assert result.macs == 20_971_520 and result.untracked == {}
    attn = result.module_ops["block0.attn"]  # Keras' TF einsum runs as transposes + BatchMatMulV2
    assert (attn["tf.BatchMatMulV2"].macs, attn["tf.BatchMatMulV2"].calls) == (2 * 524288, 2)
    assert result.by_module["block1.attn"].macs == 64 * (2 * 16384 + 2 * 8192) + 2 * 524288
    assert result.by_operator["Dense"].macs == 18_874_368
