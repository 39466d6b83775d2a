"""Explaining a failed run by the inputs the profiler built, not by what the model raised deep inside.

The profiler takes the model inputs from the first batch of a split through a ``ForwardPass``
and resizes them to ``batch_size``. Three mistakes then surface as a framework error far from
their cause, and are re-raised here as one ``ForwardError`` that says what the profiler did and
how to change it (the framework error is chained as the cause):

* a ``torch.export`` program exported with a fixed batch, given another batch size (often the
  profiler's own resizing to ``batch_size``, default 1);
* numpy arrays given to a torch model;
* a tuple or list taken as the one model input (a batch ``((x,), y)`` read by the default
  ``ForwardPass``).

Any other failure propagates unchanged.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import torch
from torch.utils import _pytree as pytree

from deeplite_like.caller import caller
from deeplite_like.data import DataError, ForwardPass, describe, first_batch

from .errors import ForwardError
from .inputs import moved, resolve_split

__all__ = ["TakenInputs", "explained_failures", "fixed_batch", "fixed_batch_hint", "take_inputs"]

# torch.export's guard on a specialised batch: "Guard failed: x.size()[0] == 1"
_GUARD = re.compile(r"Guard failed: (\S+?)\.size\(\)\[0\] == (\d+)")
_DYNAMIC = ("export with a dynamic batch: torch.export.export(model, (x,), "
            "dynamic_shapes=({0: torch.export.Dim('batch')},))")


@dataclass(frozen=True)
class TakenInputs:
    """The model inputs of one run and where they came from (for explaining a failure)."""

    args: tuple
    kwargs: dict
    split: str
    batch: Any = field(repr=False)  # the first batch, as the split yields it
    data_batch_size: int | None  # samples in that batch (None: no tensor with a batch dimension)
    batch_size: int | None  # samples asked for (None: as in the data)
    forward_pass: ForwardPass = field(repr=False)


def take_inputs(data_splits: Mapping[str, Any], forward_pass: ForwardPass, split: str | None,
                batch_size: int | None, device: Any = None) -> TakenInputs:
    """The inputs of the first batch of ``split``, resized to ``batch_size``, moved to ``device`` when given."""
    split = resolve_split(data_splits, split)
    batch = first_batch(data_splits, split)
    args, kwargs = forward_pass(batch, split)
    try:
        data_batch_size = forward_pass.batch_size(batch, split)
    except DataError:
        data_batch_size = None
    if batch_size is not None:
        args, kwargs = forward_pass.resize(args, kwargs, batch_size, split)
    if device is not None:
        args, kwargs = moved(args, kwargs, device)
    return TakenInputs(tuple(args), dict(kwargs), split, batch, data_batch_size, batch_size, forward_pass)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def fixed_batch(exc: BaseException) -> tuple[str, int] | None:
    """``(input name, batch)`` when ``exc`` (or its cause) is a ``torch.export`` guard on a fixed batch."""
    for error in _chain(exc):
        match = _GUARD.search(str(error))
        if match is not None:
            return match.group(1), int(match.group(2))
    return None


def fixed_batch_hint(exc: BaseException, given: int | None) -> str:
    """A sentence for a failure caused by a fixed-batch ``torch.export`` program; ``''`` otherwise."""
    found = fixed_batch(exc)
    if found is None:
        return ""
    name, batch = found
    got = f", but got {given}" if given is not None else ""
    return (f" The model is a torch.export program exported with a fixed batch of {batch} (its input {name!r}){got}: "
            f"pass inputs with {batch} sample(s), or {_DYNAMIC}.")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _explain_fixed_batch(model: torch.nn.Module, taken: TakenInputs, exc: BaseException) -> str | None:
    found = fixed_batch(exc)
    if found is None:
        return None
    name, batch = found
    head = (f"{type(model).__name__} is a torch.export program exported with a fixed batch of {batch} "
            f"(its input {name!r})")
    if taken.batch_size is not None and taken.batch_size != taken.data_batch_size:
        asked = f"batch_size={taken.batch_size}" + (" (the default)" if taken.batch_size == 1 else "")
        return (f"{head}, but {caller('the profiler')} resized the first batch of split {taken.split!r} from "
                f"{taken.data_batch_size} to {taken.batch_size} sample(s) ({asked}). Pass batch_size={batch} to keep "
                f"the exported batch, or {_DYNAMIC}")
    return (f"{head}, but the first batch of split {taken.split!r} has {taken.data_batch_size} sample(s). Give "
            f"batches of {batch}, or {_DYNAMIC}")


def _mentions(exc: BaseException, words: tuple[str, ...]) -> bool:
    return any(isinstance(error, (TypeError, AttributeError)) and any(w in str(error) for w in words)
               for error in _chain(exc))


def _explain_inputs(taken: TakenInputs, exc: BaseException) -> str | None:
    leaves = pytree.tree_leaves((taken.args, taken.kwargs))
    found = f"the ForwardPass {taken.forward_pass!r} took {_shown(taken)} from the batch {describe(taken.batch)} " \
            f"of split {taken.split!r}"
    arrays = any(type(leaf).__module__ == "numpy" for leaf in leaves)
    no_tensor = not any(isinstance(leaf, torch.Tensor) for leaf in leaves)
    if arrays and (no_tensor or _mentions(exc, ("numpy", "ndarray"))):
        return (f"{found}: numpy arrays, but a torch model takes tensors. Make the data yield tensors "
                "(torch.from_numpy, or a DataLoader), or convert them in the ForwardPass: "
                "ForwardPass(extract=lambda b: torch.as_tensor(b[0]))")
    containers = [a for a in taken.args if isinstance(a, (tuple, list)) and a and
                  all(isinstance(t, torch.Tensor) for t in a)]
    if containers and _mentions(exc, ("tuple", "list")):
        return (f"{found}: a {type(containers[0]).__name__} of tensors as one input. If it holds the model's "
                "positional inputs, unpack it: ForwardPass(extract=lambda b: tuple(b[0])); if the model takes "
                "inputs by name, use ForwardPass(inputs=('name', ...)) on dict batches")
    return None


def _shown(taken: TakenInputs) -> str:
    args = ", ".join(describe(a) for a in taken.args)
    kwargs = ", ".join(f"{k}={describe(v)}" for k, v in taken.kwargs.items())
    return f"the model inputs ({', '.join(p for p in (args, kwargs) if p)})"


@contextlib.contextmanager
def explained_failures(model: torch.nn.Module, taken: TakenInputs) -> Iterator[None]:
    """Re-raise a failure of the body caused by how ``taken`` was built as one ``ForwardError`` (see module doc)."""
    try:
        yield
    except Exception as exc:
        why = _explain_fixed_batch(model, taken, exc) or _explain_inputs(taken, exc)
        if why is None:
            raise
        raise ForwardError(f"{why}. (The model raised {_first_line(_innermost(exc))})") from exc


def _innermost(exc: BaseException) -> BaseException:
    *_, last = _chain(exc)
    return last
