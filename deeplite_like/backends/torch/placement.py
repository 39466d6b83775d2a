"""Checking a requested torch device before any work: it must exist on this machine."""
from __future__ import annotations

from typing import Any

import torch

from deeplite_like.device import Device, unavailable

__all__ = ["available_devices", "checked_device"]


def available_devices() -> list[str]:
    """Devices torch can run on here: ``'cpu'``, then ``'cuda:0'``, ``'cuda:1'``, ... if any."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ["cpu", *(f"cuda:{i}" for i in range(count))]


def checked_device(device: Any, argument: str = "device") -> torch.device:
    """``device`` (``'cpu'``, ``'gpu'``, ``'cuda:N'``, a ``torch.device``) as a ``torch.device`` present here.

    Raises ``ValueError`` naming ``argument`` and the available devices when it is unknown or
    absent (``'cuda'`` on a machine or a torch build without CUDA).
    """
    try:
        parsed = str(Device.parse(device))
    except ValueError:
        try:
            return torch.device(device)  # another torch device type ('mps', 'xpu'): torch checks it when used
        except (RuntimeError, TypeError):
            raise ValueError(f"{argument}={device!r} is not a device; use 'cpu', 'gpu' or 'cuda', 'cuda:N' "
                             f"(available here: {', '.join(map(repr, available_devices()))})") from None
    target = torch.device(parsed)
    if target.type == "cuda":
        present = available_devices()[1:]
        index = target.index or 0
        if index >= len(present):
            why = ("this torch is built without CUDA" if not torch.backends.cuda.is_built() else
                   "no CUDA device is visible" if not present else f"it has {len(present)} CUDA device(s)")
            raise unavailable(device, available_devices(), argument, "torch", why)
    return target
