"""Communication records of a counting pass: which collectives ran, how often, how many bytes.

No framework imports: a backend fills these in (``OpCount.communication``). Bytes follow the
NCCL-tests convention (``docs/distributed.rst``):

* ``payload_bytes``: the size ``S`` of the operation's buffer on one rank, as NCCL-tests calls
  it: the tensor reduced (``all_reduce``), the *gathered* output (``all_gather``: ``n`` x the
  rank's input), the *input* that is scattered (``reduce_scatter``: ``n`` x the rank's
  output), the tensor sent (``broadcast``, ``send``/``recv``), the input (``all_to_all``).
* ``bus_bytes``: what a ring algorithm moves through each rank's link, ``S x factor``:
  ``2(n-1)/n`` for ``all_reduce``; ``(n-1)/n`` for ``all_gather``, ``reduce_scatter``,
  ``all_to_all``, ``gather``, ``scatter``; ``1`` for ``broadcast``, ``reduce`` and point-to-point.
  Rounded down to whole bytes (exact whenever ``S`` is a multiple of ``n``).

Collectives cost 0 FLOPs: the reduction arithmetic of ``all_reduce`` is not counted.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CommStats", "bus_factor", "bus_bytes"]

# op kind -> (numerator, denominator) of the bus-bytes factor as functions of the group size n
_FACTORS = {
    "all_reduce": lambda n: (2 * (n - 1), n),
    "all_gather": lambda n: (n - 1, n),
    "reduce_scatter": lambda n: (n - 1, n),
    "all_to_all": lambda n: (n - 1, n),
    "gather": lambda n: (n - 1, n),
    "scatter": lambda n: (n - 1, n),
    "broadcast": lambda n: (1, 1),
    "reduce": lambda n: (1, 1),
    "p2p": lambda n: (1, 1),
    "barrier": lambda n: (0, 1),
}


def bus_factor(kind: str, group_size: int) -> tuple[int, int]:
    """``(numerator, denominator)`` of the bus-bytes factor of a collective ``kind`` on ``group_size`` ranks."""
    try:
        factor = _FACTORS[kind]
    except KeyError:
        raise ValueError(f"unknown collective kind {kind!r}; expected one of {sorted(_FACTORS)}") from None
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    return factor(group_size)


def bus_bytes(kind: str, payload_bytes: int, group_size: int) -> int:
    """Bus bytes (ints, rounded down) of ``payload_bytes`` moved by a ``kind`` collective on ``group_size`` ranks."""
    num, den = bus_factor(kind, group_size)
    return payload_bytes * num // den


@dataclass
class CommStats:
    """The calls of one collective operator from one module in one phase on one process group.

    Attributes:
        op: operator name (``_c10d_functional.all_reduce``, ``c10d.allreduce_``).
        kind: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``all_to_all``,
            ``reduce``, ``gather``, ``scatter``, ``p2p`` or ``barrier``.
        group: the process group, ``name:description`` (``0:default_pg``; a ``DeviceMesh``
            dimension's reads ``mesh_<dim name>``, e.g. ``1:mesh_tp``); ``""`` when unknown.
        group_size: ranks in that group.
        module: qualified name of the module that issued it (``""``: the root).
        phase: ``forward``, ``loss`` or ``backward``.
        calls: how many times it ran.
        payload_bytes: sum of the payload sizes ``S`` of those calls, per rank, in bytes.
        bus_bytes: sum of their bus bytes, per rank, in bytes.
    """

    op: str
    kind: str
    group: str
    group_size: int
    module: str
    phase: str
    calls: int = 0
    payload_bytes: int = 0
    bus_bytes: int = 0

    def as_dict(self) -> dict:
        return {"op": self.op, "kind": self.kind, "group": self.group, "group_size": self.group_size,
                "module": self.module, "phase": self.phase, "calls": self.calls,
                "payload_bytes": self.payload_bytes, "bus_bytes": self.bus_bytes}
