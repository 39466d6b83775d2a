"""Keras on torch: a dispatch mode pricing each aten op with the torch backend's formula table.

Used by ``own_ops`` (a layer's own arithmetic); imported only when Keras runs on torch.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from deeplite_like.backends.torch.counting import formulas as _formulas  # noqa: F401  (fills the table)
from deeplite_like.backends.torch.counting.registry import CountOptions, OpCall, is_free, lookup, op_name
from deeplite_like.backends.torch.counting.recorder import LightDispatchMode
from deeplite_like.errors import FormulaError

__all__ = ["OpPricingMode", "aten_cost"]


def aten_cost(func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[int, int] | None:
    """``(macs, flops)`` of one aten op by the torch formula table; ``(0, 0)`` free; ``None`` unknown."""
    formula = lookup(func)
    if formula is None:
        return (0, 0) if is_free(func) else None
    try:
        macs, flops = formula(OpCall(func, args, kwargs, out, _OPTIONS))
    except Exception as exc:
        raise FormulaError(f"the torch formula {getattr(formula, '__qualname__', formula)!r} for {op_name(func)} "
                           f"failed inside a Keras layer's own call: {type(exc).__name__}: {exc}") from exc
    return int(macs), int(flops)


_OPTIONS = CountOptions()


class OpPricingMode(LightDispatchMode):
    """Calls ``sink(name, (macs, flops))`` for each aten op run (``(0, 0)`` free, ``None`` unknown).

    ``ledger``: a PyTorch-backend ``memory.StorageLedger`` told of every op's outputs (peak memory
    from the same forward). A ``LightDispatchMode``: no TorchDynamo import unless it is loaded.
    """

    def __init__(self, sink: Callable[[str, tuple[int, int] | None], None], ledger: Any = None) -> None:
        super().__init__()
        self._sink = sink
        self.ledger = ledger

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if not self._dynamo_safe and "torch._dynamo" in sys.modules:  # compiled code may run from now on
            self.switch_if_dynamo_loaded()
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.ledger is not None:
            self.ledger.count(func, out)
        self._sink(op_name(func), aten_cost(func, args, kwargs, out))
        return out
