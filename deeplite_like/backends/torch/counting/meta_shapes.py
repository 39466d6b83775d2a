"""Output shapes for ops whose meta kernel refuses what their real kernels accept.

torch's meta kernel for ``_grouped_mm`` wants bf16 operands with 16-byte aligned strides (the
CUDA kernel's constraints), while the CPU kernel runs any float dtype: a float32 mixture-of-experts
model runs for real but not on meta. Counting needs only the output's shape and dtype, which
follow from the operands' shapes, so for these ops the meta run builds the output from them.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["meta_output"]

aten = torch.ops.aten


def _grouped_mm(self: torch.Tensor, mat2: torch.Tensor, offs: torch.Tensor | None = None, *rest: Any,
                out_dtype: torch.dtype | None = None, **_: Any) -> torch.Tensor:
    """(M, K) x (G, K, N) -> (M, N); (G, M, K) x (G, K, N) -> (G, M, N); (M, K) x (K, N), K split
    -> (G, M, N); (G, M, K) x (K, N), N split -> (M, N)."""
    if self.dim() == 2 and mat2.dim() == 3:
        size = (self.shape[0], mat2.shape[2])
    elif self.dim() == 3 and mat2.dim() == 3:
        size = (self.shape[0], self.shape[1], mat2.shape[2])
    elif self.dim() == 2:
        size = (offs.shape[0], self.shape[0], mat2.shape[1])
    else:
        size = (self.shape[1], mat2.shape[1])
    return torch.empty(size, dtype=out_dtype or self.dtype, device="meta")


def _scaled_grouped_mm(self: torch.Tensor, mat2: torch.Tensor, scale_a: Any, scale_b: Any,
                       offs: torch.Tensor | None = None, bias: Any = None, scale_result: Any = None,
                       out_dtype: torch.dtype | None = None, **_: Any) -> torch.Tensor:
    return _grouped_mm(self, mat2, offs, out_dtype=out_dtype or torch.bfloat16)


_SHAPES: dict[Any, Callable[..., torch.Tensor]] = {
    packet: fn for packet, fn in ((getattr(aten, "_grouped_mm", None), _grouped_mm),
                                  (getattr(aten, "_scaled_grouped_mm", None), _scaled_grouped_mm))
    if packet is not None
}


def meta_output(func: Any, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The meta output of ``func(*args, **kwargs)`` from shapes, or None when ``func`` has no rule here."""
    rule = _SHAPES.get(getattr(func, "overloadpacket", func))
    if rule is None or not all(not isinstance(a, torch.Tensor) or a.is_meta for a in args):
        return None
    return rule(*args, **kwargs)
