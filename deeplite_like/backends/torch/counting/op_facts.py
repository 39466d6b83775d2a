"""Per-op facts the counting mode needs at every call, cached for the process by op identity.

``op_info(func)`` tells an op's name, the arguments its schema declares written
(``Tensor(a!)``: ``add_``, ``clamp_``, ``copy_``, ``out=``), the C++ callable to run it, and
whether ``meta_replay.MetaOutputs`` may replay its outputs (``NEW``: it returns new tensors;
``IN_PLACE``: it writes ``self`` only and returns it; ``POINTWISE_IN_PLACE``: an in-place
pointwise op whose only tensor is ``self``, such as ``relu_`` or ``hardtanh_``, which cannot
change the metadata of ``self``). None of this changes while the process
runs; the formula look-up, which may, is the counting mode's (once per count).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from .registry import op_name

__all__ = ["IN_PLACE", "NEW", "POINTWISE_IN_PLACE", "holds_tensors", "op_info"]

# Keyed by ``id(op)``: ``OpOverload.__hash__`` is a Python method, too slow for once per op call.
# The entry holds the op, so the id cannot be reused while the entry lives.
_OP_INFO: dict[int, tuple[str, tuple, Callable, int, Any]] = {}
NEW, IN_PLACE, POINTWISE_IN_PLACE = 1, 2, 3  # ops ``MetaOutputs`` may replay (see the module docstring)


def holds_tensors(argument: Any) -> bool:
    """Whether a schema argument's type is or contains a Tensor (``Tensor``, ``Tensor?``, ``Tensor[]``)."""
    kind = argument.type
    while kind is not None and not isinstance(kind, torch._C.TensorType):
        contained = kind.containedTypes() if hasattr(kind, "containedTypes") else []
        kind = contained[0] if contained else None
    return kind is not None


def op_info(func: Any) -> tuple[str, tuple, Callable, int, Any]:
    """``(name, written, run, replay, op)`` of an op: its name, the ``(index, name)`` of each
    argument its schema declares written (``Tensor(a!)``), what to call to run it, whether
    ``MetaOutputs`` may replay it (0, ``NEW`` or ``IN_PLACE``), and the op itself."""
    info = _OP_INFO.get(id(func))
    if info is None or info[4] is not func:
        schema = getattr(func, "_schema", None)
        arguments = schema.arguments if schema is not None else ()
        written = tuple((i, arg.name) for i, arg in enumerate(arguments)
                        if arg.alias_info is not None and arg.alias_info.is_write)
        returns = schema.returns if schema is not None else ()
        replay = 0
        if returns and all(isinstance(r.type, torch._C.TensorType) for r in returns):
            if not written and all(r.alias_info is None for r in returns):
                replay = NEW
            elif (len(returns) == 1 and [i for i, _ in written] == [0] and returns[0].alias_info is not None
                  and returns[0].alias_info.before_set == arguments[0].alias_info.before_set):
                replay = IN_PLACE
                if torch.Tag.pointwise in getattr(func, "tags", ()) and \
                        not any(holds_tensors(arg) for arg in arguments[1:]):
                    replay = POINTWISE_IN_PLACE
        # A plain OpOverload's __call__ only forwards to its C++ ``_op``: call that directly.
        run = func._op if type(func) is torch._ops.OpOverload else func
        info = _OP_INFO[id(func)] = (op_name(func), written, run, replay, func)
    return info
