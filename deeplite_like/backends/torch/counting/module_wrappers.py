"""Per-class forward dispatchers, scoped to the thread that counts and to the modules it counts.

``CountingMode.attach`` gives the *class* of each of the model's modules a dispatching
``forward`` (``type(module).forward``, removed by ``detach``); nothing is stored on the module
instances. The dispatcher looks up the mode counting in *this thread*
(``counting_thread.mode``) and hands the call to it; the mode counts the call only if the module
is one it attached (by identity). Other threads, other instances of the same class, and
instances of subclasses go straight to the original ``forward``, and two threads may count the
same model at once.

Why on the class: a wrapper stored in the instance's ``__dict__`` is what ``copy.deepcopy`` and
``pickle`` copy. A deep copy made inside a counted forward (an EMA, a best-model snapshot) would
get a ``forward`` bound to the *original* module, and ``torch.save(model)`` would fail on the
local function. The class is copied and pickled by reference: a copy is a plain copy of the
user's module, whose ``forward`` runs on its own weights (and is not counted as one of the
model's modules, whose identities it does not share).

We chose wrappers over ``register_forward_pre_hook``/``register_forward_hook`` for speed and
scope: a module with hooks leaves ``nn.Module.__call__``'s fast path, registering, running and
removing two hooks per module per count cost more than the dispatchers do, per-module hooks are
copied with the module, and hooks fire for every thread that calls the module. A module whose
``forward`` cannot be replaced on its class (``can_wrap``: a ``property`` or another non-function
``forward``, or a ``forward`` stored on the instance itself) is followed by the mode through
*global* module hooks instead (``torch.nn.modules.module.register_module_forward_hook``), which
live on no instance either. ``nn.TransformerEncoderLayer`` runs one fused kernel unless it sees a
hook or the fast path is off; while such a module is counted, the fused fast path is turned off
(``fastpath.unfused``) so that its children run, and are attributed.
"""
from __future__ import annotations

import functools
import threading
import types
from typing import Any, Callable

import torch

__all__ = ["FUSED_UNLESS_HOOKED", "can_wrap", "counting_thread", "unwrap_classes", "wrap_classes"]

# One dispatcher per class, shared by every count in progress (in any thread): installed by the
# first ``attach`` that needs it, removed by the last ``detach``.
counting_thread = threading.local()  # .mode: the CountingMode attached in this thread, if any
_lock = threading.Lock()
_wrapped: dict[type, list] = {}  # class -> [dispatcher, the class's own forward before or _ABSENT, users]
_ABSENT = object()
_wrappable: dict[type, bool] = {}  # class -> its forward is a plain function

# Modules that skip their children's forwards (one fused kernel) unless they see a forward hook
# on themselves or a child, or the fused fast path is off: counted with the fast path off.
FUSED_UNLESS_HOOKED: tuple[type, ...] = (torch.nn.TransformerEncoderLayer,)


def _class_forward(cls: type) -> Any:
    """The ``forward`` the class's instances run: the first in its MRO, looking through our dispatchers."""
    for klass in cls.__mro__:
        if "forward" in klass.__dict__:
            attribute = klass.__dict__["forward"]
            return getattr(attribute, "__counted_original__", attribute)
    return None


def can_wrap(module: torch.nn.Module) -> bool:
    """True when the module runs its class's ``forward`` and that is a plain function (not a property)."""
    if "forward" in module.__dict__:  # the instance's own forward shadows anything on the class
        return False
    cls = type(module)
    known = _wrappable.get(cls)
    if known is None:
        known = _wrappable[cls] = isinstance(_class_forward(cls), types.FunctionType)
    return known


def _make_dispatcher(cls: type, forward: Callable) -> Callable:
    @functools.wraps(forward)  # inspect.signature(module.forward) still tells the truth
    def counted_forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        mode = getattr(counting_thread, "mode", None)
        if mode is None or type(self) is not cls:  # (a subclass reaching it through super(): not a new call)
            return forward(self, *args, **kwargs)
        return mode._call(self, forward.__get__(self, cls), args, kwargs)

    counted_forward.__counted_original__ = forward
    return counted_forward


def wrap_classes(classes: list[type], wrapped: list[type]) -> None:
    """Give each class a dispatching forward (or count one more user of it); append it to ``wrapped``."""
    with _lock:
        for cls in classes:
            entry = _wrapped.get(cls)
            if entry is None:
                dispatcher = _make_dispatcher(cls, _class_forward(cls))
                _wrapped[cls] = [dispatcher, cls.__dict__.get("forward", _ABSENT), 1]
                cls.forward = dispatcher
            else:
                entry[2] += 1
            wrapped.append(cls)


def unwrap_classes(classes: list[type]) -> None:
    """Undo ``wrap_classes``: the last user of a dispatcher puts back what the class had before."""
    with _lock:
        for cls in classes:
            entry = _wrapped.get(cls)
            if entry is None:
                continue
            entry[2] -= 1
            if entry[2]:
                continue
            del _wrapped[cls]
            if cls.__dict__.get("forward") is entry[0]:  # else someone replaced it since: leave theirs
                if entry[1] is _ABSENT:
                    delattr(cls, "forward")
                else:
                    cls.forward = entry[1]
