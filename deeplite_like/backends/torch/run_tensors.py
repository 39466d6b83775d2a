"""The small tensor helpers every measuring pass needs, written once (counting, profiles, memory, timing).

* ``tensors_in``: the tensors of inputs or outputs, in any nesting of containers and mappings;
* ``meta_like``: a meta twin of a tensor;
* ``loss_of``: the scalar a counted backward pass differentiates;
* ``batch_size_of`` / ``required_batch_size`` / ``first_tensor_batch``: the batch size of the inputs.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Iterator

import torch
from torch.utils import _pytree as pytree

from .errors import BackwardError

__all__ = ["batch_size_of", "first_tensor_batch", "loss_of", "meta_like", "required_batch_size",
           "tensors_in"]


def tensors_in(tree: Any) -> Iterator[torch.Tensor]:
    """Tensors in any nesting of pytree containers and mappings (e.g. dict-like model outputs)."""
    for leaf in pytree.tree_leaves(tree):
        if isinstance(leaf, torch.Tensor):
            yield leaf
        elif isinstance(leaf, Mapping):
            yield from tensors_in(list(leaf.values()))


def meta_like(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with the shape, strides, dtype and ``requires_grad`` of ``tensor``."""
    meta = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device="meta")
    return meta.requires_grad_(True) if tensor.requires_grad else meta


def loss_of(output: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    """``loss_fn(output)``, or the sum of every floating-point output tensor that requires grad.

    Raises ``BackwardError`` when ``loss_fn`` raises, when nothing can be differentiated, or when
    the loss is not a one-element tensor that requires grad.
    """
    if loss_fn is not None:
        try:
            loss = loss_fn(output)
        except Exception as exc:
            raise BackwardError(f"loss_fn raised on the model output: {type(exc).__name__}: {exc}") from exc
    else:
        outputs = [t for t in tensors_in(output) if t.is_floating_point() and t.requires_grad]
        if not outputs:
            raise BackwardError("backward=True: the model output has no floating-point tensor that requires "
                                f"grad (got {type(output).__name__}); pass loss_fn=... returning a scalar to "
                                "differentiate")
        loss = outputs[0].sum()
        for tensor in outputs[1:]:
            loss = loss + tensor.sum()
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad):
        from .counting.describe import describe_args  # (imported here: the counting package imports this module)

        raise BackwardError("backward=True: the loss must be a one-element tensor that requires grad, got "
                            f"{describe_args((loss,), {})}; check loss_fn")
    return loss


def batch_size_of(args: Any, kwargs: Any = None) -> int | None:
    """The leading dimension of the first input tensor that has one, else ``None``."""
    for tensor in tensors_in((args, kwargs or {})):
        if tensor.dim() > 0:
            return int(tensor.size(0))  # (size(0): a nested tensor has no .shape)
    return None


def input_shapes(args: Any, kwargs: Any = None) -> list[tuple[int, ...]]:
    """The shapes of the input tensors (nested tensors, which have no single shape, left out)."""
    return [tuple(t.shape) for t in tensors_in((args, kwargs or {})) if not t.is_nested]


def first_tensor_batch(args: Any, kwargs: Any = None) -> int | None:
    """The leading dimension of the *first* input tensor; ``None`` when it is a scalar (a count's
    batch is unknown then: ``count_ops(model, scale, x)`` does not guess that ``x`` is the batch)."""
    if isinstance(args, tuple) and args and isinstance(args[0], torch.Tensor):  # the usual call: no pytree walk
        return int(args[0].size(0)) if args[0].dim() > 0 else None
    for tensor in tensors_in((args, kwargs or {})):
        return int(tensor.size(0)) if tensor.dim() > 0 else None
    return None


def required_batch_size(args: Any, kwargs: Any = None) -> int:
    """``batch_size_of``, or a ``ValueError`` saying to pass ``batch_size=`` when no input has a batch axis."""
    batch = batch_size_of(args, kwargs)
    if batch is None:
        raise ValueError("cannot infer the batch size: no input tensor has a leading dimension; "
                         "pass batch_size=... explicitly")
    return batch
