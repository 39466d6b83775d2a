"""``ProfilerFunction``: a callable that computes one or more status keys.

The profiler pipes arguments to functions by name: it reads each function's ``__call__``
signature with ``inspect.signature`` and passes only the keyword arguments that signature
accepts. That is why a registered function may not take ``*args`` or ``**kwargs``: the
profiler could not tell which arguments belong to it.
"""
from __future__ import annotations

import abc
import inspect
from typing import Any, Callable, Iterable

from deeplite_like.status import StatusKey


class ProfilerFunction(abc.ABC):
    """Computes the status keys named by :meth:`get_bounded_status_keys`.

    ``__call__`` returns the value of its single key, or a dict ``{NAME: value}`` when it
    computes several; a value may be wrapped in :class:`~deeplite_like.status.Detailed`.
    Its parameters are filled by name from ``compute_network_status(**kwargs)`` and from the
    profiler's context (``model``, ``data_splits`` and whatever the backend adds).
    """

    @abc.abstractmethod
    def get_bounded_status_keys(self) -> tuple[type[StatusKey], ...]:
        """The ``StatusKey`` classes this function computes."""

    @abc.abstractmethod
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Compute and return the status value(s)."""

    def __repr__(self) -> str:
        return type(self).__name__


class ExternalProfilerFunction(ProfilerFunction):
    """Wraps a plain function ``func(model, ..., some_option=1)`` computing ``keys``."""

    def __init__(self, func: Callable[..., Any], keys: type[StatusKey] | Iterable[type[StatusKey]]) -> None:
        if not callable(func):
            raise TypeError(f"ExternalProfilerFunction needs a callable, got {func!r}")
        self._func = func
        self._keys = (keys,) if isinstance(keys, type) else tuple(keys)
        self.__signature__ = inspect.signature(func)

    def get_bounded_status_keys(self) -> tuple[type[StatusKey], ...]:
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


def bounded_keys(function: ProfilerFunction) -> tuple[type[StatusKey], ...]:
    """Validated status keys of ``function``: ``StatusKey`` subclasses with distinct, non-empty NAMEs."""
    keys = tuple(function.get_bounded_status_keys())
    if not keys:
        raise ValueError(f"{function!r} declares no status keys (get_bounded_status_keys returned nothing)")
    seen: set[str] = set()
    for key in keys:
        if not (isinstance(key, type) and issubclass(key, StatusKey)) or not key.NAME:
            raise TypeError(f"{function!r} declares {key!r}, which is not a StatusKey subclass with a NAME")
        if key.NAME in seen:
            raise ValueError(f"{function!r} declares the key {key.NAME!r} twice")
        seen.add(key.NAME)
    return keys
