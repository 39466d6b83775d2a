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
from typing import Any, Callable, Iterator

import torch

from deeplite_like.safety import checkpoint, protected, uninterruptible

__all__ = ["eager_flex_attention", "unfused"]

class _SharedSwitch:
    """A process-wide setting several measurements (threads) change at once: the first to enter sets
    it, the last to leave puts back what the first found."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._before: Any = None

    @contextlib.contextmanager
    @protected
    def held(self, get: Callable[[], Any], set_: Callable[[Any], None], value: Any) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._before = get()
                set_(value)
            self._users += 1
        try:
            checkpoint()  # (an interrupt held during the set-up is raised here)
            yield
        finally:
            with uninterruptible(), self._lock:
                self._users -= 1
                if self._users == 0:
                    set_(self._before)


_fast_path, _flex_compile = _SharedSwitch(), _SharedSwitch()


@contextlib.contextmanager
@protected
def unfused() -> Iterator[None]:
    """Turn the fused MHA / encoder-layer fast path off inside the block (restored by the last user)."""
    mha = getattr(torch.backends, "mha", None)  # absent before torch 2.2: nothing to switch
    if mha is None:
        yield
        return
    with _fast_path.held(mha.get_fastpath_enabled, mha.set_fastpath_enabled, False):
        yield


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
    name = "_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG"
    if flex is None or not hasattr(flex, name):
        yield
        return
    with _flex_compile.held(lambda: getattr(flex, name), lambda value: setattr(flex, name, value), True):
        yield
