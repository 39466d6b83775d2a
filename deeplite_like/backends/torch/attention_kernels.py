"""Which ``scaled_dot_product_attention`` kernel a measured step runs: the one the target device runs.

``F.scaled_dot_product_attention`` picks its kernel by device. On meta it takes the math path,
which materialises the attention matrix and saves it for backward; a CUDA GPU takes flash
attention (or memory-efficient attention when there is a mask), which saves only the output
and a log-sum-exp per row. The memory of an attention model depends on that choice, so
``AttentionKernel`` (a ``TorchFunctionMode``) calls the chosen ATen kernel directly; each has a
meta kernel and a derivative, so the step, backward included, is the one that device runs:

* ``"cuda"``: ``_scaled_dot_product_flash_attention`` without a mask,
  ``_scaled_dot_product_efficient_attention`` with one (CUDA's choice for fp16/bf16 inputs);
* ``"cpu"``: the CPU's choice (``select_sdp_backend_cpp`` in ATen's ``sdp_utils_cpp``):
  ``_scaled_dot_product_flash_attention_for_cpu`` where its constraints hold (no dropout, 4-d
  inputs of one batch size, equal heads or valid grouped-query heads, a 2-d / 4-d broadcastable
  mask that needs no grad, equal head dims, no empty sequence, unit last stride, a float dtype,
  flash not disabled), otherwise torch's own math path, which the meta device takes as well
  (attention dropout in training - GPT-2, BERT - always falls back to it);
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
        if self.kind == "cpu":
            if not _cpu_flash_eligible(q, k, v, mask, dropout, gqa):
                return func(*args, **kwargs)  # torch's math fallback (the meta device's choice too)
            return aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout, causal, attn_mask=mask,
                                                                     scale=scale)[0]
        if mask is None:  # CUDA's flash kernel takes fewer key/value heads as they are
            return aten._scaled_dot_product_flash_attention(q, k, v, dropout, causal, scale=scale)[0]
        if gqa and k.shape[-3] != q.shape[-3]:  # the efficient kernel takes equal head counts
            groups = q.shape[-3] // k.shape[-3]
            k, v = k.repeat_interleave(groups, dim=-3), v.repeat_interleave(groups, dim=-3)
        bias = mask if mask.dtype != torch.bool else _bool_mask_to_bias(mask, q.dtype)
        return aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, dropout, causal, scale=scale)[0]


_CPU_FLASH_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _cpu_flash_eligible(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, dropout: float,
                        gqa: bool) -> bool:
    """Whether the CPU runs its flash kernel for these inputs: ``use_flash_attention_cpp``'s constraints, in order."""
    if not torch.backends.cuda.flash_sdp_enabled() or dropout > 0.0:  # (the flag is global, not CUDA's alone)
        return False
    if not q.dim() == k.dim() == v.dim() == 4 or not q.shape[0] == k.shape[0] == v.shape[0]:
        return False
    heads = (q.shape[-3], k.shape[-3], v.shape[-3])
    if gqa:
        if heads[0] % heads[1] or heads[1] != heads[2]:
            return False
    elif len(set(heads)) != 1:
        return False
    if mask is not None:
        def fits(mask_dim: int, dim: int) -> bool:
            return mask_dim in (dim, 1)
        if (mask.requires_grad or mask.dim() not in (2, 4) or not fits(mask.shape[-2], q.shape[2])
                or not fits(mask.shape[-1], k.shape[2])
                or mask.dim() == 4 and not (fits(mask.shape[0], q.shape[0]) and fits(mask.shape[1], q.shape[1]))):
            return False
    if not q.shape[-1] == k.shape[-1] == v.shape[-1] or 0 in (q.shape[-2], k.shape[-2], v.shape[-2]):
        return False
    if not q.stride(-1) == k.stride(-1) == v.stride(-1) == 1:
        return False
    return q.dtype in _CPU_FLASH_DTYPES


def _bool_mask_to_bias(mask: torch.Tensor, dtype: torch.dtype) -> Any:
    """A boolean mask (True = attend) as the additive bias the efficient kernel takes, as torch converts it."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
