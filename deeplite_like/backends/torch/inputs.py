"""The inputs of a profiling run on PyTorch: where they come from, where they go, and why a run on them failed.

* Splits and devices: which split the inputs come from (``resolve_split``), moved to the model's
  device (``moved``), the grad mode the model runs in (``inference_mode_of``), and a requested
  device checked before any work: it must exist on this machine (``checked_device``).
* A one-call profile's inputs (``profile_inputs``): given (``args``/``kwargs``) or built from
  ``input_shape``.
* Failures explained by the inputs the profiler built, not by what the model raised deep inside
  (``explained_failures``, ``fixed_batch_hint``).
* The torch side of data binding: a ``TensorAdapter`` for ``torch.Tensor`` and a split check.
  Importing this module registers both with ``deeplite_like.data`` (the core also imports it by
  itself the first time it meets a torch tensor).
"""
from __future__ import annotations

import contextlib
import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils import _pytree as pytree
from torch.utils._pytree import tree_map
from torch.utils.data import DataLoader, Dataset, IterableDataset

from deeplite_like.data import (DataError, ForwardPass, Inputs, cyclic_indices, describe, first_batch, format_shape,
                                register_adapter, register_split_check)
from deeplite_like.data.loaders import DataLoader as LoaderBase, TensorInfo, TensorSampler
from deeplite_like.backends.torch.tensors import describe_tensor
from deeplite_like.device import Device, unavailable
from deeplite_like.errors import ForwardError, caller

__all__ = ["TakenInputs", "TorchAdapter", "TorchDataLoader", "TorchForwardPass", "TorchTensorSampler",
           "available_devices", "check_torch_split", "checked_device", "explained_failures", "fixed_batch",
           "fixed_batch_hint", "inference_mode_of", "moved", "profile_inputs", "resolve_split", "take_inputs"]


def resolve_split(data_splits: Mapping[str, Any], split: str | None) -> str:
    """``split`` if given; else ``'test'`` when present, else the first split."""
    if split is not None:
        return split
    if not isinstance(data_splits, Mapping) or not data_splits:
        raise DataError("this profiler has no data splits to take model inputs from; pass "
                        "data_splits={'test': [batch, ...]} or use TorchProfiler.from_inputs(model, example)")
    return "test" if "test" in data_splits else next(iter(data_splits))


def moved(args: tuple, kwargs: Mapping[str, Any], device: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` with every tensor moved to ``device`` (the caller's tensors are not changed).

    ``device``: a ``torch.device`` as is, or anything ``Device.parse`` reads (``"gpu"``, ``"cuda:1"``)."""
    target = device if isinstance(device, torch.device) else torch.device(str(Device.parse(device)))
    return tree_map(lambda t: t.to(target) if isinstance(t, torch.Tensor) else t, (tuple(args), dict(kwargs)))


@contextlib.contextmanager
def inference_mode_of(model: torch.nn.Module, mode: str = "eval") -> Iterator[None]:
    """Run the model in ``mode`` (``'eval'`` or ``'train'``) and restore every module's own flag after."""
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train', got {mode!r}")
    flags = [(m, m.training) for m in model.modules()]
    try:
        try:
            model.train(mode == "train")
        except NotImplementedError:  # torch.export modules have no train()/eval(): run them as exported
            pass
        yield
    finally:
        for module, training in flags:
            module.training = training


# -- devices --------------------------------------------------------------------------------------
def available_devices() -> list[str]:
    """Devices torch can run on here: ``'cpu'``, then ``'cuda:0'``, ``'cuda:1'``, ... if any."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ["cpu", *(f"cuda:{i}" for i in range(count))]


def checked_device(device: Any, argument: str = "device") -> torch.device:
    """``device`` (``'cpu'``, ``'gpu'``, ``'cuda:N'``, a ``torch.device``) as a ``torch.device`` present here.

    Raises ``ValueError`` naming ``argument`` and the available devices when it is unknown or
    absent (``'cuda'`` on a machine or a torch build without CUDA).
    """
    try:
        parsed = str(Device.parse(device))
    except ValueError:
        try:
            return torch.device(device)  # another torch device type ('mps', 'xpu'): torch checks it when used
        except (RuntimeError, TypeError):
            raise ValueError(f"{argument}={device!r} is not a device; use 'cpu', 'gpu' or 'cuda', 'cuda:N' "
                             f"(available here: {', '.join(map(repr, available_devices()))})") from None
    target = torch.device(parsed)
    if target.type == "cuda":
        present = available_devices()[1:]
        index = target.index or 0
        if index >= len(present):
            why = ("this torch is built without CUDA" if not torch.backends.cuda.is_built() else
                   "no CUDA device is visible" if not present else f"it has {len(present)} CUDA device(s)")
            raise unavailable(device, available_devices(), argument, "torch", why)
    return target


# -- a one-call profile's inputs ------------------------------------------------------------------
def _first_leaf(named_modules: list[tuple[str, nn.Module]]) -> tuple[str, nn.Module] | None:
    for name, module in named_modules:
        if not list(module.children()) and any(True for _ in module.parameters(recurse=False)):
            return name, module
    return None


def profile_inputs(model: nn.Module, input_shape: Sequence[int] | None, args: Any, kwargs: Any,
            on_meta: bool) -> tuple[tuple, dict, bool]:
    """``(args, kwargs, built)``: the call's inputs; ``built`` when made from ``input_shape``."""
    if input_shape is not None and (args is not None or kwargs is not None):
        raise ValueError("pass either input_shape=... (one float tensor) or args=/kwargs=, not both")
    if input_shape is None:
        if args is None and kwargs is None:
            raise ValueError(f"get_model_profile needs the inputs of {type(model).__name__}: input_shape=(batch, ...) "
                             "for a model that takes one float tensor, or args=(...)/kwargs={...} otherwise")
        if isinstance(args, torch.Tensor):
            args = (args,)
        return tuple(args or ()), dict(kwargs or {}), False
    try:
        shape = tuple(int(d) for d in input_shape)
    except (TypeError, ValueError):
        raise ValueError(f"input_shape must be a sequence of ints (batch dimension included), got {input_shape!r}") \
            from None
    leaf = _first_leaf(list(model.named_modules()))
    if leaf is not None and isinstance(leaf[1], (nn.Embedding, nn.EmbeddingBag)):
        raise ValueError(f"input_shape builds a float tensor, but the first layer of {type(model).__name__}, "
                         f"{leaf[0]!r} ({type(leaf[1]).__name__}), takes integer ids: pass the inputs instead, e.g. "
                         f"args=(torch.randint(0, {leaf[1].num_embeddings}, {shape}),)")
    floats = [p for p in itertools.chain(model.parameters(), model.buffers()) if p.is_floating_point()]
    if any(not p.is_floating_point() for p in model.parameters()) and not floats:
        raise ValueError(f"input_shape builds a float tensor, but {type(model).__name__} has no floating-point "
                         "parameters (quantized or integer model?): pass args=/kwargs= with the inputs it takes")
    dtype = floats[0].dtype if floats else torch.get_default_dtype()
    if on_meta:
        return (torch.empty(shape, dtype=dtype, device="meta"),), {}, True
    device = floats[0].device if floats else torch.device("cpu")
    generator = torch.Generator(device).manual_seed(0)  # its own generator: the global one is left as found
    return (torch.randn(shape, dtype=dtype, device=device, generator=generator),), {}, True


# -- failures explained by the inputs -------------------------------------------------------------
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
    """Re-raise a failure of the body caused by how ``taken`` was built as one ``ForwardError``.

    The profiler takes the model inputs from the first batch of a split through a ``ForwardPass``
    and resizes them to ``batch_size``. Three mistakes then surface as a framework error far from
    their cause, and are re-raised as one ``ForwardError`` that says what the profiler did and how
    to change it (the framework error is chained as the cause):

    * a ``torch.export`` program exported with a fixed batch, given another batch size (often the
      profiler's own resizing to ``batch_size``, default 1);
    * numpy arrays given to a torch model;
    * a tuple or list taken as the one model input (a batch ``((x,), y)`` read by the default
      ``ForwardPass``).

    Any other failure propagates unchanged.
    """
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


# -- the torch tensor adapter ---------------------------------------------------------------------
# (memory format, rank) pairs that ``take`` keeps when the source tensor uses them, so that
# timing a resized channels-last input measures the same kernels as the original.
_MEMORY_FORMATS = ((torch.channels_last, 4), (torch.channels_last_3d, 5))


class TorchAdapter:
    """``torch.Tensor`` (and subclasses such as ``nn.Parameter``)."""

    name = "torch"

    def is_tensor(self, x: object) -> bool:
        return isinstance(x, torch.Tensor)

    def describe(self, x: torch.Tensor) -> str:
        return describe_tensor(x)  # (one spelling for every message: ``Tensor[float32, 8x3x32x32]``)

    def batch_dim(self, x: torch.Tensor) -> int | None:
        return int(x.size(0)) if x.dim() > 0 else None  # (size(0): a nested tensor has no .shape)

    def take(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """``n`` samples of ``x`` along dim 0: ``x[:n]`` (a view) or rows ``i % len(x)`` (a copy).

        The result has ``x``'s dtype, device, per-sample shape and channels-last layout; when
        ``x`` requires grad the result is a new leaf that requires grad too.
        """
        batch = self.batch_dim(x)
        if batch is None:
            raise ValueError(f"cannot take samples from a 0-d tensor {self.describe(x)}")
        if n == batch:
            return x
        source = x.detach()
        if x.is_nested:  # components chosen as below, nested again (nested tensors have no index_select)
            parts = source.unbind()
            chosen = parts[:n] if n < batch else [parts[i] for i in cyclic_indices(batch, n)]
            return torch.nested.as_nested_tensor(list(chosen), layout=x.layout).requires_grad_(x.requires_grad)
        if n < batch:
            out = source[:n]
        else:
            index = torch.arange(n, dtype=torch.long, device=x.device) % batch  # cyclic_indices, no Python list
            out = source.index_select(0, index)
            for memory_format, rank in _MEMORY_FORMATS:
                if x.dim() == rank and not x.is_contiguous() and x.is_contiguous(memory_format=memory_format):
                    out = out.contiguous(memory_format=memory_format)
        return out.requires_grad_(x.requires_grad)


def check_torch_split(split: str, obj: object) -> None:
    """Refuse a bare map-style ``Dataset`` as a split: iterating it yields single samples.

    ``torch.utils.data.DataLoader`` splits need nothing special: a loader is re-iterable, and each
    item it yields is one batch. The default collate turns ``(x, y)`` samples into a list ``[x, y]``
    and dict samples into a dict of batched tensors; both fit ``ForwardPass``. With
    ``batch_size=None`` (automatic batching off) the loader yields the dataset's items unchanged, so
    they must already be whole batches. A bare map-style ``Dataset`` yields single samples and is
    refused with a hint to wrap it in a ``DataLoader``; an ``IterableDataset`` is accepted and its
    items are taken as batches.
    """
    if isinstance(obj, Dataset) and not isinstance(obj, (DataLoader, IterableDataset)):
        raise DataError(
            f"split {split!r}: it is a {type(obj).__name__} (a map-style Dataset), which yields "
            f"single samples, not batches; wrap it: DataLoader(dataset, batch_size=...)"
        )


register_adapter(TorchAdapter())
register_split_check(check_torch_split)


# -- deeplite-profiler's torch data-loader classes ---------------------------------------------
class TorchTensorSampler(TensorSampler):
    """deeplite's ``TorchTensorSampler``: describes torch tensors (numpy arrays are converted), per sample."""

    def _standardize_tensor(self, x: Any) -> torch.Tensor:
        if isinstance(x, np.ndarray):
            return torch.from_numpy(x)
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"TorchTensorSampler: {type(x).__name__} is not a torch.Tensor or a numpy array")
        return x

    def _create_random_tensor(self, x_info: TensorInfo, batch_size: int) -> torch.Tensor:
        if x_info.dtype.is_complex:
            raise RuntimeError(f"TorchTensorSampler makes no random {x_info.dtype} tensors (complex numbers)")
        return torch.rand(batch_size, *x_info.shp).to(x_info.dtype)

    def _get_info(self, x: torch.Tensor) -> tuple[torch.Size, torch.dtype]:
        return x.shape[1:], x.dtype  # (the batch axis stripped)

    def to_device(self, tensors_tuple: tuple, device: Any, standardize: bool = True) -> tuple:
        """The tensors moved to ``device`` (a ``Device``, or a name); the model is not moved."""
        target = torch.device(str(Device(device)) if not isinstance(device, torch.device) else device)
        if standardize:
            tensors_tuple = self.standardize_tensors(tensors_tuple)
        return self._loop_over_tensors_tuple(tensors_tuple, lambda x: x.to(target))


class TorchForwardPass(ForwardPass):
    """deeplite's ``TorchForwardPass``: a ``ForwardPass`` whose ``model_call`` feeds torch tensors.

    Unlike deeplite's, ``model_call`` never moves the model: the inputs go to the device the
    model's parameters are on, and a ``device`` other than that one is an error that says so.
    """

    @property
    def _tensor_sampler_cls(self) -> type[TorchTensorSampler]:
        return TorchTensorSampler

    def model_call(self, model: Any, x: Any, device: Any = None) -> Any:
        if not self.expecting_common_inputs:
            raise TypeError(f"{type(self).__name__}.model_call: with expecting_common_inputs=False, define model_call "
                            "in the subclass (the default feeds tensors, or tuples / lists / dicts of tensors)")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"{type(self).__name__}.model_call: the model must be a torch.nn.Module, got "
                            f"{type(model).__name__}")
        where = next((t.device for t in (*model.parameters(), *model.buffers())), torch.device("cpu"))
        if device is not None and torch.device(str(Device(device))).type != where.type:
            raise ValueError(f"{type(self).__name__}.model_call(device={device}): the model is on {where}; move the "
                             f"model there yourself (the profiler never moves a model), or pass device={where.type!r}")
        inputs = x if isinstance(x, Inputs) else Inputs(x if isinstance(x, (tuple, list)) else (x,))

        def to(leaf: Any) -> Any:
            return leaf.to(where) if isinstance(leaf, torch.Tensor) else leaf

        return model(*pytree.tree_map(to, inputs.args), **pytree.tree_map(to, dict(inputs.kwargs)))


class TorchDataLoader(LoaderBase):
    """deeplite's ``TorchDataLoader``: wraps a ``torch.utils.data.DataLoader`` (or any sized iterable)."""

    def dump_native_info(self) -> None:
        return None

    def load_native_info(self, native_state: Any) -> "TorchDataLoader":
        return self

    def __len__(self) -> int:
        return len(self.native_dl)

    def _create_iter(self) -> Any:
        return iter(self.native_dl)

    @property
    def batch_size(self) -> int:
        size = getattr(self.native_dl, "batch_size", None)
        if size is None:
            raise TypeError(f"TorchDataLoader.batch_size: the wrapped {type(self.native_dl).__name__} has no "
                            "batch_size")
        return size
