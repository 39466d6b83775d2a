"""Which ``scaled_dot_product_attention`` kernel a measured step runs: the one the target device runs.

``F.scaled_dot_product_attention`` picks its kernel by device. On meta it takes the math path,
which materialises the attention matrix and saves it for backward; a CUDA GPU takes flash
attention (or memory-efficient attention when there is a mask), which saves only the output
and a log-sum-exp per row. The memory of an attention model depends on that choice, so
``AttentionKernel`` (a ``TorchFunctionMode``) calls the chosen ATen kernel directly; each has a
meta kernel and a derivative, so the step, backward included, is the one that device runs:

* ``"cuda"``: ``_scaled_dot_product_flash_attention`` without a mask,
  ``_scaled_dot_product_efficient_attention`` with one (CUDA's choice for fp16/bf16 inputs);
* ``"cpu"``: ``_scaled_dot_product_flash_attention_for_cpu`` (the CPU's choice);
* ``"math"``: ``_scaled_dot_product_attention_math`` (the attention matrix is materialised);
* ``None``: whatever torch picks for the tensors' device (math on meta).

Grouped-query attention (``enable_gqa=True``): the flash kernels take fewer key/value heads as
they are; for the efficient kernel (a mask on CUDA) they are repeated first.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["AttentionKernel", "ATTENTION_KERNELS"]

ATTENTION_KERNELS = ("cuda", "cpu", "math", None)


def _arguments(args: tuple, kwargs: dict) -> tuple:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    defaults = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}
    values = dict(zip(names, args))
    values.update(kwargs)
    return tuple(values.get(n, defaults.get(n)) for n in names)


class AttentionKernel(TorchFunctionMode):
    """Runs ``scaled_dot_product_attention`` with the kernel of ``kind`` (see the module docstring)."""

    def __init__(self, kind: str) -> None:
        if kind not in ATTENTION_KERNELS[:-1]:
            raise ValueError(f"attention={kind!r} is not known; use one of {list(ATTENTION_KERNELS)}")
        super().__init__()
        self.kind = kind

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") != "scaled_dot_product_attention":
            return func(*args, **kwargs)
        q, k, v, mask, dropout, causal, scale, gqa = _arguments(args, kwargs)
        aten = torch.ops.aten
        if self.kind == "math":
            return aten._scaled_dot_product_attention_math(q, k, v, mask, dropout, causal, scale=scale,
                                                           enable_gqa=gqa)[0]
        if self.kind == "cpu":  # takes fewer key/value heads as they are
            return aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout, causal, attn_mask=mask,
                                                                     scale=scale)[0]
        if mask is None:  # CUDA's flash kernel takes fewer key/value heads as they are
            return aten._scaled_dot_product_flash_attention(q, k, v, dropout, causal, scale=scale)[0]
        if gqa and k.shape[-3] != q.shape[-3]:  # the efficient kernel takes equal head counts
            groups = q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(groups, dim=-3), v.repeat_interleave(groups, dim=-3)
        bias = mask if mask.dtype != torch.bool else _bool_mask_to_bias(mask, q.dtype)
        return aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, dropout, causal, scale=scale)[0]


def _bool_mask_to_bias(mask: torch.Tensor, dtype: torch.dtype) -> Any:
    """A boolean mask (True = attend) as the additive bias the efficient kernel takes, as torch converts it."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
