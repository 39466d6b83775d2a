"""PyTorch's fused transformer fast path, turned off for the duration of a measurement.

``nn.TransformerEncoderLayer`` (and ``nn.MultiheadAttention``) run one fused kernel in
inference unless the fast path is off (``torch.backends.mha.set_fastpath_enabled``): counting
turns it off so that the layer's children run and are attributed, memory so that the
activations are seen. The switch is global, so concurrent measurements (in several threads)
share it: the first to enter turns it off, the last to leave puts back what it was.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Iterator

import torch

from deeplite_like.safety import checkpoint, protected, uninterruptible

__all__ = ["eager_flex_attention", "unfused"]

_lock = threading.Lock()
_users = [0]
_before: list[bool] = []  # the setting found by the first user


@contextlib.contextmanager
@protected
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
        checkpoint()  # (an interrupt held during the set-up is raised here)
        yield
    finally:
        with uninterruptible(), _lock:
            _users[0] -= 1
            if _users[0] == 0:
                mha.set_fastpath_enabled(_before[0])


_flex_lock = threading.Lock()
_flex_users = [0]
_flex_before: list[bool] = []


@contextlib.contextmanager
@protected
def eager_flex_attention() -> Iterator[None]:
    """Run ``flex_attention`` without its internal ``torch.compile`` inside the block (restored by the last user).

    Eager ``flex_attention`` wraps its higher-order operator in ``torch.compile(fullgraph=True)``,
    which TorchDynamo refuses under a dispatch mode such as counting's: the operator is then called
    directly (torch's own ``_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG`` switch), and reaches the counting
    mode. The switch is global, like the fast path's: concurrent counts share it. Only touched when
    torch's FlexAttention module is already imported (a model that uses it imported it).
    """
    flex = sys.modules.get("torch.nn.attention.flex_attention")
    if flex is None or not hasattr(flex, "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG"):
        yield
        return
    with _flex_lock:
        if _flex_users[0] == 0:
            _flex_before[:] = [flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG]
            flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
        _flex_users[0] += 1
    try:
        checkpoint()  # (an interrupt held during the set-up is raised here)
        yield
    finally:
        with uninterruptible(), _flex_lock:
            _flex_users[0] -= 1
            if _flex_users[0] == 0:
                flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = _flex_before[0]
