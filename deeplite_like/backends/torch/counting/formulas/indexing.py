"""Data movement and indexing: the ops known to be free (0 MACs, 0 FLOPs), and the indexing that does
arithmetic.

**Free**: views and shape changes, copies and casts, concatenation and splitting, padding, indexing and
gathering, embedding look-ups, tensor creation and random fills, comparisons and logical
ops, selection (``where``, ``masked_fill``, ``tril``, ``sort``, ``topk``), and the dispatcher's
own book-keeping. A comparison produces a boolean, not a number, so it costs 0 even though
``max``/``relu`` (which produce values) cost 1 FLOP per element.

**Indexing that does arithmetic**: bags of embeddings, scatter-adds, and their backward. A plain
look-up (``embedding``, ``index_select``, ``gather``) moves data and is free (above); summing
what was looked up is not::

    embedding_bag   sum: n*D adds (+n*D multiplies with per_sample_weights); mean: + bags*D
                    divides; max: n*D (n = indices, D = embedding size)
    index_add, scatter_add, scatter_reduce, index_reduce, index_put/put with accumulate:
                    1 FLOP per source element (+1 when alpha != 1 / reduce='mean' divides)
    embedding backward (dense): one add per grad element (+1 with scale_grad_by_freq)
    embedding max_norm renorm: per looked-up row a norm (2D + 1) and a rescale (D)
    col2im (F.fold): overlapping patches are summed, 1 per input element
"""
from __future__ import annotations

import torch

from ..registry import Cost, OpCall, register_formula, register_free
from ._common import bind, first_tensor, is_float, numel, ops, per_input_element, scalar_is, shape


VIEWS = (
    "view", "_unsafe_view", "view_as", "reshape", "_reshape_alias", "reshape_as", "as_strided", "as_strided_",
    "expand", "expand_as", "expand_copy", "permute", "permute_copy", "transpose", "transpose_", "t", "t_", "t_copy",
    "numpy_T", "mT", "mH", "adjoint", "squeeze", "squeeze_", "squeeze_copy", "unsqueeze", "unsqueeze_",
    "unsqueeze_copy", "flatten", "unflatten", "narrow", "narrow_copy", "slice", "slice_copy", "select",
    "select_copy", "unbind", "unbind_copy", "split", "split_with_sizes", "split_copy", "split_with_sizes_copy",
    "unsafe_split", "unsafe_split_with_sizes", "chunk", "unsafe_chunk", "tensor_split", "hsplit", "vsplit",
    "dsplit", "movedim", "moveaxis", "swapaxes", "swapdims", "diagonal", "diagonal_copy", "alias", "alias_copy",
    "view_copy", "unfold", "unfold_copy", "view_as_real", "view_as_complex", "real", "imag",
    "_conj", "conj", "resolve_conj", "resolve_neg", "_neg_view", "conj_physical", "_reshape_copy", "ravel",
    "atleast_1d", "atleast_2d", "atleast_3d", "_nested_view_from_buffer",
)
COPIES_AND_CASTS = (
    "clone", "contiguous", "copy", "copy_", "_copy_from", "_copy_from_and_resize", "_to_copy", "to", "_to_dense",
    "to_dense", "detach", "detach_", "detach_copy", "lift", "lift_fresh", "lift_fresh_copy", "_lazy_clone",
    "type_as", "_autocast_to_reduced_precision", "_autocast_to_full_precision", "_has_compatible_shallow_copy_type",
    "set_", "resize_", "resize_as_", "_resize_output_", "record_stream", "pin_memory", "_pin_memory",
    "_make_per_tensor_quantized_tensor", "to_mkldnn", "_to_cpu", "dequantize", "_local_scalar_dense", "item",
    "_assert_async", "_is_all_true", "_is_any_true", "_assert_tensor_metadata", "_functional_assert_async", "_assert_scalar", "sym_constrain_range",
    "sym_constrain_range_for_size", "_functional_sym_constrain_range", "_unsafe_index", "is_same_size",
    "is_nonzero", "_propagate_xla_data", "_version", "retain_grad", "requires_grad_", "_fw_primal", "_make_dual",
    "_unpack_dual", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "_nested_tensor_size",
    "_nested_tensor_strides", "_nested_tensor_storage_offsets", "_nested_get_values", "_nested_tensor_from_mask",
    "_nested_tensor_from_mask_left_aligned", "to_padded_tensor", "_nested_from_padded",
    "_nested_tensor_from_tensor_list", "_pack_padded_sequence", "_pad_packed_sequence",
    "_pack_padded_sequence_backward",
)
JOIN_AND_PAD = (
    "cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "repeat",
    "repeat_interleave", "tile", "roll", "flip", "fliplr", "flipud", "rot90", "constant_pad_nd", "pad",
    "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "_pad_circular", "_pad_enum", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
    "native_channel_shuffle", "im2col", "block_diag", "slice_scatter", "select_scatter", "diagonal_scatter",
    "as_strided_scatter", "diag_embed", "diag", "triu", "tril", "triu_", "tril_",
)
INDEXING = (
    "index", "index_select", "gather", "take", "take_along_dim", "masked_select", "masked_scatter", "masked_fill",
    "index_fill", "index_copy", "scatter", "embedding", "nonzero", "nonzero_static", "argwhere", "where",
    "max_unpool2d", "max_unpool3d", "one_hot", "_unique", "_unique2", "unique_dim", "unique_consecutive",
    "unique_dim_consecutive", "sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode",
    "searchsorted", "bucketize", "histc", "bincount", "reflection_pad1d_backward", "reflection_pad2d_backward",
    "replication_pad1d_backward", "replication_pad2d_backward", "nan_to_num", "isin",
    "unfold_backward", "select_backward", "slice_backward", "index_select_backward",
    "diagonal_backward", "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate", "tril_indices",
    "triu_indices",
)
CREATION = (
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_",
    "zero", "zero_", "arange", "range", "linspace", "logspace", "eye", "scalar_tensor", "tensor", "rand",
    "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "normal_", "uniform",
    "uniform_", "bernoulli", "bernoulli_", "random", "random_", "exponential", "exponential_", "geometric",
    "geometric_", "cauchy", "cauchy_", "log_normal", "log_normal_", "multinomial", "poisson", "_standard_gamma",
    "_sample_dirichlet", "_empty_affine_quantized", "_empty_per_channel_affine_quantized",
)
COMPARISONS_AND_LOGIC = (
    "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal", "not_equal", "equal",
    "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal", "isclose", "allclose", "signbit",
    "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "__and__", "__or__", "__xor__", "__lshift__",
    "__rshift__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "all", "any", "count_nonzero",
    "heaviside",
)

register_free(*ops(*VIEWS, *COPIES_AND_CASTS, *JOIN_AND_PAD, *INDEXING, *CREATION, *COMPARISONS_AND_LOGIC,
                   inplace=True))

# Shape queries the dispatcher routes through the mode (``prim.device`` under fake tensors).
register_free(*(getattr(torch.ops.prim, name) for name in ("device", "layout") if hasattr(torch.ops.prim, name)))


# -- Indexing that does arithmetic: embedding bags, scatter-adds, embedding backward -------------------------
@register_formula(*ops("_embedding_bag", "_embedding_bag_forward_only", "embedding_bag"))
def embedding_bag(call: OpCall) -> Cost:
    """Embedding bag: sum n*D (+n*D per-sample weights), mean n*D + bags*D, max n*D FLOPs."""
    a = bind(call)
    out = first_tensor(call.out)
    if not is_float(out):
        return Cost()
    dim = shape(a["weight"])[-1]
    looked_up = numel(a["indices"]) * dim
    flops = looked_up
    if a.get("per_sample_weights") is not None:
        flops += looked_up
    if int(a.get("mode") or 0) == 1:
        flops += numel(out)
    return Cost.elementwise(flops)


@register_formula(*ops("embedding_dense_backward", "embedding_backward"))
def embedding_backward(call: OpCall) -> Cost:
    """Embedding backward: grads scatter-added into the table, 1 per grad element (+1 scale_grad_by_freq)."""
    a = bind(call)
    grad = a.get("grad_output", a.get("grad"))
    if not is_float(grad):
        return Cost()
    return Cost.elementwise(numel(grad) * (2 if a.get("scale_grad_by_freq") else 1))


@register_formula(*ops("_embedding_bag_backward", "_embedding_bag_dense_backward", "_embedding_bag_sparse_backward"))
def embedding_bag_backward(call: OpCall) -> Cost:
    """Embedding bag backward: each looked-up row gets its bag's grad added, n*D (+n*D weights, +n*D mean)."""
    a = bind(call)
    grad = a["grad"]
    if not is_float(grad):
        return Cost()
    looked_up = numel(a["indices"]) * shape(grad)[-1]
    flops = looked_up + (looked_up if a.get("per_sample_weights") is not None else 0)
    flops += looked_up if int(a.get("mode") or 0) == 1 else 0
    return Cost.elementwise(flops)


def _accumulate(call: OpCall, source_name: str) -> Cost:
    a = bind(call)
    source = a[source_name]
    if not is_float(first_tensor(call.out)):
        return Cost()
    per = 1
    if not scalar_is(a.get("alpha", 1), 1):
        per += 1
    n = numel(source)
    extra = numel(first_tensor(call.out)) if a.get("reduce") == "mean" else 0
    return Cost.elementwise(per * n + extra)


@register_formula(*ops("index_add", "index_reduce", inplace=True))
def index_add(call: OpCall) -> Cost:
    """index_add / index_reduce: 1 FLOP per source element (+1 alpha != 1; mean: + a divide per output)."""
    return _accumulate(call, "source")


@register_formula(*ops("scatter_add", "scatter_reduce", inplace=True))
def scatter_add(call: OpCall) -> Cost:
    """scatter_add / scatter_reduce: 1 FLOP per src element (mean: + a divide per output)."""
    return _accumulate(call, "src")


@register_formula(*ops("index_put", "_index_put_impl", "put", inplace=True))
def index_put(call: OpCall) -> Cost:
    """index_put / put: free (a write); with accumulate=True 1 add per value written."""
    a = bind(call)
    if not a.get("accumulate"):
        return Cost()
    values = a.get("values", a.get("source"))
    return Cost.elementwise(numel(values)) if is_float(values) else Cost()


register_formula(*ops("col2im"))(
    per_input_element(1, "col2im (``F.fold``): overlapping patch values are summed, 1 FLOP per input element."))


@register_formula(*ops("embedding_renorm", inplace=True))
def embedding_renorm(call: OpCall) -> Cost:
    """``max_norm`` renorm of the looked-up rows: per index, a norm (2D + 1) and a rescale (D) = 3D + 1."""
    a = bind(call)
    table = a["self"]
    if not is_float(table):
        return Cost()
    return Cost.elementwise(numel(a["indices"]) * (3 * shape(table)[-1] + 1))
