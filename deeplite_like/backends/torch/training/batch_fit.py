"""The largest batch (or sequence length) whose training step fits a device, by measurement.

The peak of a step is, operator by operator, an affine function of the batch size (every
activation is proportional to it, model states are not), and the peak of the step is the
largest of those: a convex, piecewise-affine function. ``largest_batch`` measures it at sizes
1 and 2, takes the affine guess ``(device - intercept) / slope``, and then measures between the largest size known to
fit and the smallest known not to (the chord through them, alternating with bisection) until
the answer ``n`` is verified: ``n`` fits, ``n + 1`` does not. Every figure it returns was
measured, none extrapolated.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

from deeplite_like.backends.torch.training.estimate import TrainingMemory, estimate_training_memory
from deeplite_like.errors import check_batch_size, check_flag
from deeplite_like.units import parse_bytes

__all__ = ["BatchFit", "largest_batch"]


@dataclass(frozen=True)
class BatchFit:
    """``size``: the largest size along ``axis`` that fits ``device_bytes`` (0: not even 1).

    ``result``: the step measured at ``size`` (None when 0); ``next_peak_bytes``: the measured
    need at ``size + 1``; ``intercept_bytes`` / ``slope_bytes``: the affine fit from sizes 1 and 2
    (bytes that do not scale, and bytes per unit of size). ``measured``: every size measured,
    with its need (peak, plus the allowance when counted).
    """

    size: int
    axis: int
    device_bytes: int
    result: TrainingMemory | None
    next_peak_bytes: int | None
    intercept_bytes: int
    slope_bytes: int
    measured: dict[int, int]


def resize(tree: Any, axis: int, old: int, new: int, on_meta: bool = False) -> Any:
    """``tree`` with each tensor whose dimension ``axis`` is ``old`` made ``new`` long.

    A meta tensor, or any tensor when ``on_meta``, becomes a meta tensor of the new shape (nothing
    is allocated); a real one is repeated along ``axis`` (real memory: ``estimate_training_memory``'s
    ``meta=False`` runs on it).
    """
    def one(x: Any) -> Any:
        if not (isinstance(x, torch.Tensor) and x.dim() > axis and x.shape[axis] == old):
            return x
        shape = list(x.shape)
        shape[axis] = new
        if on_meta or x.device.type == "meta":
            return torch.empty(shape, dtype=x.dtype, device="meta")
        reps = [1] * x.dim()
        reps[axis] = -(-new // old)
        return x.repeat(*reps).narrow(axis, 0, new).clone()
    return pytree.tree_map(one, tree)


def largest_batch(
    model: nn.Module,
    *inputs: Any,
    fit: str | int,
    axis: int = 0,
    allowance: bool = True,
    max_size: int = 1 << 20,
    **options: Any,
) -> BatchFit:
    """Largest size along ``axis`` (0: batch, 1: sequence) whose training step fits ``fit``.

    ``fit``: device memory, ``"80GiB"`` or bytes. ``inputs`` (and ``target=``, ``kwargs``) are
    a sample whose tensors have the same size along ``axis``; they are resized (on meta, at no
    cost). ``allowance=True`` counts ``TrainingMemory.allowance`` (CUDA context, cuBLAS
    workspace, allocator rounding) in the need; the figures themselves never include it.
    ``options`` go to ``estimate_training_memory``. With its ``meta=True`` (the default) every
    probed size is built on meta, also from a real example: a probe of a million samples costs no
    host memory. With ``meta=False`` each probe runs on real tensors of that size.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"largest_batch expects a torch.nn.Module, got {type(model).__name__}")
    if isinstance(fit, bool) or not isinstance(fit, (str, int)):
        raise TypeError(f"largest_batch(fit=...) takes a size such as '80GiB' or a number of bytes, got "
                        f"{type(fit).__name__} {fit!r}")
    if isinstance(axis, bool) or axis not in (0, 1):
        raise ValueError(f"largest_batch(axis=...) is 0 (the batch) or 1 (the sequence), got {axis!r}")
    check_batch_size(max_size, "max_size", "largest_batch", allow_none=False)
    allowance = check_flag(allowance, "allowance", "largest_batch")
    on_meta = check_flag(options.get("meta", True), "meta", "largest_batch")
    if "batch_size" in options:
        raise TypeError("largest_batch sets batch_size itself for each size it measures; leave it out")
    device_bytes = parse_bytes(fit)
    sizes = {t.shape[axis] for t in pytree.tree_leaves((inputs, options.get("target"), options))
             if isinstance(t, torch.Tensor) and t.dim() > axis}
    if len(sizes) != 1:
        raise ValueError(f"largest_batch: the input tensors must share one size along axis {axis}, found "
                         f"{sorted(sizes) or 'none'}")
    old = sizes.pop()
    results: dict[int, TrainingMemory] = {}
    needs: dict[int, int] = {}

    def need(size: int) -> int:
        if size not in needs:
            tree = resize((inputs, options), axis, old, size, on_meta=on_meta)
            kwargs = dict(tree[1])
            if axis == 0:
                kwargs["batch_size"] = size
            result = estimate_training_memory(model, *tree[0], **kwargs)
            results[size] = result
            needs[size] = result.peak_bytes + (result.allowance.total_bytes if allowance else 0)
        return needs[size]

    slope = need(2) - need(1)
    intercept = need(1) - slope
    if need(1) > device_bytes:
        return BatchFit(0, axis, device_bytes, None, needs[1], intercept, slope, dict(needs))
    lo, hi = 1, None
    probe = max_size if slope <= 0 else (device_bytes - intercept) // slope  # the affine guess
    for step in range(64):
        if hi is not None and hi - lo <= 1:
            break
        probe = min(max(probe, lo + 1), max_size if hi is None else hi - 1)
        if need(probe) <= device_bytes:
            lo = probe
            if lo >= max_size:
                break
        else:
            hi = probe
        if hi is None:
            probe = 2 * lo
        elif step % 2 == 0:  # the chord through lo and hi: for a convex peak it never overshoots
            probe = lo + (device_bytes - needs[lo]) * (hi - lo) // max(needs[hi] - needs[lo], 1)
            probe = lo + 1 if probe <= lo else probe
        else:  # bisection every other step, so that a stalled chord still converges
            probe = (lo + hi) // 2
    return BatchFit(lo, axis, device_bytes, results[lo], needs.get(lo + 1) if hi is not None else None,
                    intercept, slope, dict(sorted(needs.items())))
