"""The inputs of a one-call profile: given (``args``/``kwargs``) or built from ``input_shape``."""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import torch
from torch import nn

__all__ = ["profile_inputs"]


def _first_leaf(named_modules: list[tuple[str, nn.Module]]) -> tuple[str, nn.Module] | None:
    for name, module in named_modules:
        if not list(module.children()) and any(True for _ in module.parameters(recurse=False)):
            return name, module
    return None


def profile_inputs(model: nn.Module, input_shape: Sequence[int] | None, args: Any, kwargs: Any,
            on_meta: bool) -> tuple[tuple, dict, bool]:
    """``(args, kwargs, built)``: the call's inputs; ``built`` when made from ``input_shape``."""
    if input_shape is not None and (args is not None or kwargs is not None):
        raise ValueError("pass either input_shape=... (one float tensor) or args=/kwargs=, not both")
    if input_shape is None:
        if args is None and kwargs is None:
            raise ValueError(f"get_model_profile needs the inputs of {type(model).__name__}: input_shape=(batch, ...) "
                             "for a model that takes one float tensor, or args=(...)/kwargs={...} otherwise")
        if isinstance(args, torch.Tensor):
            args = (args,)
        return tuple(args or ()), dict(kwargs or {}), False
    try:
        shape = tuple(int(d) for d in input_shape)
    except (TypeError, ValueError):
        raise ValueError(f"input_shape must be a sequence of ints (batch dimension included), got {input_shape!r}") \
            from None
    leaf = _first_leaf(list(model.named_modules()))
    if leaf is not None and isinstance(leaf[1], (nn.Embedding, nn.EmbeddingBag)):
        raise ValueError(f"input_shape builds a float tensor, but the first layer of {type(model).__name__}, "
                         f"{leaf[0]!r} ({type(leaf[1]).__name__}), takes integer ids: pass the inputs instead, e.g. "
                         f"args=(torch.randint(0, {leaf[1].num_embeddings}, {shape}),)")
    floats = [p for p in itertools.chain(model.parameters(), model.buffers()) if p.is_floating_point()]
    if any(not p.is_floating_point() for p in model.parameters()) and not floats:
        raise ValueError(f"input_shape builds a float tensor, but {type(model).__name__} has no floating-point "
                         "parameters (quantized or integer model?): pass args=/kwargs= with the inputs it takes")
    dtype = floats[0].dtype if floats else torch.get_default_dtype()
    if on_meta:
        return (torch.empty(shape, dtype=dtype, device="meta"),), {}, True
    device = floats[0].device if floats else torch.device("cpu")
    generator = torch.Generator(device).manual_seed(0)  # its own generator: the global one is left as found
    return (torch.randn(shape, dtype=dtype, device=device, generator=generator),), {}, True
