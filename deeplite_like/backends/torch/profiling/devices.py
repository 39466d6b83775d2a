"""Which devices hold a model, and waiting for them (timed intervals synchronise on CUDA)."""
from __future__ import annotations

import itertools
from typing import Callable

import torch
from torch import nn

__all__ = ["device_name", "no_sync", "synchronizer"]


def no_sync() -> None:
    """Nothing to wait for: the synchronizer of a model on the CPU or meta."""


def synchronizer(model: nn.Module) -> Callable[[], None]:
    """A function that waits for every CUDA device holding the model; ``no_sync`` on CPU and meta."""
    devices = sorted({t.device.index or 0 for t in itertools.chain(model.parameters(), model.buffers())
                      if t.device.type == "cuda"})
    if not devices:
        return no_sync

    def sync() -> None:
        for index in devices:
            torch.cuda.synchronize(index)

    return sync


def device_name(model: nn.Module) -> str:
    devices = {str(t.device) for t in itertools.chain(model.parameters(), model.buffers())}
    if not devices:
        return "cpu"
    return devices.pop() if len(devices) == 1 else "several: " + ", ".join(sorted(devices))
