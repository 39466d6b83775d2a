"""``ComputeEvalMetric``: run a user evaluation function on a data split and time it."""
from __future__ import annotations

import time
import weakref
from numbers import Real
from typing import Any, Callable, Mapping

from deeplite_like.functions import ProfilerFunction
from deeplite_like.metrics import EvalMetric, EvalMetricAlias, InferenceTime, make_eval_metric
from deeplite_like.metrics.status_keys import Comparative, Detailed, StatusKey


class ComputeEvalMetric(ProfilerFunction):
    """Evaluate ``func(model, data_loader)`` on one split; fill an eval metric and ``inference_time``.

    ``func`` returns a number (the primary metric ``key``) or a dict holding ``key`` and possibly
    more values; :meth:`add_secondary_metric` turns more dict entries into metrics of their
    own (``top5``, ``loss``), also after this function was registered with a profiler.

    A primary metric named otherwise than ``eval_metric`` (``ComputeEvalMetric(get_accuracy,
    'accuracy', unit_name='%')``, deeplite-profiler's call) also fills ``eval_metric`` with its
    value, as deeplite did; that alias is not displayed, and yields to any other function
    computing ``eval_metric``.

    Args:
        func: ``func(model, data_loader) -> number | dict``.
        key: the primary metric's name, and its entry in a dict result (default ``eval_metric``).
        default_split: the split evaluated unless ``compute_network_status(split=...)`` says otherwise.
        unit_name: display unit of the primary metric (``'%'`` is compared in points).
        comparative: how two models compare on it (default: by difference, higher is better).
        time_it: also fill ``inference_time`` with the wall time of the evaluation (seconds).
    """

    def __init__(self, func: Callable[..., Any], key: str | None = None, default_split: str = "test",
                 unit_name: str = "", comparative: Comparative = Comparative.DIFFERENCE,
                 friendly_name: str | None = None, description: str | None = None,
                 time_it: bool = True) -> None:
        if not callable(func):
            raise TypeError(f"ComputeEvalMetric needs a callable evaluation function, got {func!r}")
        self.func = func
        self.default_split = default_split
        self.time_it = time_it
        self.primary = make_eval_metric(key or "eval_metric", unit_name, comparative,
                                        friendly_name or (None if key else "Evaluation metric"), description)
        self.secondary: list[type[EvalMetric]] = []
        self._owners: "weakref.WeakSet" = weakref.WeakSet()

    def get_bounded_status_keys(self) -> tuple[type[StatusKey], ...]:
        keys: tuple[type[StatusKey], ...] = (self.primary, *self.secondary)
        if self.primary.NAME != EvalMetricAlias.NAME:
            keys += (EvalMetricAlias,)
        return keys + ((InferenceTime,) if self.time_it else ())

    def add_secondary_metric(self, key: str, unit_name: str | None = "", description: str | None = None,
                             comparative: Comparative | None = Comparative.DIFFERENCE,
                             friendly_name: str | None = None) -> None:
        """Also report ``result[key]`` of the evaluation's dict result as a metric of its own.

        The arguments are in deeplite-profiler's order (``key, unit_name, description,
        comparative``); ``unit_name=None`` / ``comparative=None`` take the primary metric's, as
        there. Profilers this function is registered with learn the new key at once
        (registration rules apply: a clash with an override raises, and then nothing changes).
        """
        if isinstance(description, Comparative) and comparative in (None, Comparative.DIFFERENCE):
            description, comparative = None, description  # the older order: (key, unit_name, comparative)
        if key in {k.NAME for k in self.get_bounded_status_keys()}:
            raise ValueError(f"{self!r} already computes a metric named {key!r}")
        unit_name = self.primary.BASE_UNIT if unit_name is None else unit_name
        comparative = self.primary.COMPARATIVE if comparative is None else comparative
        self.secondary.append(make_eval_metric(key, unit_name, comparative, friendly_name, description))
        try:
            for profiler in list(self._owners):
                profiler._refresh_function_keys(self)
        except Exception:
            self.secondary.pop()
            for profiler in list(self._owners):
                profiler._refresh_function_keys(self)
            raise

    def _attach(self, profiler: Any) -> None:
        self._owners.add(profiler)

    def __call__(self, model: Any, data_splits: Mapping[str, Any], split: str | None = None) -> dict:
        split = split or self.default_split
        from deeplite_like.data import split_loader

        loader = split_loader(data_splits, split)
        start = time.perf_counter()
        result = self.func(model, loader)
        elapsed = time.perf_counter() - start
        values = self._unpack(result, split)
        if self.primary.NAME != EvalMetricAlias.NAME:
            values[EvalMetricAlias.NAME] = values[self.primary.NAME]
        if self.time_it:
            values[InferenceTime.NAME] = Detailed(elapsed, {"split": split})
        return values

    def _unpack(self, result: Any, split: str) -> dict:
        names = [self.primary.NAME] + [k.NAME for k in self.secondary]
        if isinstance(result, Mapping):
            missing = [n for n in names if n not in result]
            if missing:
                raise KeyError(f"evaluation function {self._func_name()} returned keys {sorted(map(str, result))} "
                               f"on split {split!r}, but {missing} were expected")
            values = {n: result[n] for n in names}
        elif self.secondary:
            raise TypeError(f"evaluation function {self._func_name()} returned {type(result).__name__}; with "
                            f"secondary metrics {names[1:]} it must return a dict holding {names}")
        else:
            values = {self.primary.NAME: result}
        for name, value in values.items():
            if not isinstance(value, Real) or isinstance(value, bool):
                raise TypeError(f"evaluation metric {name!r} from {self._func_name()} is {value!r}; expected a number")
            values[name] = Detailed(float(value), {"split": split})
        return values

    def _func_name(self) -> str:
        return getattr(self.func, "__qualname__", repr(self.func))

    def __repr__(self) -> str:
        return f"ComputeEvalMetric({self._func_name()}, key={self.primary.NAME!r})"
