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


# True once a formula or free mark is kept by name (its op was not loaded when registered).
_by_name = [False]


def _as_key(op: Any) -> Any:
    """The table key of an op: the op itself, or for ``'ns::name[.overload]'`` the op it names.

    A name whose op is not loaded (yet) is kept as the string, outside ``aten``/``prims``:
    ``'torchvision::nms'`` registers before (or without) ``import torchvision``, and matches
    the op by its schema name when it runs.
    """
    if isinstance(op, str):  # "mylib::myop" or "mylib::myop.overload"
        ns, _, rest = op.partition("::")
        packet_name, _, overload = rest.partition(".")
        try:
            packet = getattr(getattr(torch.ops, ns), packet_name)
            return getattr(packet, overload) if overload else packet
        except (AttributeError, RuntimeError):
            if ns in ("aten", "prims"):
                raise
            _by_name[0] = True
            return op
    return op


def _schema_names(op: Any) -> tuple[str, ...]:
    """``('ns::name.overload', 'ns::name')`` of an op overload, for formulas kept by name."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return ()
    overload = schema.overload_name
    return (f"{schema.name}.{overload}", schema.name) if overload else (schema.name,)


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
    if formula is None and _by_name[0]:
        for name in _schema_names(op):
            formula = _FORMULAS.get(name)
            if formula is not None:
                break
    return formula


def is_free(op: Any) -> bool:
    if op in _FREE or getattr(op, "overloadpacket", None) in _FREE:
        return True
    return _by_name[0] and any(name in _FREE for name in _schema_names(op))
