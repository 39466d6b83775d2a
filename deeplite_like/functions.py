"""``ProfilerFunction``: a callable that computes one or more status keys.

The profiler pipes arguments to functions by name: it reads each function's ``__call__``
signature with ``inspect.signature`` and passes only the keyword arguments that signature
accepts. That is why a registered function may not take ``*args`` or ``**kwargs``: the
profiler could not tell which arguments belong to it.

As in deeplite-profiler, the first two parameters receive the model and the data splits
whatever they are named (``def __call__(self, net, loaders, ...)``), unless they have a
default or are named after something the profiler supplies (``model``, ``data_splits``, ...).
"""
from __future__ import annotations

import abc
import inspect
from typing import Any, Callable, Iterable

from deeplite_like.metrics.status_keys import StatusKey


class ProfilerFunction(abc.ABC):
    """Computes the status keys named by :meth:`get_bounded_status_keys`.

    ``__call__`` returns the value of its single key, or a dict ``{NAME: value}`` when it
    computes several; a value may be wrapped in :class:`~deeplite_like.metrics.status_keys.Detailed`.
    Its parameters are filled by name from ``compute_network_status(**kwargs)`` and from the
    profiler's context (``model``, ``data_splits`` and whatever the backend adds).
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
