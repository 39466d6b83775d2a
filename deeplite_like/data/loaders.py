"""deeplite-profiler's data-loader layer and helpers, for code written against it (no framework imports).

deeplite-profiler wrapped every data split in a ``DataLoader`` bound to a ``ForwardPass``, and
described a batch's tensors with a ``TensorSampler`` to make random inputs of any batch size.
Here data splits are plain iterables and a ``ForwardPass`` (``deeplite_like.data``) binds them,
so these classes are not needed by the profilers; they are kept, with deeplite's behaviour, so
that code subclassing them runs with its import lines changed:

* ``DataLoader``: the abstract wrapper (``native_dl``, ``forward_pass``, ``sample_forward``,
  ``timed_forward``...). A profiler given one iterates it like any other split.
* ``TensorSampler`` / ``TensorInfo``: a description of a tuple of tensors (and of tuples, lists
  and dicts of tensors, one level deep) that makes random tensors at a batch size. The
  framework parts are ``TorchTensorSampler`` and ``TFTensorSampler`` in the backends.
* ``AverageAggregator``: a running mean that resets when read.
* ``getLogger`` / ``setLogger``: deeplite's logger holder. The holder forwards to the logger the
  profilers log to (``logging.getLogger('deeplite_like')`` until ``setLogger`` replaces it).
"""
from __future__ import annotations

import functools
import logging
import time
from abc import ABC, abstractmethod
from typing import Any, Callable

from deeplite_like.data.forward_pass import ForwardPass
from deeplite_like.device import Device

__all__ = ["AverageAggregator", "DataLoader", "TensorInfo", "TensorSampler", "carried_forward_pass", "getLogger",
           "setLogger", "timer"]


# -- the logger holder ------------------------------------------------------------------------
class _LoggerHolder:
    """The one holder of the library's logger: every attribute but ``logger`` is the held logger's.

    deeplite-profiler's design, kept: modules take the holder (``getLogger()``) once, and
    ``setLogger`` swaps the logger behind it later. Only one holder exists: a second is a
    ``TypeError``.
    """

    _made = False

    def __new__(cls) -> "_LoggerHolder":
        if cls._made:
            raise TypeError("the logger holder is a singleton: use deeplite_like.getLogger() to get it")
        cls._made = True
        return super().__new__(cls)

    def __init__(self) -> None:
        self._logger: logging.Logger | None = None

    @property
    def logger(self) -> logging.Logger:
        if self._logger is None:
            self._logger = logging.getLogger("deeplite_like")
        return self._logger

    @logger.setter
    def logger(self, new_logger: logging.Logger) -> None:
        if not isinstance(new_logger, (logging.Logger, logging.LoggerAdapter)):
            raise TypeError(f"setLogger needs a logging.Logger, got {type(new_logger).__name__}")
        self._logger = new_logger

    def __getattr__(self, name: str) -> Any:  # (only reached for names the holder does not define)
        return getattr(self.logger, name)


_HOLDER = _LoggerHolder()


def getLogger(name: str | None = None) -> _LoggerHolder:  # noqa: N802  (deeplite's name)
    """The logger holder (deeplite's ``getLogger``): use it as a logger. ``name`` is ignored, as there."""
    return _HOLDER


def setLogger(logger: logging.Logger) -> None:  # noqa: N802  (deeplite's name)
    """Make ``logger`` the one the profilers log to (through the holder)."""
    _HOLDER.logger = logger


# -- small helpers -----------------------------------------------------------------------------
class AverageAggregator:
    """A running mean: ``update(v)`` adds a value, ``get()`` returns the mean and resets (0 when empty)."""

    __slots__ = ("value", "i")

    def __init__(self) -> None:
        self.value: float = 0
        self.i = 0

    def update(self, value: float) -> None:
        self.value += value
        self.i += 1

    def get(self) -> float:
        if self.i == 0:
            return 0
        mean = self.value / self.i
        self.__init__()
        return mean

    def get_sum(self) -> float:
        total = self.value
        self.__init__()
        return total


def timer(func: Callable[..., Any]) -> Callable[..., float]:
    """Decorate ``func`` to return the seconds it ran (``time.perf_counter``) instead of its value."""

    @functools.wraps(func)
    def timed(*args: Any, **kwargs: Any) -> float:
        start = time.perf_counter()
        func(*args, **kwargs)
        return time.perf_counter() - start

    return timed


# -- DataLoader --------------------------------------------------------------------------------
class DataLoader(ABC):
    """deeplite's wrapper of a data loader (``native_dl``) bound to a ``ForwardPass``.

    Setting ``forward_pass`` describes the first batch (``ForwardPass.infer_sampler``). A
    subclass defines ``_create_iter``, ``__len__``, ``batch_size``, ``dump_native_info`` and
    ``load_native_info``; the backends' ``TorchDataLoader`` and ``TFDataLoader`` do.
    """

    def __init__(self, dl: Any, fp: ForwardPass | None = None) -> None:
        self.native_dl = dl
        self.dl_iter = self._create_iter()
        self._forward_pass: ForwardPass | None = None
        self.forward_pass = fp

    @abstractmethod
    def dump_native_info(self) -> Any:
        """A picklable state of ``native_dl``."""

    @abstractmethod
    def load_native_info(self, native_state: Any) -> "DataLoader":
        """Reload from ``dump_native_info``'s state."""
        return self

    @property
    def forward_pass(self) -> ForwardPass | None:
        return self._forward_pass

    @forward_pass.setter
    def forward_pass(self, fp: ForwardPass | None) -> None:
        if fp is None:
            return
        if not isinstance(fp, ForwardPass):
            raise TypeError(f"{type(self).__name__}.forward_pass must be a ForwardPass, got {type(fp).__name__}")
        self._forward_pass = fp
        fp.infer_sampler(next(iter(self)))

    def __iter__(self) -> Any:
        """A fresh iterator over the batches (so the loader is re-iterable, and a valid data split)."""
        self.dl_iter = self._create_iter()
        return self.dl_iter

    def __next__(self) -> Any:
        return next(self.dl_iter)

    @abstractmethod
    def __len__(self) -> int:
        """The number of batches."""

    @abstractmethod
    def _create_iter(self) -> Any:
        """A fresh iterator over ``native_dl``."""

    @property
    @abstractmethod
    def batch_size(self) -> int:
        """Samples per batch."""

    @property
    def dataset_size(self) -> int:
        return len(self) * self.batch_size

    def _bound(self, what: str) -> ForwardPass:
        if self._forward_pass is None:
            raise TypeError(f"{type(self).__name__}.{what}: this DataLoader has no ForwardPass; give one as "
                            f"{type(self).__name__}(loader, fp=...)")
        return self._forward_pass

    def sample_forward(self, model: Any, device: Any = Device.CPU) -> Any:
        """The model called on the first batch (through the forward pass)."""
        return self._bound("sample_forward").perform(model, next(iter(self)), device)

    def sample_random_forward(self, model: Any, batch_size: int | None = None, device: Any = Device.CPU) -> Any:
        """The model called on random inputs shaped as the data's (``batch_size`` defaults to the loader's)."""
        fp = self._bound("sample_random_forward")
        return fp.random_perform(model, self.batch_size if batch_size is None else batch_size, device)

    @timer
    def timed_forward(self, model: Any, device: Any) -> Any:
        """Seconds ``sample_forward`` took (one call, as deeplite; the profilers time with repeats)."""
        return self.sample_forward(model, device)

    @timer
    def timed_random_forward(self, model: Any, batch_size: int | None, device: Any) -> Any:
        """Seconds ``sample_random_forward`` took."""
        return self.sample_random_forward(model, batch_size, device)


# -- TensorSampler -----------------------------------------------------------------------------
class TensorInfo:
    """The per-sample shape and the dtype of one tensor."""

    __slots__ = ("shp", "dtype")

    def __init__(self, shp: Any, dtype: Any) -> None:
        self.shp = shp
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"TensorInfo(shp={tuple(self.shp)!r}, dtype={self.dtype})"


class TensorSampler(ABC):
    """A description of a tuple of tensors, each a tensor or a tuple / list / dict of tensors.

    A subclass says how to recognise a tensor (``_standardize_tensor``: convert it, or raise
    ``ValueError``), what describes it (``_get_info``: per-sample shape and dtype) and how to
    make a random one (``_create_random_tensor``).
    """

    def __init__(self, tensors_tuple_sample: tuple) -> None:
        sample = self.standardize_tensors(tensors_tuple_sample)
        self.tensors_info = self.get_tensors_info(sample)

    @abstractmethod
    def _standardize_tensor(self, x: Any) -> Any:
        raise NotImplementedError

    @abstractmethod
    def _create_random_tensor(self, x_info: TensorInfo, batch_size: int) -> Any:
        raise NotImplementedError

    @abstractmethod
    def _get_info(self, x: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    @staticmethod
    def _loop_over_tensors_tuple(tensors_tuple: tuple, fn: Callable[[Any], Any]) -> tuple:
        if not isinstance(tensors_tuple, (tuple, list)):
            raise TypeError(f"a TensorSampler takes a tuple of tensors, got {type(tensors_tuple).__name__}")
        result = []
        for item in tensors_tuple:
            if isinstance(item, (tuple, list)):
                result.append(type(item)(map(fn, item)))
            elif isinstance(item, dict):
                result.append({k: fn(v) for k, v in item.items()})
            else:
                result.append(fn(item))
        return tuple(result)

    def _standardize_checked(self, x: Any) -> Any:
        try:
            return self._standardize_tensor(x)
        except ValueError as exc:
            if str(exc):
                raise
            raise ValueError(f"{type(self).__name__}: {type(x).__name__} is not a tensor it can describe") from None

    def standardize_tensors(self, tensors_tuple: tuple) -> tuple:
        return self._loop_over_tensors_tuple(tensors_tuple, self._standardize_checked)

    def create_random_tensors(self, batch_size: int) -> tuple:
        return self._loop_over_tensors_tuple(self.tensors_info, lambda info: self._create_random_tensor(info,
                                                                                                        batch_size))

    def get_tensors_info(self, tensors_tuple: tuple) -> tuple:
        return self._loop_over_tensors_tuple(tensors_tuple, lambda x: TensorInfo(*self._get_info(x)))

    def get_flat_shapes_tuple(self) -> tuple:
        """Every tensor's per-sample shape, flattened out of the tuples / lists / dicts."""
        shapes: list[Any] = []
        for info in self.tensors_info:
            if isinstance(info, (tuple, list)):
                shapes.extend(i.shp for i in info)
            elif isinstance(info, dict):
                shapes.extend(i.shp for i in info.values())
            else:
                shapes.append(info.shp)
        return tuple(shapes)


def carried_forward_pass(data_splits: Any) -> ForwardPass | None:
    """The ``ForwardPass`` the data splits carry, for a profiler given none: that of splits made by
    ``enable_forward_pass_data_splits``, else the one bound to the splits' ``DataLoader`` wrappers
    (deeplite's way: ``{'train': TorchDataLoader(loader, fp=...), 'test': TorchDataLoader(loader)}``).
    Two different ones are refused: one forward pass serves every split here."""
    carried = getattr(data_splits, "forward_pass", None)
    if carried is not None or not isinstance(data_splits, dict):
        return carried
    bound = {id(split.forward_pass): (name, split.forward_pass) for name, split in data_splits.items()
             if isinstance(split, DataLoader) and split.forward_pass is not None}
    if len(bound) > 1:
        names = sorted(str(name) for name, _ in bound.values())
        raise ValueError(f"the DataLoader splits {names} are bound to {len(bound)} different ForwardPass objects; "
                         "one ForwardPass serves every split here: bind the same one, or pass forward_pass= to the "
                         "profiler")
    return next(iter(bound.values()))[1] if bound else None
