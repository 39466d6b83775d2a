"""PyTorch's fused transformer fast path, turned off for the duration of a measurement.

``nn.TransformerEncoderLayer`` (and ``nn.MultiheadAttention``) run one fused kernel in
inference unless the fast path is off (``torch.backends.mha.set_fastpath_enabled``): counting
turns it off so that the layer's children run and are attributed, memory so that the
activations are seen. The switch is global, so concurrent measurements (in several threads)
share it: the first to enter turns it off, the last to leave puts back what it was.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import torch

__all__ = ["unfused"]

_lock = threading.Lock()
_users = [0]
_before: list[bool] = []  # the setting found by the first user


@contextlib.contextmanager
def unfused() -> Iterator[None]:
    """Turn the fused MHA / encoder-layer fast path off inside the block (restored by the last user)."""
    mha = getattr(torch.backends, "mha", None)  # absent before torch 2.2: nothing to switch
    if mha is None:
        yield
        return
    with _lock:
        if _users[0] == 0:
            _before[:] = [mha.get_fastpath_enabled()]
            mha.set_fastpath_enabled(False)
        _users[0] += 1
    try:
        yield
    finally:
        with _lock:
            _users[0] -= 1
            if _users[0] == 0:
                mha.set_fastpath_enabled(_before[0])
