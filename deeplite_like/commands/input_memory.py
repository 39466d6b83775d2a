"""Refusing inputs too large for this machine before they are allocated.

``--input-shape 100000,3,224,224`` or ``--batch-size 1000000000`` would ask for more memory
than the machine has and die in the allocator (a bare ``MemoryError``, or the kernel's OOM
killer). The input tensors' size is known before anything is allocated: bytes = elements x
bytes per element. Profiling needs the inputs and at least as much again for the activations,
so inputs above half of the memory available here are refused, with the estimate.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from deeplite_like.argument_checks import MEMORY_SHARE as SHARE
from deeplite_like.argument_checks import available_memory
from deeplite_like.commands.errors import UsageError

__all__ = ["SHARE", "available_memory", "check_input_bytes", "sample_bytes", "shape_bytes"]

_HINT = ("use a smaller batch or shape: MACs and FLOPs grow linearly with the batch size, so profile a batch "
         "that fits and scale the counts")


def shape_bytes(shape: Iterable[int], itemsize: int) -> int:
    """Bytes of a dense tensor of ``shape`` with ``itemsize`` bytes per element (exact, no overflow)."""
    return math.prod(shape) * itemsize


def check_input_bytes(option: str, what: str, nbytes: int, available: int | None = None) -> None:
    """Raise a ``UsageError`` naming ``option`` when ``nbytes`` of inputs exceed ``SHARE`` of the memory here.

    ``what`` says how the estimate was made (``'one 100000x3x224x224 float32 tensor'``);
    ``available`` defaults to ``available_memory()`` (``None``: unknown, nothing is refused).
    """
    from deeplite_like.units import format_bytes

    available = available_memory() if available is None else available
    if available is None or nbytes <= SHARE * available:
        return
    raise UsageError(f"{option}: the inputs alone would take {format_bytes(nbytes)} ({what}), more than half of the "
                     f"{format_bytes(available)} of memory available here; refused before allocating them", _HINT)


def sample_bytes(inputs: tuple[tuple, dict]) -> int:
    """Bytes per sample of batched inputs: each array's bytes divided by its first (batch) axis."""
    total = 0
    for leaf in _leaves(inputs):
        shape = tuple(getattr(leaf, "shape", ()))
        if not shape or shape[0] == 0:
            continue
        nbytes = getattr(leaf, "nbytes", None)  # numpy arrays (and torch >= 2.1 tensors)
        if nbytes is None and hasattr(leaf, "element_size"):
            nbytes = leaf.element_size() * leaf.numel()
        if nbytes is not None:
            total += int(nbytes) // int(shape[0])
    return total


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value
