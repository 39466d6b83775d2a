"""CUDA autocast's cast policy, applied where ``torch.autocast`` does not run: on meta tensors.

``torch.autocast`` works through per-device dispatch keys (``AutocastCUDA``, ``AutocastCPU``);
meta tensors have none, so under ``torch.autocast("cuda")`` a meta forward silently stays in
float32. ``AutocastPolicy`` is a ``TorchFunctionMode`` that applies the same policy at the
same level (above autograd, so every cast is recorded in the graph exactly as autocast's casts
are), from the op lists of PyTorch's AMP documentation ("CUDA Ops that can autocast to
float16 / to float32 / promote to the widest input type"):

* lower precision (``dtype``): matmuls, linear, convolutions, attention, RNN cells;
* float32: reductions, losses, softmax, normalisations, exp/log/pow and friends (only
  lower-precision inputs are cast up);
* widest input type: ``cat``, ``stack``, ``addcmul`` and the others of that list.

Casts apply to floating tensors other than float64, as autocast's do. Like autocast, casts of
leaf tensors that require grad (the weights) are cached until the region exits, so each weight
is cast once per forward and its low-precision copy lives as long as the region (or as long as
autograd saved it). Ops not in any list run in the dtype of their inputs.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

__all__ = ["AutocastPolicy", "resolve_autocast_dtype"]

_LOWER = frozenset({
    "__matmul__", "__rmatmul__", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul",
    "multi_dot", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "linear", "matmul", "mm", "mv", "prelu", "einsum", "scaled_dot_product_attention",
    "gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell",
})
_FLOAT32 = frozenset({
    "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "acos", "asin", "binary_cross_entropy_with_logits",
    "cosh", "cosine_embedding_loss", "cdist", "cosine_similarity", "cross_entropy", "cumprod", "cumsum",
    "dist", "erfinv", "exp", "expm1", "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss",
    "layer_norm", "log", "log_softmax", "log10", "log1p", "log2", "margin_ranking_loss", "mse_loss",
    "multilabel_margin_loss", "multi_margin_loss", "nll_loss", "norm", "normalize", "pdist",
    "poisson_nll_loss", "pow", "prod", "reciprocal", "rsqrt", "sinh", "smooth_l1_loss", "soft_margin_loss",
    "softmax", "softmin", "softplus", "sum", "renorm", "tan", "triplet_margin_loss", "huber_loss",
})
_PROMOTE = frozenset({
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample", "index_put", "scatter_add",
    "tensordot", "cat", "stack",
})

_NAMES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
          "half": torch.float16}


def resolve_autocast_dtype(value: Any) -> torch.dtype | None:
    """``None`` / ``False`` -> no autocast; ``True`` -> bfloat16; a dtype or its name (``"bf16"``)."""
    if value is None or value is False:
        return None
    if value is True:
        return torch.bfloat16
    if isinstance(value, str) and value.lower() in _NAMES:
        return _NAMES[value.lower()]
    if value in (torch.bfloat16, torch.float16):
        return value
    raise ValueError(f"autocast={value!r} is not a low-precision dtype; use torch.bfloat16, torch.float16, "
                     f"or one of {sorted(_NAMES)}")


def _eligible(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64


class AutocastPolicy(TorchFunctionMode):
    """Applies CUDA autocast's cast policy to every tensor (meta included); see the module docstring."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __exit__(self, *exc: object) -> None:
        self._cache.clear()  # autocast drops its weight-cast cache when the region exits
        super().__exit__(*exc)

    def _cast(self, value: Any, dtype: torch.dtype) -> Any:
        if not _eligible(value) or value.dtype == dtype:
            return value
        if value.is_leaf and value.requires_grad:
            cached = self._cache.get(id(value))
            if cached is not None and cached[0] is value and cached[1].dtype == dtype:
                return cached[1]
            cast = value.to(dtype)
            self._cache[id(value)] = (value, cast)
            return cast
        return value.to(dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _LOWER:
            target = self.dtype
        elif name in _FLOAT32:
            if not any(_eligible(v) and v.dtype in (torch.float16, torch.bfloat16)
                       for v in pytree.tree_leaves((args, kwargs))):
                return func(*args, **kwargs)
            target = torch.float32
        elif name in _PROMOTE:
            dtypes = [v.dtype for v in pytree.tree_leaves((args, kwargs)) if _eligible(v)]
            if len(set(dtypes)) < 2:
                return func(*args, **kwargs)
            target = max(dtypes, key=lambda d: torch.finfo(d).bits)
        else:
            return func(*args, **kwargs)
        args, kwargs = pytree.tree_map(lambda v: self._cast(v, target), (args, kwargs))
        return func(*args, **kwargs)
