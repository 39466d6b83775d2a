"""Facts about the tensors of a run, written once for every measuring pass (counting, memory, profiles, timing).

* Finding them: ``tensors_in`` (inputs or outputs, in any nesting of containers and mappings),
  ``meta_like`` (a meta twin), ``loss_of`` (the scalar a counted backward differentiates),
  ``batch_size_of`` / ``required_batch_size`` / ``first_tensor_batch`` (the batch of the inputs).
* Local shards: what one rank holds of a ``DTensor`` (tensor parallel, FSDP2 parameters):
  ``local_tensor``, ``local_numel``, ``is_dtensor``, ``is_fully_sharded``.
* Nested tensors (``torch.nested``, both layouts) as the counting engine and its formulas see
  them: ``price_per_component``.
* How a call's arguments read in error messages (``describe_args``):
  ``(Tensor[float32, 2x3], mask=Tensor[bool, 2])``.
* What the per-layer table shows of a module call (``layer_facts``): input and output shapes,
  output bytes, never the tensors.
* Storages and their live bytes: ``storage_key``, ``tensor_span``, ``spanned_bytes``, ``StorageLedger``;
  the bytes each operator reads and writes: ``TrafficLog``.
"""
from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_leaves

from deeplite_like.data import format_shape
from deeplite_like.errors import BackwardError
from deeplite_like.results import ActivationMemory, Cost, OpCount, OpRecord, attach_records

__all__ = ["LayerFacts", "MemoryStats", "StorageLedger", "any_nested", "batch_size_of", "component_shapes",
           "describe_args", "describe_nested", "describe_tensor", "first_tensor_batch", "input_shapes",
           "is_dtensor", "is_fully_sharded", "layer_facts", "local_numel", "local_tensor", "loss_of",
           "TrafficLog", "memory_stats", "meta_like", "price_per_component", "required_batch_size", "shape_text",
           "spanned_bytes", "storage_key", "storage_parts", "tensor_leaves", "tensor_span", "tensors_in"]


def tensors_in(tree: Any) -> Iterator[torch.Tensor]:
    """Tensors in any nesting of pytree containers and mappings (e.g. dict-like model outputs)."""
    for leaf in pytree.tree_leaves(tree):
        if isinstance(leaf, torch.Tensor):
            yield leaf
        elif isinstance(leaf, Mapping):
            yield from tensors_in(list(leaf.values()))


def meta_like(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with the shape, strides, dtype and ``requires_grad`` of ``tensor``."""
    meta = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device="meta")
    return meta.requires_grad_(True) if tensor.requires_grad else meta


def loss_of(output: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> torch.Tensor:
    """``loss_fn(output)``, or the sum of every floating-point output tensor that requires grad.

    Raises ``BackwardError`` when ``loss_fn`` raises, when nothing can be differentiated, or when
    the loss is not a one-element tensor that requires grad.
    """
    if loss_fn is not None:
        try:
            loss = loss_fn(output)
        except Exception as exc:
            raise BackwardError(f"loss_fn raised on the model output: {type(exc).__name__}: {exc}") from exc
    else:
        outputs = [t for t in tensors_in(output) if t.is_floating_point() and t.requires_grad]
        if not outputs:
            raise BackwardError("backward=True: the model output has no floating-point tensor that requires "
                                f"grad (got {type(output).__name__}); pass loss_fn=... returning a scalar to "
                                "differentiate")
        loss = outputs[0].sum()
        for tensor in outputs[1:]:
            loss = loss + tensor.sum()
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad):
        raise BackwardError("backward=True: the loss must be a one-element tensor that requires grad, got "
                            f"{describe_args((loss,), {})}; check loss_fn")
    return loss


def batch_size_of(args: Any, kwargs: Any = None) -> int | None:
    """The leading dimension of the first input tensor that has one, else ``None``."""
    for tensor in tensors_in((args, kwargs or {})):
        if tensor.dim() > 0:
            return int(tensor.size(0))  # (size(0): a nested tensor has no .shape)
    return None


def input_shapes(args: Any, kwargs: Any = None) -> list[tuple[int, ...]]:
    """The shapes of the input tensors (nested tensors, which have no single shape, left out)."""
    return [tuple(t.shape) for t in tensors_in((args, kwargs or {})) if not t.is_nested]


def first_tensor_batch(args: Any, kwargs: Any = None) -> int | None:
    """The leading dimension of the *first* input tensor; ``None`` when it is a scalar (a count's
    batch is unknown then: ``count_ops(model, scale, x)`` does not guess that ``x`` is the batch)."""
    if isinstance(args, tuple) and args and isinstance(args[0], torch.Tensor):  # the usual call: no pytree walk
        return int(args[0].size(0)) if args[0].dim() > 0 else None
    for tensor in tensors_in((args, kwargs or {})):
        return int(tensor.size(0)) if tensor.dim() > 0 else None
    return None


def required_batch_size(args: Any, kwargs: Any = None) -> int:
    """``batch_size_of``, or a ``ValueError`` saying to pass ``batch_size=`` when no input has a batch axis."""
    batch = batch_size_of(args, kwargs)
    if batch is None:
        raise ValueError("cannot infer the batch size: no input tensor has a leading dimension; "
                         "pass batch_size=... explicitly")
    return batch


# -- local shards of a DTensor --------------------------------------------------------------------
def _dtensor_class() -> type | None:
    api = sys.modules.get("torch.distributed.tensor._api")
    return getattr(api, "DTensor", None) if api is not None else None


def is_dtensor(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a ``DTensor`` (a parameter sharded or replicated over a device mesh).

    ``torch.distributed.tensor`` is looked up in ``sys.modules``, never imported: when it is not
    loaded no DTensor exists, and every tensor is its own local shard.
    """
    cls = _dtensor_class()
    return cls is not None and isinstance(tensor, cls)


def local_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a ``DTensor`` (a plain tensor); any other tensor itself.

    The DTensor's own local tensor, not ``to_local()``: that makes a new view at each call, and
    callers tell tensors apart by identity (``params._Counter``).
    """
    return tensor._local_tensor if is_dtensor(tensor) else tensor


def local_numel(tensor: torch.Tensor) -> int:
    """Elements this rank holds of ``tensor``: its local shard's for a ``DTensor``, else ``numel()``."""
    return local_tensor(tensor).numel()


def is_fully_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` or a submodule is an FSDP2 unit (``torch.distributed.fsdp.fully_shard``).

    Between steps such a unit holds sharded ``DTensor`` parameters; its forward gathers them
    into plain unsharded parameters, which are what autograd differentiates.
    """
    fsdp = sys.modules.get("torch.distributed.fsdp._fully_shard._fully_shard")
    unit = getattr(fsdp, "FSDPModule", None) if fsdp is not None else None
    return unit is not None and any(isinstance(module, unit) for module in model.modules())


# -- nested tensors -------------------------------------------------------------------------------
def _is_nested(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_nested


def any_nested(args: tuple, kwargs: dict) -> bool:
    """Whether a nested tensor is among the arguments (top level or inside a list/tuple)."""
    for value in (*args, *kwargs.values()):
        if _is_nested(value) or (isinstance(value, (list, tuple)) and any(_is_nested(v) for v in value)):
            return True
    return False


def component_shapes(tensor: torch.Tensor) -> list[tuple[int, ...]]:
    """The shapes of a nested tensor's components, in order (views: no data is copied)."""
    return [tuple(map(int, part.shape)) for part in tensor.unbind()]


def describe_nested(tensor: torch.Tensor) -> str:
    """``NestedTensor[float32, 12x64, 8x64]``: its dtype and components' shapes, for error messages."""
    shapes = ", ".join(format_shape(s) for s in component_shapes(tensor))
    return f"NestedTensor[{_dtype_name(tensor)}, {shapes}{_device_suffix(tensor)}]"


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _device_suffix(tensor: torch.Tensor) -> str:
    return "" if tensor.device.type == "cpu" else f", {tensor.device}"


def _component(value: Any, index: int, cache: dict[int, list[tuple[int, ...]]]) -> Any:
    """``value`` with every nested tensor replaced by a meta stand-in for its ``index``-th component."""
    if _is_nested(value):
        shapes = cache.get(id(value))
        if shapes is None:
            shapes = cache[id(value)] = component_shapes(value)
        return torch.empty((1, *shapes[index]), dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)) and any(_is_nested(v) for v in value):
        return type(value)(_component(v, index, cache) for v in value)
    return value


def _count(values: Any) -> int:
    """Components of the first nested tensor found (its ``size(0)``)."""
    for value in values:
        if _is_nested(value):
            return int(value.size(0))
        if isinstance(value, (list, tuple)):
            found = _count(value)
            if found:
                return found
    return 0


def price_per_component(formula: Callable[[Any], Cost], make_call: Callable[[tuple, dict, Any], Any],
                        args: tuple, kwargs: dict, out: Any) -> tuple[int, int]:
    """``(macs, flops)`` of an op on nested tensors: the formula summed over the components.

    A nested tensor holds ``B`` components of different shapes: it has no single ``shape`` (the
    strided layout raises ``NestedTensorImpl doesn't support sizes``; the jagged layout has a
    symbolic ragged size that is no ``int``). Formulas read shapes, so an op on nested tensors
    is priced as the sum of the same op over its components: component ``i`` of every nested
    argument and output, given as a meta tensor of shape ``(1, *component_shape)`` (same rank as
    the nested tensor, so a formula indexing dimensions from either end reads the same sizes). Dense arguments (weights, biases) are passed to every
    component unchanged. This is exact for the ops a nested tensor runs through (linear,
    elementwise, norms over the last dimension, softmax, attention per sequence), which is what
    ``nn.TransformerEncoder`` and ``torch.nested`` users run.

    ``make_call(args, kwargs, out)`` builds the ``OpCall`` the formula receives for one component.
    """
    count = _count((*args, *kwargs.values()))
    cache: dict[int, list[tuple[int, ...]]] = {}
    macs = flops = 0
    for index in range(count):
        part_args = tuple(_component(a, index, cache) for a in args)
        part_kwargs = {k: _component(v, index, cache) for k, v in kwargs.items()}
        part_out = _component(out, index, cache) if _count((out,)) == count else out
        part_macs, part_flops = formula(make_call(part_args, part_kwargs, part_out))
        macs += int(part_macs)
        flops += int(part_flops)
    return macs, flops


# -- arguments, as error messages show them -------------------------------------------------------
def describe_tensor(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        if value.is_nested:  # no single shape: its components'
            return describe_nested(value)
        return f"{type(value).__name__}[{_dtype_name(value)}, {format_shape(tuple(value.shape))}{_device_suffix(value)}]"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe_tensor(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {describe_tensor(v)}" for k, v in value.items()) + "}"
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__}(...)"


def describe_args(args: tuple, kwargs: dict) -> str:
    """``(Tensor[float32, 2x3], mask=Tensor[bool, 2])``: what a call received, for error messages."""
    parts = [describe_tensor(a) for a in args] + [f"{k}={describe_tensor(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


# -- what the per-layer table keeps of a module call ----------------------------------------------
class LayerFacts:
    """A module call as the per-layer table shows it: ``input_shapes``, ``output_shapes`` (text;
    several tensors comma-separated) and ``activation_bytes`` (the outputs' numel x element size)."""

    __slots__ = ("_inputs", "_outputs", "activation_bytes")

    def __init__(self, inputs: tuple, outputs: tuple, activation_bytes: int) -> None:
        self._inputs, self._outputs, self.activation_bytes = inputs, outputs, activation_bytes

    @property
    def input_shapes(self) -> str:
        return _text(self._inputs)

    @property
    def output_shapes(self) -> str:
        return _text(self._outputs)

    def __repr__(self) -> str:
        return f"LayerFacts({self.input_shapes!r}, {self.output_shapes!r}, {self.activation_bytes})"


def shape_text(t: torch.Tensor) -> str:
    """``"8x64"``; ``"scalar"``; a nested tensor has no single shape: its components', ``"nested(12x64, 8x64)"``."""
    if t.is_nested:
        return f"nested({', '.join(shape_text(part) for part in t.unbind())})"
    return format_shape(t.shape)


def _text(shapes: tuple) -> str:
    return ", ".join(s if isinstance(s, str) else format_shape(s) for s in shapes)


def _tensors(value: Any) -> list[torch.Tensor]:
    if type(value) is torch.Tensor:
        return [value]
    if type(value) is tuple and all(type(v) is torch.Tensor for v in value):
        return list(value)
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def layer_facts(args: tuple, kwargs: dict, output: Any) -> LayerFacts:
    """The facts of one call ``module(*args, **kwargs) -> output``.

    Read by the observation pass (``counting/recorder.py``) at each module's first call, right after
    its forward returned. Only metadata is kept, never the tensors (which would stay alive and
    change the peak memory measured in the same pass); shapes are kept as ``torch.Size``s and
    written out (``"1x3x224x224"``) only when the table asks.
    """
    inputs = _tensors(args) + (_tensors(kwargs) if kwargs else [])
    outputs = _tensors(output)
    if any(t.is_nested for t in inputs + outputs):  # unbind runs operators: not the model's, not observed
        with _disable_current_modes():
            return LayerFacts(tuple(map(shape_text, inputs)), tuple(map(shape_text, outputs)), _bytes(outputs))
    return LayerFacts(tuple(t.shape for t in inputs), tuple(t.shape for t in outputs), _bytes(outputs))


def _bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


# -- storages and their live bytes ----------------------------------------------------------------
def tensor_span(tensor: torch.Tensor) -> tuple[int, int]:
    """Half-open byte interval ``[start, end)`` of its storage that ``tensor`` can touch."""
    if tensor.is_nested:  # its components lie in one buffer, the whole storage (no single shape/stride)
        return 0, tensor.untyped_storage().nbytes()
    size = tensor.element_size()
    start = tensor.storage_offset() * size
    if tensor.numel() == 0:
        return start, start
    last = sum((n - 1) * abs(s) for n, s in zip(tensor.shape, tensor.stride()))
    return start, start + (last + 1) * size


@dataclass(frozen=True)
class MemoryStats(ActivationMemory):
    """Activation memory of one forward pass, in bytes (the fields: ``measurements.ActivationMemory``).

    ``output_bytes`` are the storages the outputs keep alive; ``end_bytes`` includes, in
    ``grad`` mode, the tensors saved for backward. ``meta``: measured on the meta device.
    """

    grad: bool
    meta: bool


def storage_key(tensor: torch.Tensor) -> tuple[str, int] | None:
    """Identity of a tensor's storage (valid on meta too; a DTensor's is its local shard's); None without one."""
    if type(tensor) is torch.Tensor and tensor.layout is torch.strided:  # the usual case, without the checks below
        return str(tensor.device), tensor.untyped_storage()._cdata
    tensor = local_tensor(tensor)
    if type(tensor).__name__ == "AsyncCollectiveTensor":  # a functional collective's pending result
        tensor = tensor.elem
    if type(tensor) not in (torch.Tensor, nn.Parameter) or tensor.is_sparse:
        return None
    return str(tensor.device), tensor.untyped_storage()._cdata


def storage_parts(tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The strided tensors that hold ``tensor``'s bytes: a sparse COO tensor's indices and values (a
    sparse gradient, ``nn.Embedding(sparse=True)``), a compressed one's index arrays and values; any
    other tensor itself. A sparse tensor has no storage of its own: its parts do."""
    layout = tensor.layout
    if layout is torch.strided:
        return (tensor,)
    if layout is torch.sparse_coo:
        return tensor._indices(), tensor._values()
    if layout in (torch.sparse_csr, torch.sparse_bsr):
        return tensor.crow_indices(), tensor.col_indices(), tensor.values()
    if layout in (torch.sparse_csc, torch.sparse_bsc):
        return tensor.ccol_indices(), tensor.row_indices(), tensor.values()
    return (tensor,)


def spanned_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes the tensors cover: per storage, the length of the union of their byte spans.

    Used for inputs: a batch sliced out of a larger one (``x[:n]``, a view) costs the bytes of
    its ``n`` samples, not of the whole storage it happens to live in.
    """
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for tensor in tensors:
        key = storage_key(tensor)
        if key is not None:
            spans.setdefault(key, []).append(tensor_span(tensor))
    total = 0
    for intervals in spans.values():
        end = None
        for lo, hi in sorted(intervals):
            if end is None or lo >= end:
                total += hi - lo
                end = hi
            elif hi > end:
                total += hi - end
                end = hi
    return total


def tensor_leaves(tree: Any) -> list[torch.Tensor]:
    """The tensors in ``tree`` (``tensors_in``: mappings too), a DTensor as this rank's local shard."""
    return [local_tensor(tensor) for tensor in tensors_in(tree)]


class StorageLedger:
    """Live bytes of the storages that operators allocate, and their peak; ``memory.py`` says what it measures.

    Not a mode itself: whatever sees each operator calls ``count(func, out)`` after it ran
    (the counting pass, ``counting/recorder.py``, or ``training/step.StepTracker``). ``where()``
    names the innermost module running, for ``peak_module``.

    A dispatch mode sees every ATen operator of the forward. Each output
    that the operator's schema does not declare as an alias of an input (views and in-place /
    ``out=`` results are aliases: they allocate nothing) is a fresh allocation; its untyped
    storage is recorded once (a storage shared by several outputs counts once) with its
    ``nbytes``, and a ``weakref.finalize`` on the storage subtracts those bytes the moment the
    storage is freed. Live bytes are therefore exact at every operator boundary, and the peak
    is the largest value reached right after an operator allocated its outputs (its inputs
    still alive, as they must be while it runs).
    """

    def __init__(self, base_bytes: int, external: set[tuple[str, int]], where: Callable[[], str]) -> None:
        self.base = base_bytes
        self.live = base_bytes
        self.peak = base_bytes
        self.allocated = 0
        self.peak_op = "(inputs)"
        self.peak_module = ""
        self._external = external
        self._where = where
        self._bytes: dict[tuple[str, int], int] = {}
        self._finalizers: dict[tuple[str, int], weakref.finalize] = {}

    def count(self, func: Any, out: Any) -> None:
        """After an operator ran: the storages its outputs created (not views, not written arguments), the peak."""
        returns = func._schema.returns
        values = out if isinstance(out, (tuple, list)) and len(returns) == len(out) and len(returns) > 1 else (out,)
        for ret, value in zip(returns, values):
            if ret.alias_info is not None:
                # a view, or the written-to argument of an in-place / out= op: nothing new, unless it is
                # sparse (``buf.add_(grad)`` on sparse tensors replaces buf's indices and values)
                if isinstance(value, torch.Tensor) and value.layout is not torch.strided:
                    self._allocated(value)
                continue
            if type(value) is torch.Tensor:  # (most ops: one plain tensor, no tree to walk)
                self._allocated(value)
                continue
            for tensor in tensor_leaves(value):
                self._allocated(tensor)
        if self.live > self.peak:
            self.peak = self.live
            self.peak_op = str(func)
            self.peak_module = self._where()

    def _allocated(self, tensor: torch.Tensor) -> None:
        if tensor.layout is not torch.strided:  # (a sparse tensor: the storages of its indices and values)
            for part in storage_parts(tensor):
                self._allocated_storage(part)
        else:
            self._allocated_storage(tensor)

    def _allocated_storage(self, tensor: torch.Tensor) -> None:
        key = storage_key(tensor)
        if key is None or key in self._bytes or key in self._external:
            return
        storage = tensor.untyped_storage()
        nbytes = storage.nbytes()
        self._bytes[key] = nbytes
        self.live += nbytes
        self.allocated += nbytes
        self._finalizers[key] = weakref.finalize(storage, self._freed, key)

    def _freed(self, key: tuple[str, int]) -> None:
        self.live -= self._bytes.pop(key)
        self._finalizers.pop(key, None)

    def held_bytes(self, tensors: list[torch.Tensor]) -> int:
        """Bytes ``tensors`` keep alive: whole storages allocated during the forward (a view
        holds all of its storage), the spanned bytes of any other storage (an input returned)."""
        own: dict[tuple[str, int], int] = {}
        other = []
        for tensor in (part for t in tensors for part in storage_parts(t)):
            key = storage_key(tensor)
            if key in self._bytes:
                own[key] = self._bytes[key]
            elif key is not None:
                other.append(tensor)
        return sum(own.values()) + spanned_bytes(other)

    def detach_all(self) -> None:
        """Drop the finalizers still pending, so nothing refers back to this ledger."""
        for finalizer in list(self._finalizers.values()):
            finalizer.detach()
        self._finalizers.clear()


def memory_stats(ledger: StorageLedger, output: Any, meta: bool, grad: bool, batch_size: int = 1) -> MemoryStats:
    """The ``MemoryStats`` of a forward that just returned ``output`` (still alive), from its ledger."""
    input_bytes = ledger.base
    return MemoryStats(peak_bytes=ledger.peak, input_bytes=input_bytes,
                       output_bytes=ledger.held_bytes(tensor_leaves(output)), end_bytes=ledger.live,
                       allocated_bytes=ledger.allocated, batch_size=batch_size,
                       per_sample_peak_bytes=ledger.peak / batch_size, peak_op=ledger.peak_op,
                       peak_module=ledger.peak_module, grad=grad, meta=meta)


_NO_DATA = frozenset(("aten.empty", "aten.empty_strided", "aten.empty_like", "aten.new_empty",
                      "aten.new_empty_strided", "aten.resize_", "aten.set_", "aten.lift_fresh"))


def _flat_tensors(values: Any) -> list[torch.Tensor]:
    """The strided tensors among an operator's arguments or outputs (tensors, and lists of them); a
    nested tensor stands for its buffer (every component); sparse tensors are left out."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(item for item in value if isinstance(item, torch.Tensor))
    return [t if t.layout is torch.strided and not t.is_nested else _buffer(t) for t in found
            if t.layout in (torch.strided, torch.jagged)]


def _buffer(tensor: torch.Tensor) -> torch.Tensor:
    """A nested tensor's one buffer, as a plain tensor: its components, all of them."""
    if tensor.layout is torch.jagged:
        return tensor.values()
    storage = tensor.untyped_storage()
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(storage, 0, (storage.nbytes(),))


def _traffic_key(tensor: torch.Tensor) -> Any:
    """A storage's identity for ``TrafficLog`` (its address in memory, on any device; a DTensor's local shard's)."""
    if type(tensor) is not torch.Tensor:
        tensor = local_tensor(tensor)
    return tensor.untyped_storage()._cdata


# look-ups: operator -> position of the tensor they select from (read: what they select, at most)
_GATHERS = {"aten.embedding": 0, "aten.index_select": 0, "aten.gather": 0, "aten.index": 0, "aten.take": 0,
            "aten._embedding_bag": 0, "aten.embedding_bag": 0}
# in-place scatters: operator -> (position of the tensor whose elements count what is written, whether the
# op reads what it overwrites). ``index_copy_``/``index_add_`` write their source's elements; ``scatter_`` and
# ``scatter_add_`` one element per index (a KV cache's ``index_copy_`` writes the new token, not the cache)
_SCATTERS = {"aten.index_copy_": (3, False), "aten.index_add_": (3, True), "aten.scatter_": (2, False),
             "aten.scatter_add_": (2, True)}


def touched_bytes(tensor: torch.Tensor) -> int:
    """Bytes of the distinct elements ``tensor`` covers: a broadcast (stride 0) dimension counts once."""
    count = 1
    for size, stride in zip(tensor.shape, tensor.stride()):
        if stride != 0:
            count *= size
    return count * tensor.element_size()


def _widest_float(tensors: list[torch.Tensor]) -> str:
    best = None
    for tensor in tensors:
        dtype = tensor.dtype
        if dtype.is_floating_point and (best is None or not best.is_floating_point or dtype.itemsize > best.itemsize):
            best = dtype
        elif best is None:
            best = dtype
    return "" if best is None else str(best).removeprefix("torch.")


class TrafficLog:
    """The bytes each operator call reads and writes, one ``OpRecord`` per call (``OpCount.records``).

    The convention (``docs/conventions.rst``, "Bytes moved"): an op reads every distinct storage
    among its tensor arguments (weights, buffers and inputs alike) and writes every storage among
    its outputs, each at its dtype, once per op: the views of one storage add their distinct
    elements (a broadcast dimension counts once: a bias expanded over a batch is read once), up to
    the storage's size. A view (``t``, ``view``, ``expand``, ``detach``, and an op whose outputs
    all lie on its arguments' storages without writing them, ``_unsafe_view``) moves nothing and
    leaves no record; an allocation that writes nothing (``empty``) leaves none either. An
    in-place op reads and writes its ``self``. A look-up (``embedding``, ``index_select``,
    ``gather``, ``index``) reads of its table what it selects: at most its output's bytes; an in-place
    scatter (``index_copy_``, ``index_add_``, ``scatter_``, ``scatter_add_``) writes of its ``self`` what
    it scatters, and reads those elements only when it adds to them. This is the unfused lower bound: every intermediate goes to
    memory and comes back.

    ``finish`` adds the fused view (``OpRecord.fused_bytes``): a chain of consecutive ops that
    are not contractions (no MACs) between two contractions moves only its ends, as a compiler
    that fuses elementwise work would: a storage one op of the chain writes and a later op of the
    same chain reads is neither written nor read again, unless something after the chain reads it
    too (then it is written once); a storage read by several ops of the chain is read once.
    Contractions move what they move in both views.

    Storages are told apart by identity and by when they were made: a storage an op writes
    that none of its arguments holds is a new one (a freed storage's address may come back).
    """

    def __init__(self) -> None:
        self.records: list[OpRecord] = []
        self._reads: list[list[tuple[int, int]]] = []  # per record: (storage serial, bytes)
        self._writes: list[list[tuple[int, int]]] = []
        self._modules: list[tuple[str, ...]] = []  # per record: the enclosing module calls
        self._serials: dict[int, int] = {}  # storage address -> serial of the storage there now
        self._next = 0

    def _fresh(self) -> int:
        self._next += 1
        return self._next

    def _serial(self, key: int) -> int:
        serial = self._serials.get(key)
        if serial is None:  # a storage made before the count (a weight, an input)
            serial = self._serials[key] = self._fresh()
        return serial

    def record(self, func: Any, name: str, modules: tuple[str, ...], phase: str, macs: int, flops: int,
               args: tuple, kwargs: dict, out: Any) -> None:
        """After an operator ran: what it read and wrote. ``modules``: the enclosing module calls, innermost last."""
        if func.is_view:
            return
        if name in _NO_DATA:
            for tensor in _flat_tensors(out if isinstance(out, (tuple, list)) else (out,)):
                self._serials[_traffic_key(tensor)] = self._fresh()  # a fresh allocation, maybe at an old address
            return
        inputs = _flat_tensors(args)
        if kwargs:
            inputs += _flat_tensors(kwargs.values())
        outputs = _flat_tensors(out if isinstance(out, (tuple, list)) else (out,))
        mutable = func._schema.is_mutable
        if not outputs and not mutable:  # a question about metadata (sizes, layout) or a scalar: no record
            return
        read = self._covered(inputs)
        written = self._covered(outputs)
        if not mutable:  # an output on an argument's storage is an alias (``_unsafe_view``)
            written = {key: nbytes for key, nbytes in written.items() if key not in read}
            if not written:
                return  # a view by another name: moves nothing
        source = _GATHERS.get(name)
        if source is not None and len(args) > source and isinstance(args[source], torch.Tensor):
            key = _traffic_key(args[source])  # a look-up reads the rows it selects, not the table
            if key in read:
                read[key] = min(read[key], sum(written.values()))
        scatter = _SCATTERS.get(name)
        arguments = set(read)  # (a storage among them that the op writes keeps its serial)
        if scatter is not None and len(args) > scatter[0] and isinstance(args[scatter[0]], torch.Tensor):
            key = _traffic_key(args[0])
            if key in written:
                written[key] = min(written[key], args[scatter[0]].numel() * args[0].element_size())
                if scatter[1]:
                    read[key] = min(read[key], written[key])
                else:
                    read.pop(key, None)
        reads = [(self._serial(key), nbytes) for key, nbytes in read.items()]
        writes = []
        for key, nbytes in written.items():
            if key not in arguments:  # a new storage (an in-place / out= result keeps its argument's)
                self._serials[key] = self._fresh()
            writes.append((self._serial(key), nbytes))
        self._reads.append(reads)
        self._writes.append(writes)
        self._modules.append(modules)
        self.records.append(OpRecord(name, modules[-1], phase, macs, flops, sum(b for _, b in reads),
                                     sum(b for _, b in writes), _widest_float(inputs or outputs)))

    @staticmethod
    def _covered(tensors: list[torch.Tensor]) -> dict[int, int]:
        """Storage address -> bytes the tensors cover of it (views add up, up to the storage's size)."""
        covered: dict[int, int] = {}
        sizes: dict[int, int] = {}
        for tensor in tensors:
            if type(tensor) is not torch.Tensor:
                tensor = local_tensor(tensor)
                if storage_key(tensor) is None:
                    continue
            storage = tensor.untyped_storage()
            key = storage._cdata
            covered[key] = covered.get(key, 0) + touched_bytes(tensor)
            if key not in sizes:
                sizes[key] = storage.nbytes()
        return {key: min(nbytes, sizes[key]) for key, nbytes in covered.items()}

    def add(self, name: str, modules: tuple[str, ...], phase: str, macs: int, flops: int) -> None:
        """A cost priced whole (a module formula, a higher-order op): its inner ops carry the bytes."""
        self._reads.append([])
        self._writes.append([])
        self._modules.append(modules)
        self.records.append(OpRecord(name, modules[-1], phase, macs, flops, 0, 0, ""))

    def finish(self, result: OpCount) -> None:
        """Give ``result`` the records, their fused view and the bytes of every row (``results.attach_records``)."""
        attach_records(result, self.records, self._reads, self._writes, self._modules)
