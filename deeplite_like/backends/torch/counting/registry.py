"""The formula table of the torch counting engine.

A formula is a small pure function of one operator call, bound to aten ops by a decorator::

    @register_formula(aten.mm)
    def mm(call: OpCall) -> Cost:
        "(m, k) @ (k, n): m*n*k MACs."
        (m, k), (_, n) = call.args[0].shape, call.args[1].shape
        return Cost.contraction(m * n * k)

The engine (``engine.py``) knows nothing of any particular op: it looks the formula up by the
op's overload (``aten.add.Tensor``) first, then by its packet (``aten.add``). An op found
neither in the formula table nor in the free set is *untracked*.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from deeplite_like.opcount import Cost


@dataclass(frozen=True)
class CountOptions:
    """Counting options a formula may read.

    Attributes:
        causal_half: count causal attention as half of dense (default: dense, as it runs).
    """

    causal_half: bool = False


@dataclass(slots=True)
class OpCall:
    """One operator call as a formula sees it: the op, its arguments and its output.

    Tensors may be real, meta or fake; formulas read only shapes, dtypes and scalars.
    """

    op: Any  # torch._ops.OpOverload
    args: tuple
    kwargs: dict
    out: Any
    options: CountOptions = field(default_factory=CountOptions)

    @property
    def name(self) -> str:
        return op_name(self.op)


Formula = Callable[[OpCall], Cost]

_FORMULAS: dict[Any, Formula] = {}
_FREE: set[Any] = set()


def op_name(op: Any) -> str:
    """``aten.addmm`` for ``aten.addmm.default``: the packet's name, as users read it."""
    packet = getattr(op, "overloadpacket", op)
    name = getattr(packet, "__name__", None) or str(packet)
    namespace = getattr(packet, "__module__", "") or ""
    if namespace.startswith("torch._ops."):
        return f"{namespace.rsplit('.', 1)[-1]}.{name}"
    return str(packet) if "." in str(packet) else name


def _as_key(op: Any) -> Any:
    if isinstance(op, str):  # "mylib::myop" or "mylib::myop.overload"
        ns, _, rest = op.partition("::")
        packet_name, _, overload = rest.partition(".")
        packet = getattr(getattr(torch.ops, ns), packet_name)
        return getattr(packet, overload) if overload else packet
    return op


def register_formula(*ops: Any, override: bool = False) -> Callable[[Formula], Formula]:
    """Bind a formula to one or more ops (packets, overloads or ``'ns::name'`` strings).

    Registering an op that already has a formula raises ``ValueError`` unless
    ``override=True`` (custom formulas for built-in ops must be deliberate).
    """
    keys = [_as_key(op) for op in ops]

    def decorator(fn: Formula) -> Formula:
        for key in keys:
            if key in _FORMULAS and not override and _FORMULAS[key] is not fn:
                raise ValueError(f"{op_name(key)} already has the formula {_FORMULAS[key].__qualname__}; "
                                 "pass override=True to replace it")
        for key in keys:
            _FORMULAS[key] = fn
            _FREE.discard(key)
        return fn

    return decorator


def register_free(*ops: Any) -> None:
    """Declare ops that cost no arithmetic (views, copies, indexing, casts, comparisons)."""
    for op in ops:
        _FREE.add(_as_key(op))


def unregister(*ops: Any) -> None:
    """Remove formulas or free marks (for user code and tests that register temporarily)."""
    for op in ops:
        key = _as_key(op)
        _FORMULAS.pop(key, None)
        _FREE.discard(key)


def lookup(op: Any) -> Formula | None:
    """The formula for an op overload: by overload first, then by packet."""
    formula = _FORMULAS.get(op)
    if formula is None:
        formula = _FORMULAS.get(getattr(op, "overloadpacket", None))
    return formula


def is_free(op: Any) -> bool:
    return op in _FREE or getattr(op, "overloadpacket", None) in _FREE
