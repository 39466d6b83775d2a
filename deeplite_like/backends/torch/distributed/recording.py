"""What the counting mode does under ``torch.distributed``: count each rank's local work, log collectives.

DTensor
    A ``TorchDispatchMode`` sees an operator on ``DTensor`` arguments first, as the *logical*
    op on global shapes (``aten.addmm`` of the whole layer). Counting that would give every
    rank the whole job's FLOPs. ``subclass_dispatch`` has DTensor run it instead: DTensor
    propagates the sharding, redistributes (functional collectives) and runs the op on its
    local shards; those local ops and collectives reach the mode again as plain tensors and
    are counted. The sharding propagation runs the op on ``FakeTensor``\\ s to learn the output
    shape; inside a DTensor op those fake ops run uncounted (the fake mode below runs them).

    The check costs plain tensors nothing beyond ``if types:`` in the mode: an operator on
    plain tensors has an empty ``types``. ``torch.distributed.tensor`` is never imported here:
    when it is not loaded, no DTensor exists.

Collectives
    ``CommLog.formula`` is the formula the mode uses for a collective operator: 0 MACs and 0
    FLOPs, and one ``CommStats`` row per (operator, group, module, phase) that adds the call's
    payload and bus bytes (``deeplite_like.communication``). A collective belongs to the module
    whose call issued it, hooks included (``issuing_module``): tensor parallel's output
    all-reduce runs in a forward hook of the row-wise layer, FSDP2's all-gather in a pre-hook of
    the unit. In backward, where no module code runs, it belongs to the module whose forward
    created the autograd node running (the count's backward attribution); DDP's bucket
    all-reduces run in ``AccumulateGrad`` hooks, which belong to the root.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import torch

from deeplite_like.communication import CommStats, bus_bytes
from deeplite_like.opcount import Cost

from .collectives import COLLECTIVES, FREE_COMM_OPS, collective_call

__all__ = ["PLAIN", "CommLog", "issuing_module", "subclass_dispatch"]

PLAIN = object()  # ``subclass_dispatch``: not a distributed subclass, count the op as usual


def _class(module: str, name: str) -> type | None:
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def subclass_dispatch(mode: Any, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    """Run an op whose arguments hold tensor subclasses (``types``) so that ``mode`` counts local work.

    Returns ``PLAIN`` when the op is to be counted as usual, else the op's result (or
    ``NotImplemented``, which hands it to the subclass). ``mode._in_dtensor`` is True while a
    DTensor op runs.
    """
    dtensor = _class("torch.distributed.tensor._api", "DTensor")
    if dtensor is not None and any(issubclass(t, dtensor) for t in types):
        if mode._in_dtensor:  # the second arrival, with the mode pushed again below: DTensor runs it
            return NotImplemented
        mode._in_dtensor = True
        try:
            with mode:  # back on the stack, so the local ops and collectives DTensor runs are seen
                return func(*args, **(kwargs or {}))
        finally:
            mode._in_dtensor = False
    if mode._in_dtensor:
        fake = _class("torch._subclasses.fake_tensor", "FakeTensor")
        if fake is not None and any(issubclass(t, fake) for t in types):
            return func(*args, **(kwargs or {}))  # DTensor's sharding propagation: shapes only, run uncounted
    return PLAIN


def issuing_module(names: dict[int, str], default: str) -> str:
    """The qualified name of the innermost module call on this thread's Python stack, else ``default``.

    A module call here is ``nn.Module._call_impl``: the module's forward *and its hooks*, where
    tensor parallel redistributes inputs and outputs and FSDP2 gathers parameters. Only modules
    in ``names`` (``id(module) -> name``) count. Walking the stack costs microseconds, paid per
    collective call only.
    """
    code = torch.nn.Module._call_impl.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            name = names.get(id(frame.f_locals.get("self")))
            if name is not None:
                return name
        frame = frame.f_back
    return default


class CommLog:
    """``CommStats`` rows of one count, filled by the formulas ``formula`` makes.

    ``where()`` tells the module the op runs in (qualified name) and the phase.
    """

    def __init__(self, where: Callable[[], tuple[str, str]]):
        self._where = where
        self.rows: dict[tuple[str, str, str, str], CommStats] = {}

    def formula(self, name: str, default: Any) -> Any:
        """The formula of operator ``name`` if it is a collective (logs the call, costs 0 FLOPs),
        ``None`` (free) for a wait on one, else ``default``."""
        if name in FREE_COMM_OPS:
            return None
        collective = COLLECTIVES.get(name)
        if collective is None:
            return default

        def communication(call: Any) -> Cost:
            group, size, payload = collective_call(collective, call.op, call.args, call.kwargs)
            module, phase = self._where()
            key = (name, group, module, phase)
            row = self.rows.get(key)
            if row is None:
                row = self.rows[key] = CommStats(name, collective.kind, group, size, module, phase)
            row.calls += 1
            row.payload_bytes += payload
            row.bus_bytes += bus_bytes(collective.kind, payload, size)
            return Cost(0, 0)

        communication.__qualname__ = f"communication[{name}]"
        return communication
