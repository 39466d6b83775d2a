"""Profiler functions: the callables that compute status keys, evaluation among them (no framework imports).

``ProfilerFunction`` computes one or more status keys; ``ComplexityOptions`` takes deeplite-profiler's
``ComputeComplexity`` options, ``EvaluationFunction`` is its base of evaluation callables, and
``shared_observations`` / ``observed`` share work among the functions of one status computation.
Each one's docstring holds its rules.
"""
from __future__ import annotations

import abc
import contextlib
import contextvars
import inspect
import time
import warnings
import weakref
from numbers import Real
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, TypeVar

from deeplite_like.data.adapters import split_loader
from deeplite_like.metrics import (EvalMetric, EvalMetricAlias, Flops, InferenceTime, Macs, MemoryFootprint, ModelSize,
                                   PeakActivationMemory, make_eval_metric)
from deeplite_like.metrics.status_keys import Comparative, Detailed, StatusKey


class ProfilerFunction(abc.ABC):
    """Computes the status keys named by :meth:`get_bounded_status_keys`.

    ``__call__`` returns the value of its single key, or a dict ``{NAME: value}`` when it
    computes several; a value may be wrapped in :class:`~deeplite_like.metrics.status_keys.Detailed`.
    Its parameters are filled by name from ``compute_network_status(**kwargs)`` and from the
    profiler's context (``model``, ``data_splits`` and whatever the backend adds).

    The profiler pipes arguments to functions
    by name: it reads each function's ``__call__`` signature with ``inspect.signature`` and passes
    only the keyword arguments that signature accepts. That is why a registered function may not
    take ``*args`` or ``**kwargs``: the profiler could not tell which arguments belong to it. As in
    deeplite-profiler, the first two parameters receive the model and the data splits whatever they
    are named (``def __call__(self, net, loaders, ...)``), unless they have a default or are named
    after something the profiler supplies (``model``, ``data_splits``, ...).
    """

    @abc.abstractmethod
    def get_bounded_status_keys(self) -> Any:
        """The status keys this function computes: a ``StatusKey`` class or instance, or a tuple of them."""

    @abc.abstractmethod
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Compute and return the status value(s)."""

    def __repr__(self) -> str:
        return type(self).__name__


class ExternalProfilerFunction(ProfilerFunction):
    """Wraps a plain function ``func(model, ..., some_option=1)`` computing ``keys``.

    ``keys`` may be left out by a subclass that overrides ``get_bounded_status_keys``
    (deeplite-profiler's ``ExternalProfilerFunction(func)``).
    """

    def __init__(self, func: Callable[..., Any], keys: Any = None) -> None:
        if not callable(func):
            raise TypeError(f"ExternalProfilerFunction needs a callable, got {func!r}")
        self._func = func
        self._keys = keys
        self.__signature__ = inspect.signature(func)

    def get_bounded_status_keys(self) -> Any:
        if self._keys is None:
            raise TypeError(f"{self!r} declares no status keys: pass them, ExternalProfilerFunction(func, keys), "
                            "or override get_bounded_status_keys in a subclass")
        return self._keys

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"ExternalProfilerFunction({getattr(self._func, '__qualname__', self._func)!r})"


def call_signature(function: Any) -> inspect.Signature:
    """The signature the profiler pipes arguments by; rejects ``*args`` and ``**kwargs``."""
    signature = inspect.signature(function)
    for parameter in signature.parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            star = "*" if parameter.kind is inspect.Parameter.VAR_POSITIONAL else "**"
            raise TypeError(
                f"{function!r} cannot be registered: its __call__ takes {star}{parameter.name}. The profiler "
                "passes each function only the keyword arguments its signature names, so it cannot know "
                f"which arguments {star}{parameter.name} would want. Name every parameter explicitly.")
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{function!r} cannot be registered: parameter {parameter.name!r} is positional-only; "
                            "the profiler passes arguments by name")
    return signature


def _as_key(function: ProfilerFunction, key: Any) -> StatusKey:
    """A prototype instance of a declared key (a ``StatusKey`` class or instance)."""
    if isinstance(key, StatusKey):
        return key
    if isinstance(key, type) and issubclass(key, StatusKey):
        try:
            return key()
        except TypeError as exc:
            raise TypeError(f"{function!r} declares {key.__name__}, which cannot be made without arguments "
                            f"({exc}); return an instance from get_bounded_status_keys instead") from exc
    raise TypeError(f"{function!r} declares {key!r}, which is not a StatusKey subclass or instance with a NAME")


def bounded_keys(function: ProfilerFunction) -> tuple[StatusKey, ...]:
    """Validated status keys of ``function``, as not-computed prototype instances with distinct NAMEs.

    ``get_bounded_status_keys`` may return a ``StatusKey`` class or instance, alone or in a
    tuple or list (deeplite-profiler's functions ``return Flops()``).
    """
    declared = function.get_bounded_status_keys()
    if declared is None or isinstance(declared, (type, StatusKey)):
        declared = () if declared is None else (declared,)
    elif isinstance(declared, (str, bytes)) or not isinstance(declared, Iterable):
        raise TypeError(f"{function!r}.get_bounded_status_keys returned {declared!r}; return a StatusKey class or "
                        "instance, or a tuple of them")
    keys = tuple(_as_key(function, key) for key in declared)
    if not keys:
        raise ValueError(f"{function!r} declares no status keys (get_bounded_status_keys returned nothing)")
    seen: set[str] = set()
    for key in keys:
        if not isinstance(key.NAME, str) or not key.NAME:
            raise TypeError(f"{function!r} declares {type(key).__name__}, which has no str NAME")
        if key.NAME in seen:
            raise ValueError(f"{function!r} declares the key {key.NAME!r} twice")
        seen.add(key.NAME)
    return tuple(key.fresh() for key in keys)


def positional_bindings(signature: inspect.Signature, supplied: Iterable[str]) -> dict[str, str]:
    """Parameters that receive the model and the data splits by position: ``{'net': 'model', ...}``.

    deeplite-profiler binds ``(model, data_splits)`` to the first two parameters of ``__call__``
    whatever their names. A parameter is bound so when it has no default and is not named after
    an argument the profiler supplies by name (``supplied``); the others are filled by name.
    """
    supplied = set(supplied)
    bindings = {}
    parameters = list(signature.parameters.values())[:2]
    for parameter, context_name in zip(parameters, ("model", "data_splits")):
        if parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            break
        if parameter.default is inspect.Parameter.empty and parameter.name not in supplied:
            bindings[parameter.name] = context_name
    return bindings


def complexity_values(counted: Any, details: Mapping[str, Any]) -> dict[str, Detailed]:
    """The ``macs`` and ``flops`` status values of a count (an ``OpCount``), each with ``details`` and its
    figure per sample (over the count's batch, 1 where the inputs disagree)."""
    batch = counted.batch_size or 1
    return {Macs.NAME: Detailed(counted.macs, {**details, "per_sample": counted.macs / batch}),
            Flops.NAME: Detailed(counted.flops, {**details, "per_sample": counted.flops / batch})}


def memory_values(memory: Any, weights: int, batch: int, include_weights: bool, method: str) -> dict[str, Detailed]:
    """The ``peak_activation_memory`` and ``memory_footprint`` status values of a file's graph, from its
    tensor lifetimes (a ``results.LifetimeStats``); the arena is each backend's ``activation_arena``."""
    peak = memory.peak_bytes
    return {PeakActivationMemory.NAME: Detailed(peak, {"batch_size": batch,
                                                       "per_sample": PeakActivationMemory(peak // batch),
                                                       "inputs": PeakActivationMemory(memory.input_bytes),
                                                       "outputs": PeakActivationMemory(memory.output_bytes),
                                                       "peak_at": memory.peak_at, "method": method}),
            MemoryFootprint.NAME: Detailed(weights + peak, {"batch_size": batch, "params": ModelSize(weights),
                                                            "peak_activations": PeakActivationMemory(peak),
                                                            "include_weights": include_weights})}


def check_complexity_options(num_bytes: int, export: bool) -> None:
    """Validate ``num_bytes`` (bytes per element) and ``export``; warn where they have no effect here."""
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, (int, float)) or num_bytes <= 0:
        raise ValueError(f"ComputeComplexity(num_bytes=...) must be a positive number of bytes, got {num_bytes!r}")
    if not isinstance(export, bool):
        raise TypeError(f"ComputeComplexity(export=...) must be True or False, got {export!r}")
    if num_bytes != 4:
        warnings.warn(f"ComputeComplexity(num_bytes={num_bytes}): sizes and memory are read from each tensor's "
                      "real dtype, not from num_bytes; cast the model (e.g. model.half()) to profile it at another "
                      "width", UserWarning, stacklevel=3)
    if export:
        warnings.warn("ComputeComplexity(export=True) writes no file here: the per-layer report is the "
                      "'layerwise_summary' metric (ComputeLayerwiseSummary); save a report with "
                      "profiler.compute_network_status(...).save(path)", UserWarning, stacklevel=3)


class ComplexityOptions:
    """The constructor both backends' ``ComputeComplexity`` share: deeplite's options, checked and kept.

    ``ComplexityOptions`` is deeplite-profiler's ``ComputeComplexity(num_bytes=4, export=False)``
    constructor, shared by both backends: deeplite sized every tensor at ``num_bytes`` bytes and
    could ``export`` a per-layer report to a file; here sizes are read from each tensor's real
    dtype and the per-layer report is the ``layerwise_summary`` metric, so the options are accepted
    and a value that would change deeplite's output is warned about, saying what to do instead.
    """

    def __init__(self, num_bytes: int = 4, export: bool = False) -> None:
        check_complexity_options(num_bytes, export)
        self.num_bytes = num_bytes
        self.export = export


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


class EvaluationFunction(abc.ABC):
    """An evaluation of a model over a data loader: ``__call__(model, data_loader, device=None, ...)``.

    ``EvaluationFunction`` is deeplite-profiler's base of evaluation callables,
    ``func(model, data_loader, device=None, **options) -> number | dict``; each backend supplies
    ready ones under deeplite's names (``get_accuracy``, ``get_missclass``, ``get_topk``,
    ``EvalLossFunction``). ``ComputeEvalMetric`` runs one on a data split and times it.
    """

    @abc.abstractmethod
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


class PredictEvaluation(EvaluationFunction):
    """deeplite's evaluation functions on a shipped file: ``model.predict(x)`` gives the scores of a batch.

    The file backends' ``get_accuracy`` / ``get_missclass`` (top-1, percent) and ``get_topk``
    (``{'top-1': %, 'top-5': %}``) are instances; the model their ``ComputeEvalMetric`` receives runs
    the file's runtime (ONNX Runtime's session, the LiteRT interpreter). Targets are class indices;
    ``transform(x, y) -> (x, y)`` is applied to each batch first; ``device`` is accepted for deeplite's
    signature and must be ``None`` or ``"cpu"`` (the runtime chose its provider when it was made).
    """

    def __init__(self, ks: tuple[int, ...] = (1,), result: str = "accuracy") -> None:
        self.ks, self.result = ks, result

    def __call__(self, model: Any, data_loader: Iterable[Any], device: Any = None, topk: Any = None,
                 transform: Callable | None = None) -> Any:
        import numpy as np

        if device not in (None, "cpu"):
            raise ValueError(f"device={device!r}: a file's evaluation runs on its runtime as it was made; pass "
                             "device=None")
        ks = self.ks if topk is None else as_tuple(topk)
        if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise ValueError(f"topk must be a positive int or a tuple of them, got {topk!r}")
        hits, total = dict.fromkeys(ks, 0), 0
        for x, y in transformed_batches(data_loader, transform):
            scores = np.asarray(model.predict(x))
            target = np.asarray(y).reshape(-1)
            if scores.ndim != 2 or len(scores) != len(target):
                raise ValueError(f"the model's scores have shape {scores.shape} for {len(target)} targets: "
                                 "evaluation needs one row of class scores per sample")
            ranked = np.argsort(-scores, axis=1, kind="stable")
            for k in ks:
                hits[k] += int((ranked[:, :k] == target[:, None]).any(axis=1).sum())
            total += len(target)
        if total == 0:
            raise ValueError("the data loader gave no samples to evaluate")
        percent = {k: 100.0 * hits[k] / total for k in ks}
        if self.result == "topk":
            return {f"top-{k}": percent[k] for k in ks}
        return 100.0 - percent[ks[0]] if self.result == "missclass" else percent[ks[0]]


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


T = TypeVar("T")
_SHARED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("deeplite_like_observations", default=None)


@contextlib.contextmanager
def shared_observations() -> Iterator[None]:
    """Within the body, ``observed`` runs each distinct observation once.

    Several built-in functions read the same instrumented forward: MACs/FLOPs, peak
    memory and the per-layer table on PyTorch; MACs/FLOPs and the layer table on Keras, and peak
    memory too on Keras' torch backend. ``Profiler`` enters ``shared_observations()`` around each
    ``compute_network_status``/``compare`` computation; inside it, ``observed(key, make)`` runs
    ``make()`` once per key (the model, its inputs and the options that change what the run sees)
    and hands every later caller the same result. Outside it, ``make()`` runs each time. Nothing
    outlives the scope: the next status measures afresh.
    """
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def sharing() -> bool:
    """Whether a ``shared_observations`` scope is open (an observation then records everything it can)."""
    return _SHARED.get() is not None


def note(key: tuple, value: object = True) -> None:
    """Remember a fact for the rest of the scope (nothing outside one): e.g. that a model has run."""
    shared = _SHARED.get()
    if shared is not None:
        shared[key] = value


def noted(key: tuple) -> object:
    """What ``note`` or ``observed`` left under ``key`` in this scope; None if nothing."""
    shared = _SHARED.get()
    return None if shared is None else shared.get(key)


def observed(key: tuple, make: Callable[[], T]) -> T:
    """``make()``, or what it returned for ``key`` earlier in this scope."""
    shared = _SHARED.get()
    if shared is None:
        return make()
    if key not in shared:
        shared[key] = make()
    return shared[key]
