"""``EvaluationFunction``: deeplite-profiler's base of evaluation callables (no framework imports).

An evaluation function is called as ``func(model, data_loader, device=None, **options)`` and
returns a number or a dict of numbers; ``ComputeEvalMetric`` runs one on a data split. Each
backend supplies ready ones under deeplite's names (``get_accuracy``, ``get_missclass``,
``get_topk``, ``EvalLossFunction``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Hashable, Iterable, Iterator


def as_tuple(value: Any) -> tuple:
    """``value`` as a tuple: tuples and lists as they are, anything else as a 1-tuple."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def transformed_batches(data_loader: Iterable[Any], transform: Callable | None) -> Iterable[Any]:
    """``data_loader``'s ``(x, y)`` batches passed through ``transform(x, y)`` (deeplite's option), lazily."""
    if transform is None:
        return data_loader

    def batches() -> Iterator[Any]:
        for x, y in data_loader:
            yield transform(x, y)

    return batches()


def mean_loss(losses: Iterable[Any], to_float: Callable[[Any], float]) -> float:
    """The mean over batches of ``losses`` (a dict of losses sums its values), as ``to_float`` reads each."""
    total, batches = 0.0, 0
    for loss in losses:
        if isinstance(loss, dict):
            loss = sum(loss.values())
        total += to_float(loss)
        batches += 1
    if batches == 0:
        raise ValueError("EvalLossFunction: the data loader yielded no batch")
    return total / batches


class EvaluationFunction(ABC):
    """An evaluation of a model over a data loader: ``__call__(model, data_loader, device=None, ...)``."""

    @abstractmethod
    def __call__(self, model: Any, data_loader: Iterable[Any], device: Any = None, **kwargs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def filter_call_rval(rval: Any, return_dict: bool | None = None, return_keys: Any = None,
                         key_for_non_dict: Hashable | None = None) -> Any:
        """Reshape what ``__call__`` returned (deeplite's helper).

        ``return_dict=None``: ``rval`` as is. ``False``: one value (a one-entry dict's value, or
        ``rval[return_keys]``). ``True``: a dict (``{key_for_non_dict: rval}`` for a non-dict, else
        the entries named by ``return_keys``; ``None`` or ``'__all__'``: all of them).
        """
        if return_dict not in (None, False, True):
            raise ValueError(f"return_dict must be None, False or True, got {return_dict!r}")
        if return_dict is None:
            return rval
        if not return_dict:
            if not isinstance(rval, dict):
                return rval
            if len(rval) == 1:
                return next(iter(rval.values()))
            keys = as_tuple(return_keys)
            if len(keys) != 1 or keys[0] is None:
                raise ValueError(f"the evaluation returned the dict keys {sorted(map(str, rval))} but return_dict "
                                 "is False: give return_keys, the one key to return")
            return rval[keys[0]]
        if not isinstance(rval, dict):
            if key_for_non_dict is None:
                raise ValueError(f"the evaluation returned a {type(rval).__name__}, not a dict, but return_dict is "
                                 "True: give key_for_non_dict, the key to file it under")
            return {key_for_non_dict: rval}
        if return_keys is None or return_keys == "__all__":
            return rval
        return {k: rval[k] for k in as_tuple(return_keys)}
