"""Forward time per module (``ModuleTimer``) and optimizer-step time (``StepTimer``), by global hooks.

Both synchronise with ``sync`` (``devices.synchronizer``) at both ends of every timed interval
when the model is on an accelerator; times are in seconds (``time.perf_counter``).

Both use torch's *global* hooks (``register_module_forward_hook``, ``register_optimizer_step_*``),
not hooks on the model: nothing is stored on the modules, so a copy or pickle of the model made
while timing (an EMA, a checkpoint) is a plain copy. The module hooks see every module of the
process and time only the model's own (by identity); a copy is not timed.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch
from torch import nn
from ..state import add_global_module_hooks, remove_global_module_hooks

from ..run_tensors import batch_size_of
from .phases import PhaseCountingMode, current_autograd_node

__all__ = ["ModuleTimer", "StepTimer"]


class ModuleTimer:
    """Forward wall time per module (or of the root only), and the batch size of the first call."""

    def __init__(self, named_modules: list[tuple[str, nn.Module]], per_module: bool,
                 sync: Callable[[], None]) -> None:
        self._modules = named_modules if per_module else named_modules[:1]
        self._sync = sync
        self._stack: list[tuple[nn.Module, float]] = []
        self._handles: list = []
        self.seconds: dict[str, float] = {}
        self.batch_size: int | None = None
        self._names: dict[int, str] = {}

    def attach(self) -> None:
        for name, module in self._modules:
            if not isinstance(module, torch.jit.ScriptModule):
                self._names[id(module)] = name
        self._handles += add_global_module_hooks(self._pre, self._post)

    def detach(self) -> None:
        remove_global_module_hooks(self._handles)
        self._stack.clear()

    def _pre(self, module: nn.Module, args: tuple) -> None:
        if id(module) not in self._names:  # not one of the model's modules (another model, a copy)
            return None
        if current_autograd_node() is not None:  # a forward re-run by checkpointing, inside backward
            return None
        self._sync()
        self._stack.append((module, time.perf_counter()))
        return None

    def _post(self, module: nn.Module, args: tuple, *kwargs_output: Any) -> None:
        """``(module, args, kwargs, output)``; ``(module, args, None)`` when the forward raised."""
        if not self._stack or self._stack[-1][0] is not module:
            return None
        self._sync()
        _, start = self._stack.pop()
        name = self._names[id(module)]
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        if self.batch_size is None and not self._stack and len(kwargs_output) == 2:
            self.batch_size = batch_size_of(args, kwargs_output[0])  # of the first outermost call
        return None


class StepTimer:
    """Marks optimizer steps for the mode (``in_step``) and times them, via torch.optim's global step hooks."""

    def __init__(self, mode: PhaseCountingMode | None, sync: Callable[[], None]) -> None:
        self._mode = mode
        self._sync = sync
        self._starts: list[float] = []
        self._handles: list = []
        self.seconds = 0.0

    def attach(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        self._handles = [register_optimizer_step_pre_hook(self._pre), register_optimizer_step_post_hook(self._post)]

    def detach(self) -> None:
        while self._handles:
            self._handles.pop().remove()
        if self._mode is not None:
            self._mode.in_step = 0

    def _pre(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        self._sync()
        self._starts.append(time.perf_counter())
        if self._mode is not None:
            self._mode.in_step += 1

    def _post(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        if not self._starts:
            return
        self._sync()
        self.seconds += time.perf_counter() - self._starts.pop()
        if self._mode is not None:
            self._mode.in_step = max(0, self._mode.in_step - 1)
