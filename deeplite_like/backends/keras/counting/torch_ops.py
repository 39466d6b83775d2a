"""Keras on torch: a dispatch mode pricing each aten op with the torch backend's formula table.

Used by ``own_ops`` (a layer's own arithmetic); imported only when Keras runs on torch.

One Keras convention overrides the torch table here: ``keras.ops.dot_product_attention``, which
Keras' torch backend runs as one fused SDPA kernel, is priced as the reference Keras itself runs on
TensorFlow and JAX (``_dot_product_attention_xla``): scale the *scores* (1 per score, where the torch
math path scales q and k: BH × (Lq + Lk) × E), an additive mask or bias 1 per score, a boolean or
causal mask a select (free), softmax 5 per score; the same FLOPs on the three Keras backends
(docs/conventions.rst, *Keras on JAX*).
"""
from __future__ import annotations

import math
import sys
from typing import Any, Callable

import torch

from deeplite_like.backends.torch.counting import formulas as _formulas  # noqa: F401  (fills the table)
from deeplite_like.backends.torch.counting.formulas._common import bind
from deeplite_like.backends.torch.counting.registry import CountOptions, OpCall, is_free, lookup, op_name
from deeplite_like.backends.torch.counting.recorder import LightDispatchMode
from deeplite_like.errors import FormulaError

__all__ = ["OpPricingMode", "aten_cost"]


def aten_cost(func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[int, int] | None:
    """``(macs, flops)`` of one aten op by the torch formula table; ``(0, 0)`` free; ``None`` unknown."""
    formula = lookup(func)
    if formula is None:
        return (0, 0) if is_free(func) else None
    call = OpCall(func, args, kwargs, out, _OPTIONS)
    try:
        macs, flops = formula(call)
        if op_name(func) in _SDPA:
            flops += _keras_attention_difference(call)
    except Exception as exc:
        raise FormulaError(f"the torch formula {getattr(formula, '__qualname__', formula)!r} for {op_name(func)} "
                           f"failed inside a Keras layer's own call: {type(exc).__name__}: {exc}") from exc
    return int(macs), int(flops)


#: SDPA forward kernels ``keras.ops.dot_product_attention`` runs on Keras' torch backend, and their masks
_SDPA = {"aten.scaled_dot_product_attention": "attn_mask", "aten._scaled_dot_product_attention_math": "attn_mask",
         "aten._scaled_dot_product_flash_attention_for_cpu": "attn_mask",
         "aten._scaled_dot_product_flash_attention": None,
         "aten._scaled_dot_product_efficient_attention": "attn_bias",
         "aten._scaled_dot_product_cudnn_attention": "attn_bias",
         "aten._scaled_dot_product_fused_attention_overrideable": "attn_bias"}


def _keras_attention_difference(call: OpCall) -> int:
    """Keras' attention convention minus the torch table's SDPA FLOPs (module docstring): the scores
    scaled instead of q and k; a boolean or causal mask a select instead of an add."""
    a = bind(call)
    q, k = a["query"].shape, a["key"].shape
    bh, lq, lk, e = int(math.prod(q[:-2])), int(q[-2]), int(k[-2]), int(q[-1])
    scores = bh * lq * lk
    mask_name = _SDPA[op_name(call.op)]
    mask = a.get(mask_name) if mask_name else None
    additive = mask is not None and mask.dtype.is_floating_point
    torch_mask = scores if (mask is not None or a.get("is_causal")) else 0
    return scores - bh * (lq + lk) * e + (scores if additive else 0) - torch_mask


_OPTIONS = CountOptions()


class OpPricingMode(LightDispatchMode):
    """Calls ``sink(name, (macs, flops))`` for each aten op run (``(0, 0)`` free, ``None`` unknown).

    ``ledger``: a PyTorch-backend ``memory.StorageLedger`` told of every op's outputs (peak memory
    from the same forward). A ``LightDispatchMode``: no TorchDynamo import unless it is loaded.
    """

    def __init__(self, sink: Callable[[str, tuple[int, int] | None], None], ledger: Any = None) -> None:
        super().__init__()
        self._sink = sink
        self.ledger = ledger

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if not self._dynamo_safe and "torch._dynamo" in sys.modules:  # compiled code may run from now on
            self.switch_if_dynamo_loaded()
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.ledger is not None:
            self.ledger.count(func, out)
        cost = aten_cost(func, args, kwargs, out)
        tensors = [t for t in (*args, *kwargs.values(), *(out if isinstance(out, (tuple, list)) else (out,)))
                   if isinstance(t, torch.Tensor)]
        if cost is not None and tensors and all(t.dim() == 0 for t in tensors):
            cost = (0, 0)  # scalars alone: as on TensorFlow and JAX (engine._tf_tap)
        self._sink(op_name(func), cost)
        return out
