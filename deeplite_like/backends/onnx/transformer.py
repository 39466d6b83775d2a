"""onnxruntime's transformer and LLM contrib ops (com.microsoft): the attention family, rotary embeddings and
the bias fusions its transformer optimiser and LLM exporters (onnxruntime-genai, Olive) write, priced as the ops
they replace in the torch table (docs/conventions.rst: the attention row, the elementwise rows).

* ``attention_cost`` is the attention row after the projections (Q Kᵀ and P V, q and k scaled, a mask add,
  softmax 5), shared by every attention op here; grouped-query attention repeats the key / value heads to
  the query heads, as the torch table prices SDPA's GQA.
* A rotary embedding costs what the torch table counts of HF's ``apply_rotary_pos_emb``
  (``ROTARY_PER_PAIR``).
* A node whose cost depends on values the file does not fix (a packed batch's sequence lengths) raises
  ``Unpriced``: the counting pass lists it as untracked with the reason, never a guessed count.

``TRANSFORMER_FORMULAS`` maps each op key to its function; ``formulas.py`` registers them into ``FORMULAS``
(this module does not import ``formulas``: imports point one way).
"""
from __future__ import annotations

from typing import Callable, Sequence

from deeplite_like.backends.onnx.graph import NodeView
from deeplite_like.results import Cost

__all__ = ["ROTARY_PER_PAIR", "TRANSFORMER_FORMULAS", "Unpriced", "attention_cost"]

TRANSFORMER_FORMULAS: dict[str, Callable[[NodeView], Cost]] = {}


def _op(*keys: str) -> Callable:
    """Collect ``function`` under the op keys; a key collected twice is a bug (refused, as ``formulas.formula``
    refuses one the table already has)."""
    def collect(function: Callable[[NodeView], Cost]) -> Callable[[NodeView], Cost]:
        for key in keys:
            if key in TRANSFORMER_FORMULAS:
                raise ValueError(f"ONNX op {key!r} already has a formula")
            TRANSFORMER_FORMULAS[key] = function
        return function
    return collect


def attention_cost(batch: int, q_len: int, k_len: int, heads: int, q_width: int, v_width: int, masked: bool) -> Cost:
    """Attention after its projections, as the torch table's SDPA math reference: Q K^T and P V,
    ``batch x q_len x k_len x (q_width + v_width)`` MACs (widths summed over the heads); FLOPs 2 x MACs
    + q and k each scaled by sqrt(scale), ``batch x (q_len + k_len) x q_width``, + a mask add and the
    softmax (5), ``(1 + 5) x batch x heads x q_len x k_len`` (the mask add only when ``masked``)."""
    scores = batch * heads * q_len * k_len
    macs = batch * q_len * k_len * (q_width + v_width)
    return Cost.contraction(macs, batch * (q_len + k_len) * q_width + (int(masked) + 5) * scores)


@_op("com.microsoft.Attention", "com.microsoft.QAttention")
def fused_attention(node: NodeView) -> Cost:
    """Attention (com.microsoft: input, weights, bias, mask_index?, past?, attention_bias?): the Q, K, V
    projection ``B x S x D_in x (Dq + Dk + Dv)`` MACs with its bias add (1 per projected element), then
    ``attention_cost`` (``qkv_hidden_sizes`` when given, else three equal thirds of the weights' width;
    keys = S + the past sequence). Masked with a mask, an attention bias, or ``unidirectional``.
    ``QAttention`` (input, int8 weights, bias, scales, mask_index at 5, zero points, past at 8) counts the same."""
    batch, seq, width_in = node.input_shape(0)
    widths = node.attr("qkv_hidden_sizes") or [node.input_shape(1)[1] // 3] * 3
    q_width, k_width, v_width = (int(w) for w in widths)
    quantized = node.op_type == "QAttention"
    mask_at, past_at = (5, 8) if quantized else (3, 4)
    past = node.input_shape(past_at)[3] if node.has_input(past_at) else 0
    rows = batch * seq
    projection = Cost.contraction(rows * width_in * (q_width + k_width + v_width),
                                  rows * (q_width + k_width + v_width) if node.has_input(2) else 0)
    masked = node.has_input(mask_at) or (not quantized and node.has_input(5)) or bool(node.attr("unidirectional", 0))
    attention = attention_cost(batch, seq, seq + past, int(node.attr("num_heads")), q_width, v_width, masked)
    return projection + attention


@_op("com.microsoft.MultiHeadAttention")
def multi_head_attention(node: NodeView) -> Cost:
    """MultiHeadAttention (com.microsoft: query, key?, value?, bias?, key_padding_mask?, attention_bias?,
    past_key?, ...), projections done before it: ``attention_cost`` with the key length read from
    ``key`` (``B x L x D``, ``B x N x L x H``, or packed K/V ``B x L x N x 2 x H``; packed Q/K/V in a
    5-D ``query`` ``B x S x N x 3 x H``: L = S); Dv from the output. + 1 per element of Q, K and V for
    ``bias``. Masked with a padding mask or an attention bias."""
    query = node.input_shape(0)
    heads = int(node.attr("num_heads"))
    batch, seq = query[0], query[1]
    v_width = node.output_shape()[-1]
    q_width = query[2] * query[4] if len(query) == 5 else query[-1]
    if len(query) == 5 or not node.has_input(1):
        k_len = seq
    else:
        key = node.input_shape(1)
        k_len = key[2] if len(key) == 4 else key[1]
    past = node.input_shape(6)[2] if node.has_input(6) else 0
    k_len += past
    bias = (batch * seq * q_width + batch * (k_len - past) * (q_width + v_width)) if node.has_input(3) else 0
    attention = attention_cost(batch, seq, k_len, heads, q_width, v_width, node.has_input(4) or node.has_input(5))
    return attention + Cost.elementwise(bias)


class Unpriced(Exception):
    """Raised by a formula whose node's cost depends on values the file does not fix (a packed batch's sequence
    lengths): the node is untracked under its key and this reason, never a guessed count."""


def _known_shape(node: NodeView, index: int) -> tuple[int, ...] | None:
    """Output ``index``'s shape when it is known (declared, inferred or read from a run), else ``None``."""
    names = node.node.output
    return node.info.shapes.get(names[index]) if index < len(names) and names[index] else None


def _static_int(node: NodeView, index: int) -> int | None:
    """Input ``index`` as an int when it is a constant scalar (an initializer or ``Constant``), else ``None``."""
    value = node.constant(index)
    return int(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


#: FLOPs per rotated *pair* of a rotary embedding, as the torch table prices HF's ``apply_rotary_pos_emb``
#: (``q * cos + rotate_half(q) * sin``): x * cos 1 and * sin 1 per element, rotate_half's ``neg`` of half
#: the elements 0.5, the add 1: 3.5 per rotated element (tests/onnx check it against the torch count).
ROTARY_PER_PAIR = 7


def _rotary(rotated: int) -> Cost:
    return Cost.elementwise(ROTARY_PER_PAIR * rotated // 2)


def _rms_norm(n: int, rows: int) -> Cost:
    """An RMS norm with a weight: 3N + 3R + N (``SimplifiedLayerNormalization``'s row)."""
    return Cost.elementwise(3 * n + 3 * rows + n)


def _rotary_embedding(cos_at: int) -> Callable[[NodeView], Cost]:
    def cost(node: NodeView) -> Cost:
        shape = node.input_shape(0)
        rotary_dim = 2 * node.input_shape(cos_at)[-1]  # the caches hold (rotary dim or head size) / 2 per position
        heads = int(node.attr("num_heads", 0))
        head_size = shape[-1] if len(shape) == 4 else (shape[-1] // heads if heads else rotary_dim)
        return _rotary(node.numel_in(0) // head_size * rotary_dim) if node.float_in(0) else Cost()
    cost.__doc__ = """RotaryEmbedding: 3.5 per rotated element (``ROTARY_PER_PAIR``); the rotated width per head is
    twice the cos cache's last dimension (``rotary_embedding_dim`` or the head size; the rest of a head passes
    through, free). Input (B, S, hidden), heads from ``num_heads`` (else one rotary width per head), or
    (B, N, S, H)."""
    return cost


_op("com.microsoft.RotaryEmbedding")(_rotary_embedding(2))  # input, position_ids, cos_cache, sin_cache
_op("RotaryEmbedding")(_rotary_embedding(1))  # ai.onnx opset 23: X, cos_cache, sin_cache, position_ids?


@_op("com.microsoft.GroupQueryAttention")
def group_query_attention(node: NodeView) -> Cost:
    """GroupQueryAttention (com.microsoft: query, key?, value?, past_key?, past_value?, seqlens_k,
    total_sequence_length, cos_cache?, sin_cache?, position_ids?, attention_bias?, head_sink?, k_scale?, v_scale?,
    q_norm_weight?, k_norm_weight?), projections done before it: ``attention_cost`` with the key and value
    heads repeated to the query heads (as the torch table prices SDPA's GQA): widths N x H for Q K^T and P V.

    H = key width / ``kv_num_heads`` (packed Q/K/V in ``query``: width / (N + 2 N_kv)). Keys L: the
    ``present_key`` length when known (past + new, or a past buffer shared with present: its length, as a
    static cache counts in torch), else past + new. Masked (1 per score) with an ``attention_bias`` or a causal
    mask over more than one query (``causal``, default 1; one query row masks nothing). + ``do_rotary``: the
    rotary embedding of q and the new k (3.5 per rotated element, width 2 x the cos cache's); + ``softcap``:
    3 per score (divide, tanh, multiply); + ``q_norm_weight`` / ``k_norm_weight``: an RMS norm per head of q
    and the new k (3N + 3R + N each). Appending to the cache, a quantized cache's dequantization and
    ``head_sink``'s one term per softmax row are not priced (moves; casts; R terms)."""
    heads, kv_heads = int(node.attr("num_heads")), int(node.attr("kv_num_heads"))
    query = node.input_shape(0)
    batch, seq = query[0], query[1]
    if node.has_input(1):
        key = node.input_shape(1)
        head, kv_seq = key[2] // kv_heads, key[1]
    else:
        head, kv_seq = query[2] // (heads + 2 * kv_heads), seq
    present = _known_shape(node, 1)
    past = node.input_shape(3)[2] if node.has_input(3) else 0
    keys = present[2] if present else past + kv_seq
    masked = node.has_input(10) or (int(node.attr("causal", 1)) and seq > 1)
    cost = attention_cost(batch, seq, keys, heads, heads * head, heads * head, bool(masked))
    q_elements, k_elements = batch * seq * heads * head, batch * kv_seq * kv_heads * head
    if int(node.attr("do_rotary", 0)):
        rotary_dim = 2 * node.input_shape(7)[-1] if node.has_input(7) else head
        cost = cost + _rotary((q_elements + k_elements) // head * rotary_dim)
    if float(node.attr("softcap", 0.0)) > 0:
        cost = cost + Cost.elementwise(3 * batch * heads * seq * keys)
    if node.has_input(14) and node.has_input(15):
        cost = cost + _rms_norm(q_elements, q_elements // head) + _rms_norm(k_elements, k_elements // head)
    return cost


@_op("com.microsoft.DecoderMaskedMultiHeadAttention")
def decoder_masked_mha(node: NodeView) -> Cost:
    """DecoderMaskedMultiHeadAttention (com.microsoft: query, key?, value?, mask_index?, attention_bias?,
    past_key?, past_value?, past_sequence_length?, beam_width?, cache_indirection?, bias?; one new token per
    sequence), projections done before it: ``attention_cost`` over the keys. Self attention (key (B, 1, D)):
    past + 1; with ``past_present_share_buffer`` the past buffer (sized to a maximum) holds the new token too:
    ``past_sequence_length`` + 1 when that is a constant, else the whole buffer (as a static cache counts in
    torch). Cross attention (key (B, N, L, H), the encoder's): L. Packed Q/K/V in ``query`` (no key): three
    equal widths. + 1 per element of the new q, k and v for ``bias``. Masked with ``mask_index`` or
    ``attention_bias``. The beam's cache indirection is a look-up (free)."""
    query = node.input_shape(0)
    heads = int(node.attr("num_heads"))
    batch, seq = query[0], query[1]
    if not node.has_input(1):
        q_width = v_width = query[-1] // 3
        key = None
    else:
        key, value = node.input_shape(1), node.input_shape(2)
        q_width = query[-1]
        v_width = value[1] * value[3] if len(value) == 4 else value[-1]
    if key is not None and len(key) == 4:  # cross attention: key and value are the encoder's, whole
        keys, new = key[2], 0
    else:
        past = node.input_shape(5)[2] if node.has_input(5) else 0
        new = key[1] if key is not None else seq
        keys = past + new
        if int(node.attr("past_present_share_buffer", 0)) and node.has_input(5):  # the new token goes in the buffer
            given = _static_int(node, 7) if node.has_input(7) else None
            keys = past if given is None else given + new
    bias = batch * seq * q_width + batch * new * (q_width + v_width) if node.has_input(10) else 0
    attention = attention_cost(batch, seq, keys, heads, q_width, v_width, node.has_input(3) or node.has_input(4))
    return attention + Cost.elementwise(bias)


def _packed_lengths(node: NodeView, at: int) -> list[int]:
    """The sequence lengths of a packed batch, from its constant ``cumulative_sequence_length`` (input ``at``)."""
    cumulative = node.constant(at)
    if cumulative is None:
        raise Unpriced("sequence lengths not static")
    ends = [int(v) for v in cumulative.reshape(-1)]
    return [b - a for a, b in zip(ends, ends[1:])]


def _packed_attention(lengths: Sequence[int], heads: int, q_width: int, v_width: int, masked: bool) -> Cost:
    """``attention_cost`` of each sequence of a packed batch on its own (Σ len² scores)."""
    total = Cost()
    for length in lengths:
        total = total + attention_cost(1, length, length, heads, q_width, v_width, masked)
    return total


@_op("com.microsoft.PackedAttention")
def packed_attention(node: NodeView) -> Cost:
    """PackedAttention (com.microsoft: input (T, D_in), weights, bias, token_offset, cumulative_sequence_length,
    attention_bias?): ``Attention`` on a batch packed without its padding: the Q, K, V projection T x D_in x
    (Dq + Dk + Dv) MACs and its bias, then each sequence's attention on its own (Σ len²). Priced when
    ``cumulative_sequence_length`` is a constant; else untracked ("sequence lengths not static")."""
    width_in = node.input_shape(0)[-1]
    widths = node.attr("qkv_hidden_sizes") or [node.input_shape(1)[1] // 3] * 3
    q_width, k_width, v_width = (int(w) for w in widths)
    tokens = node.numel_in(0) // width_in
    lengths = _packed_lengths(node, 4)
    projected = tokens * (q_width + k_width + v_width)
    projection = Cost.contraction(projected * width_in, projected)
    return projection + _packed_attention(lengths, int(node.attr("num_heads")), q_width, v_width, node.has_input(5))


@_op("com.microsoft.PackedMultiHeadAttention")
def packed_multi_head_attention(node: NodeView) -> Cost:
    """PackedMultiHeadAttention (com.microsoft: query (T, D) or packed (T, N, 3, H), key?, value?, bias?,
    token_offset, cumulative_sequence_length, attention_bias?), projections done before it: each sequence's
    attention on its own (Σ len²), + 1 per element of q, k and v for ``bias``. Priced when
    ``cumulative_sequence_length`` is a constant; else untracked ("sequence lengths not static")."""
    query = node.input_shape(0)
    tokens = query[0]
    if len(query) == 4:
        q_width = v_width = query[1] * query[3]
    else:
        q_width, v_width = query[-1], node.input_shape(2)[-1]
    lengths = _packed_lengths(node, 5)
    bias = tokens * (2 * q_width + v_width) if node.has_input(3) else 0
    attention = _packed_attention(lengths, int(node.attr("num_heads")), q_width, v_width, node.has_input(6))
    return attention + Cost.elementwise(bias)


@_op("com.microsoft.BiasAdd")
def bias_add(node: NodeView) -> Cost:
    """BiasAdd (X, bias, skip; a diffusion UNet's fusion): X + bias + skip, 2 per output element."""
    return Cost.elementwise(2 * node.numel_in(0) if node.float_in(0) else 0)


@_op("com.microsoft.BiasSplitGelu")
def bias_split_gelu(node: NodeView) -> Cost:
    """BiasSplitGelu (X (N, S, D), bias (D); diffusers' GEGLU after its linear layer): the bias add, 1 per input
    element (the linear's bias in torch), then left x GELU(right) on the two halves: 5 + 1 per output (D / 2)."""
    n = node.numel_in(0)
    return Cost.elementwise(n + 6 * (n // 2) if node.float_in(0) else 0)


@_op("com.microsoft.BiasDropout")
def bias_dropout(node: NodeView) -> Cost:
    """BiasDropout (data, bias, residual?, ratio?, training_mode?): data + bias, + residual, 1 per output each;
    the dropout between them is free, as ``Dropout`` is (a deployed graph runs inference)."""
    return Cost.elementwise((1 + int(node.has_input(2))) * node.numel_in(0) if node.float_in(0) else 0)


@_op("com.microsoft.GemmFastGelu")
def gemm_fast_gelu(node: NodeView) -> Cost:
    """GemmFastGelu (X, W (K, N), bias?): the MatMul rows x N x K, + 1 per output for the bias, + the tanh GELU
    (``FastGelu``) 9 per output: the linear layer and ``gelu(approximate='tanh')`` it fuses."""
    k, n = node.input_shape(1)
    outputs = node.numel_in(0) // k * n
    return Cost.contraction(outputs * k, outputs * (int(node.has_input(2)) + 9))
