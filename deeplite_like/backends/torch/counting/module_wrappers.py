"""Per-module forward wrappers, scoped to the thread that counts.

``CountingMode.attach`` wraps the ``forward`` of each of the model's modules (an entry in the
instance's ``__dict__``, removed by ``detach``). The wrapper looks up the mode counting in
*this thread* (``counting_thread.mode``): other threads running the same modules go straight
to the original ``forward``, and two threads may count the same model at once.

We chose wrappers over ``register_forward_pre_hook``/``register_forward_hook`` for speed and
scope: a module with hooks leaves ``nn.Module.__call__``'s fast path, registering, running and
removing two hooks (``with_kwargs``, ``always_call``) per module per count cost more than the
wrappers do, and hooks fire for every thread that calls the module. A module whose class makes
``forward`` a data descriptor (a ``property``) cannot be wrapped (``can_wrap``): the mode gives
it the two hooks instead. ``nn.TransformerEncoderLayer`` runs one fused kernel unless it sees
a hook; it gets a no-op hook (``keep_unfused``) so that its children run, and are attributed.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import torch

__all__ = ["FUSED_UNLESS_HOOKED", "can_wrap", "counting_thread", "keep_unfused", "unwrap_forwards",
           "wrap_forwards"]

# One wrapper per module, shared by every count in progress (in any thread): installed by the
# first ``attach`` that needs it, removed by the last ``detach``. It calls the original forward
# directly unless this thread's counting mode knows the module.
counting_thread = threading.local()  # .mode: the CountingMode attached in this thread, if any
_lock = threading.Lock()
_wrapped: dict[int, list] = {}  # id(module) -> [module, wrapper, instance forward before or _ABSENT, users]
_ABSENT = object()
_wrappable: dict[type, bool] = {}  # class -> forward is not a data descriptor

# Modules that skip their children's forwards (one fused kernel) unless they see a forward hook
# on themselves or a child: torch's own contract, so that hooks see every submodule. The
# wrappers are not hooks, so each of these gets a no-op pre-hook for the count: the unfused
# path runs and its children are attributed (the fused path counts the same in total).
FUSED_UNLESS_HOOKED: tuple[type, ...] = (torch.nn.TransformerEncoderLayer,)


def keep_unfused(module: torch.nn.Module, args: tuple) -> None:
    return None


def can_wrap(cls: type) -> bool:
    """False when the class makes ``forward`` a data descriptor: an instance attribute cannot shadow it."""
    known = _wrappable.get(cls)
    if known is None:
        for klass in cls.__mro__:
            if "forward" in klass.__dict__:
                attribute = klass.__dict__["forward"]
                known = not (hasattr(type(attribute), "__set__") or hasattr(type(attribute), "__delete__"))
                break
        else:
            known = True
        _wrappable[cls] = known
    return known


def _make_wrapper(module: torch.nn.Module, forward: Callable) -> Callable:
    def counted_forward(*args: Any, **kwargs: Any) -> Any:
        mode = getattr(counting_thread, "mode", None)
        if mode is None:
            return forward(*args, **kwargs)
        return mode._call(module, forward, args, kwargs)

    counted_forward.__wrapped__ = forward  # inspect.signature(module.forward) still tells the truth
    return counted_forward


def wrap_forwards(modules: list[torch.nn.Module], wrapped: list[torch.nn.Module]) -> None:
    """Wrap each module's forward (or count one more user of its wrapper); append it to ``wrapped``."""
    with _lock:
        for module in modules:
            entry = _wrapped.get(id(module))
            if entry is None:
                wrapper = _make_wrapper(module, module.forward)
                _wrapped[id(module)] = [module, wrapper, module.__dict__.get("forward", _ABSENT), 1]
                module.__dict__["forward"] = wrapper
            else:
                entry[3] += 1
            wrapped.append(module)


def unwrap_forwards(modules: list[torch.nn.Module]) -> None:
    """Undo ``wrap_forwards``: the last user of a wrapper puts back what the instance had before."""
    with _lock:
        for module in modules:
            entry = _wrapped.get(id(module))
            if entry is None or entry[0] is not module:
                continue
            entry[3] -= 1
            if entry[3]:
                continue
            del _wrapped[id(module)]
            if module.__dict__.get("forward") is entry[1]:  # else the forward replaced it: leave that
                if entry[2] is _ABSENT:
                    del module.__dict__["forward"]
                else:
                    module.__dict__["forward"] = entry[2]
