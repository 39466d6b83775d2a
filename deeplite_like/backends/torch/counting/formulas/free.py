"""Operators that do no arithmetic: they are known to be free (0 MACs, 0 FLOPs).

Views and shape changes, copies and casts, concatenation and splitting, padding, indexing and
gathering, embedding look-ups, tensor creation and random fills, comparisons and logical
ops, selection (``where``, ``masked_fill``, ``tril``, ``sort``, ``topk``), and the dispatcher's
own book-keeping. A comparison produces a boolean, not a number, so it costs 0 even though
``max``/``relu`` (which produce values) cost 1 FLOP per element.
"""
from __future__ import annotations

import torch

from ..registry import register_free
from ._common import ops

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
