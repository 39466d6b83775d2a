"""Activation checkpointing applied to chosen modules of a model for one measured step, then undone."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["checkpointed", "in_forward"]


@contextlib.contextmanager
def checkpointed(model: nn.Module, names: list[str], modes: Callable[[], list[Any]]) -> Iterator[None]:
    """Run each named module's forward under non-reentrant ``torch.utils.checkpoint``; undone on exit.

    As ``checkpoint`` re-enters ``torch.autocast`` for the recomputation, the recomputation in
    backward re-enters the function modes of the step (autocast policy, attention kernel), which
    the autograd engine does not carry into backward: ``modes()`` makes fresh ones.
    """
    modules = dict(model.named_modules())
    patched = []
    try:
        for name in names:
            module = modules[name]
            had = "forward" in module.__dict__
            original = module.forward

            def run(*args: Any, _f: Callable = original, **kwargs: Any) -> Any:
                if in_forward():
                    return _f(*args, **kwargs)
                with contextlib.ExitStack() as stack:  # the recomputation, in backward
                    for mode in modes():
                        stack.enter_context(mode)
                    return _f(*args, **kwargs)

            def forward(*args: Any, _run: Callable = run, **kwargs: Any) -> Any:
                # preserve_rng_state=False: the RNG state copy is host memory and changes no byte here.
                return checkpoint(_run, *args, use_reentrant=False, preserve_rng_state=False, **kwargs)

            module.forward = forward
            patched.append((module, had, original))
        yield
    finally:
        for module, had, original in reversed(patched):
            if had:
                module.forward = original
            else:
                del module.forward


def in_forward() -> bool:
    """Whether this is the forward, as opposed to a recomputation in backward (no autograd node is executing)."""
    return torch._C._current_autograd_node() is None
