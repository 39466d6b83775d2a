"""``ProfileRun``: one call of the entry point (and its backward), on the real model or on meta copies.

Also the small pieces around it: the loss to differentiate, the ``ForwardError`` that says where
the forward failed, and a synchronised timer.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch
from torch import nn

from ..counting.engine import backward_pass, grad_inputs, non_leaf_inputs, to_meta
from ..state import swapped_tensors
from ..counting.meta_values import MetaValues
from ..errors import ForwardError
from ..run_tensors import loss_of
from ..input_failures import fixed_batch_hint
from .entry_point import call_entry
from .phases import PhaseCountingMode

__all__ = ["ProfileRun", "forward_error", "timed"]


def forward_error(model: nn.Module, exc: Exception, mode: PhaseCountingMode, built: bool,
                   func_name: str) -> ForwardError:
    frame = mode.failed_frame(exc)
    where = ("outside any module call" if frame is None else
             f"in {'the root module' if frame.name == '' else repr(frame.name)} ({type(frame.module).__name__})")
    hint = (" The input was one float tensor built from input_shape: a model that takes integer ids or several "
            "inputs needs args=/kwargs=." if built else "")
    hint = fixed_batch_hint(exc, mode.result.batch_size) or hint
    return ForwardError(f"{type(model).__name__}.{func_name} failed {where}: {type(exc).__name__}: {exc}.{hint}")


class ProfileRun:
    """Runs the entry point (and its backward) on the real model or, for meta, on meta copies."""

    def __init__(self, model: nn.Module, func_name: str, args: tuple, kwargs: dict, backward: bool,
                 on_meta: bool, loss_fn: Callable | None, values: MetaValues | None = None) -> None:
        self.model, self.func_name, self.loss_fn = model, func_name, loss_fn
        self.backward, self.on_meta = backward, on_meta
        self.copies: dict[int, torch.Tensor] = {}  # on meta: id(original) -> meta copy (``swapped_tensors``)
        non_leaves = non_leaf_inputs(args, kwargs)
        if on_meta:
            _, self.copies, args, kwargs = to_meta(model, args, kwargs, values)
        self.input_leaves: list[torch.Tensor] = []
        if backward:  # fresh leaves: backward stops at the inputs; the caller's tensors get no .grad
            args, kwargs, self.input_leaves = grad_inputs(args, kwargs, non_leaves)
        self.args, self.kwargs = args, kwargs
        self.mode: PhaseCountingMode | None = None  # set for the counted call

    def forward(self) -> Any:
        with torch.enable_grad() if self.backward else torch.no_grad():
            if self.on_meta:
                with swapped_tensors(self.model, self.copies):  # (factories make meta tensors: MetaValues)
                    return call_entry(self.model, self.func_name, self.args, self.kwargs, self.mode)
            return call_entry(self.model, self.func_name, self.args, self.kwargs, self.mode)

    def loss(self, output: Any) -> torch.Tensor:
        with torch.enable_grad():
            return loss_of(output, self.loss_fn)

    def run_backward(self, loss: torch.Tensor) -> None:
        params = [self.copies.get(id(p), p) for p in self.model.parameters()]
        leaves = [p for p in params if p.requires_grad] + self.input_leaves
        for p in self.model.parameters():
            p.grad = None
        backward_pass(loss, leaves, f"the backward pass of {type(self.model).__name__} failed")


def timed(fn: Callable[[], Any], sync: Callable[[], None]) -> tuple[Any, float]:
    sync()
    start = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - start
