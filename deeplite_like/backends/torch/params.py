"""Parameter and buffer counts and sizes of a PyTorch model, and the per-layer table built on them.

Counts and sizes are in elements and bytes.

The counting rules (tested row by row in ``tests/torch/test_params.py``) are in ``parameter_stats``.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from torch.utils import _pytree as pytree

from deeplite_like.backends.torch.counting.engine import Observation, observe
from deeplite_like.backends.torch.tensors import local_tensor, tensor_span
from deeplite_like.reports import TableReport
from deeplite_like.results import ParamStats
from deeplite_like.units import format_bytes, format_share

__all__ = ["ParamStats", "layer_table", "layerwise_summary", "module_param_counts", "parameter_stats"]


# state_dict entries that are quantization metadata or opaque extra state, not weights.
_EXTRA_BUFFER_NAMES = ("scale", "zero_point", "_extra_state")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _storage_key(tensor: torch.Tensor) -> tuple[str, int] | None:
    """An id of the tensor's storage, valid on every device including meta; None if it has none."""
    try:
        storage = tensor.untyped_storage()
    except (NotImplementedError, RuntimeError):  # sparse / some subclasses have no single storage
        return None
    return str(tensor.device), storage._cdata


class _Counter:
    """Accumulates tensors, skipping those already seen by identity or covered storage span."""

    def __init__(self) -> None:
        self._ids: set[int] = set()
        self._spans: dict[tuple[str, int], list[tuple[int, int]]] = {}

    def is_new(self, tensor: torch.Tensor) -> bool:
        if id(tensor) in self._ids:
            return False
        self._ids.add(id(tensor))
        key = _storage_key(tensor)
        if key is None:
            return True
        lo, hi = tensor_span(tensor)
        spans = self._spans.setdefault(key, [])
        if hi > lo and _covered(lo, hi, spans):
            return False
        spans.append((lo, hi))
        return True


def _covered(lo: int, hi: int, spans: list[tuple[int, int]]) -> bool:
    """Whether ``[lo, hi)`` lies inside the union of ``spans``."""
    position = lo
    for start, end in sorted(spans):
        if start > position:
            break
        position = max(position, end)
        if position >= hi:
            return True
    return False


def _packed_entries(model: nn.Module) -> Iterable[tuple[str, torch.Tensor]]:
    """``(local name, tensor)`` for state_dict tensors that are neither parameters nor buffers.

    A module shared under several names yields its entries once (keyed by module identity).
    """
    registered = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    registered |= {name for name, _ in model.named_buffers(remove_duplicate=False)}
    modules = dict(model.named_modules(remove_duplicate=False))
    seen: set[tuple[int, str]] = set()
    for key, value in model.state_dict(keep_vars=True).items():
        if key in registered:
            continue
        leaves = [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]
        if not leaves:
            continue  # e.g. '_packed_params.dtype' holds a torch.dtype
        prefix, _, local = key.rpartition(".")
        owner = modules.get(prefix)
        ident = (id(owner) if owner is not None else id(model), key if owner is None else local)
        if ident in seen:
            continue
        seen.add(ident)
        for leaf in leaves:
            yield local, leaf


def parameter_stats(model: nn.Module) -> ParamStats:
    """Count ``model``'s parameters (elements) and their bytes, and its buffers apart.

    The sharing, dtype and packed-weight rules are below. Reads shapes and
    dtypes only: a model on the meta device is counted without allocating.

    Rules (tested row by row in ``tests/torch/test_params.py``):

    * A tensor shared by several modules is counted once. Sharing is detected by identity (the
      same ``Parameter`` object registered twice) *and* by storage: two different tensors whose
      elements lie in the same storage (tied weights built with ``nn.Parameter(a.weight.data)``,
      or a transposed view of a weight) are counted once. Precisely, within one storage a tensor
      whose element span is already covered by tensors counted before it adds nothing; distinct
      views into one flat storage (disjoint spans) are all counted.
    * Bytes are ``numel * element_size`` of each tensor's real dtype (fp16 = 2, bf16 = 2,
      int8/qint8 = 1, ...).
    * Packed weights that a module keeps out of ``parameters()`` (``torch.ao.nn.quantized``
      Linear / Conv and their dynamic variants store int8 weights in packed form) are found
      through ``state_dict()``: any tensor entry that is neither a registered parameter nor a
      registered buffer. Entries named ``scale`` / ``zero_point`` (the output quantization
      parameters) or ``_extra_state`` are reported as buffers; every other one (packed weight,
      its bias) counts as a non-trainable parameter.
    * Buffers (BatchNorm running statistics, its int64 ``num_batches_tracked``, ...) are reported
      apart from parameters and never counted in ``total_params``.
    * Under ``torch.distributed`` a ``DTensor`` parameter (tensor parallel, FSDP2) counts its local
      shard: the figures are what this rank holds (``distributed.profile_job`` adds the ranks up).

    Works on meta-device models: only shapes, dtypes and storage identities are read.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"parameter_stats expects a torch.nn.Module, got {type(model).__name__}")
    counter = _Counter()
    elements = {"trainable": 0, "frozen": 0, "buffers": 0}
    by_dtype: dict[str, int] = {}
    buffer_by_dtype: dict[str, int] = {}

    def add(tensor: torch.Tensor, kind: str, bytes_by_dtype: dict[str, int]) -> None:
        if counter.is_new(tensor):
            elements[kind] += tensor.numel()
            name = _dtype_name(tensor.dtype)
            bytes_by_dtype[name] = bytes_by_dtype.get(name, 0) + tensor.numel() * tensor.element_size()

    for param in model.parameters():  # a DTensor counts its local shard: what this rank holds
        add(local_tensor(param), "trainable" if param.requires_grad else "frozen", by_dtype)
    for buffer in model.buffers():
        add(local_tensor(buffer), "buffers", buffer_by_dtype)
    for local, tensor in _packed_entries(model):
        if local in _EXTRA_BUFFER_NAMES or local.endswith("_extra_state"):
            add(tensor, "buffers", buffer_by_dtype)
        else:
            add(tensor, "frozen", by_dtype)

    return ParamStats(
        total_params=elements["trainable"] + elements["frozen"],
        trainable_params=elements["trainable"],
        non_trainable_params=elements["frozen"],
        param_bytes=sum(by_dtype.values()),
        buffer_count=elements["buffers"],
        buffer_bytes=sum(buffer_by_dtype.values()),
        by_dtype=by_dtype,
        buffer_by_dtype=buffer_by_dtype,
    )


def _packed_by_owner(model: nn.Module) -> dict[int, list[torch.Tensor]]:
    """``id(module)`` -> the packed weights it keeps out of ``parameters()`` (not its scale/zero_point)."""
    modules = dict(model.named_modules(remove_duplicate=False))
    owners: dict[int, list[torch.Tensor]] = {}
    registered = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    registered |= {name for name, _ in model.named_buffers(remove_duplicate=False)}
    for key, value in model.state_dict(keep_vars=True).items():
        prefix, _, local = key.rpartition(".")
        if key in registered or local in _EXTRA_BUFFER_NAMES or local.endswith("_extra_state"):
            continue
        owner = modules.get(prefix, model)
        tensors = owners.setdefault(id(owner), [])
        for leaf in pytree.tree_leaves(value):
            if isinstance(leaf, torch.Tensor) and not any(leaf is t for t in tensors):
                tensors.append(leaf)
    return owners


def module_param_counts(model: nn.Module) -> dict[str, int]:
    """Qualified module name -> parameters (elements) in its subtree, for every module of ``model``, in one pass.

    Each value equals ``parameter_stats(module).total_params`` (shared and tied tensors counted
    once per subtree, packed weights included), but the modules are visited once, bottom-up: a
    subtree's count is its own tensors plus its children's counts. Tensors that are shared (the
    same tensor in two places, or two tensors in one storage) are carried up as a short list and
    counted with the sharing rules of ``parameter_stats`` wherever two of them meet.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"module_param_counts expects a torch.nn.Module, got {type(model).__name__}")
    packed = _packed_by_owner(model)
    own: dict[int, list[torch.Tensor]] = {}
    places: dict[int, int] = {}  # id(tensor) -> how many (module, slot) places hold it
    storages: dict[tuple[str, int], set[int]] = {}  # storage -> ids of the tensors in it
    for _, module in model.named_modules(remove_duplicate=False):
        tensors = own.setdefault(id(module), [p for p in module._parameters.values() if p is not None]
                                 + packed.get(id(module), []))
        for tensor in tensors:
            places[id(tensor)] = places.get(id(tensor), 0) + 1
            key = _storage_key(tensor)
            if key is not None:
                storages.setdefault(key, set()).add(id(tensor))
    shared_ids = {ident for ident, n in places.items() if n > 1}
    for ids in storages.values():
        if len(ids) > 1:
            shared_ids |= ids

    totals: dict[int, int] = {}

    def visit(module: nn.Module) -> tuple[int, dict[int, torch.Tensor]]:
        plain, shared = 0, {}
        for tensor in own[id(module)]:
            if id(tensor) in shared_ids:
                shared.setdefault(id(tensor), tensor)
            else:
                plain += tensor.numel()
        for child in module._modules.values():
            if child is not None:
                child_plain, child_shared = done[id(child)] if id(child) in done else visit(child)
                plain += child_plain
                for ident, tensor in child_shared.items():
                    shared.setdefault(ident, tensor)
        counter = _Counter()
        totals[id(module)] = plain + sum(t.numel() for t in shared.values() if counter.is_new(t))
        done[id(module)] = (plain, shared)
        return plain, shared

    done: dict[int, tuple[int, dict[int, torch.Tensor]]] = {}
    visit(model)
    return {name: totals[id(module)] for name, module in model.named_modules()}


# -- the per-layer table --------------------------------------------------------------------------
COLUMNS = ("module", "type", "input_shapes", "output_shapes", "params", "macs", "flops", "activation_bytes",
           "macs_share", "calls")
HEADERS = {"module": "Module", "type": "Type", "input_shapes": "Input shapes", "output_shapes": "Output shapes",
           "params": "Params", "macs": "MACs", "flops": "FLOPs", "activation_bytes": "Output bytes",
           "macs_share": "MACs %", "calls": "Calls"}


#: Why a TorchScript module has no per-layer table (the command line states the same limit).
SCRIPT_NO_LAYERS = ("a TorchScript module takes no forward hooks, so it has no per-layer table; profile the Python "
                    "nn.Module it was scripted or traced from to get one (MACs, FLOPs, params, memory and time work "
                    "on the TorchScript module)")


def layerwise_summary(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, meta: bool = False,
                      max_depth: int | None = None) -> TableReport:
    """A ``TableReport`` with one row per module that ran (parents include their children).

    ``activation_bytes`` is the size of the module's output tensors (first call);
    ``macs_share`` is the module's MACs over the whole model's, in percent. ``module`` is the
    qualified name (``""`` for the model itself, shown as ``(model)``); ``max_depth`` hides
    deeper modules (their cost stays in their parents).

    The per-layer table (``layerwise_summary``, ``layer_table``) has one row per module: shapes,
    parameters, MACs, FLOPs and activation bytes. Every figure comes from one observation pass
    (``counting.engine.observe``): the counts per module, and each module's input and output shapes
    and output bytes at its first call; the rendering is a ``TableReport``.
    """
    if isinstance(model, torch.jit.ScriptModule):
        raise TypeError(f"layerwise_summary: {type(model).__name__} is a TorchScript module; {SCRIPT_NO_LAYERS}")
    return layer_table(model, observe(model, tuple(args), dict(kwargs or {}), meta=meta, layers=True), max_depth)


def layer_table(model: torch.nn.Module, seen: Observation, max_depth: int | None = None) -> TableReport:
    """The per-layer table of an observation of ``model`` made with ``layers=True`` (``layerwise_summary``)."""
    counted, facts_of = seen.counts, seen.layers or {}
    params = module_param_counts(model)  # (one bottom-up pass; the same sharing rules as total_params)
    total_macs = counted.macs
    rows = []
    for name, module in model.named_modules(remove_duplicate=True):
        if name not in facts_of and name not in counted.by_module:
            continue  # never ran
        depth = 0 if name == "" else name.count(".") + 1
        if max_depth is not None and depth > max_depth:
            continue
        stats = counted.by_module.get(name)
        facts = facts_of.get(name)
        macs = stats.macs if stats else 0
        rows.append({
            "module": name,
            "type": type(module).__name__,
            "input_shapes": facts.input_shapes if facts else "",
            "output_shapes": facts.output_shapes if facts else "",
            "params": params.get(name, 0),
            "macs": macs,
            "flops": stats.flops if stats else 0,
            "activation_bytes": facts.activation_bytes if facts else 0,
            "macs_share": 100.0 * macs / total_macs if total_macs else 0.0,
            "calls": stats.calls if stats else 0,
        })
    notes = [f"batch size {counted.batch_size}; MACs and FLOPs of a module include its children's"]
    if counted.untracked:
        notes.append("untracked (counted 0): " + ", ".join(f"{k} x{v}" for k, v in counted.untracked.items()))
    formatters = {"module": lambda v: v or "(model)", "params": lambda v: f"{v:,}", "macs": lambda v: f"{v:,}", "flops": lambda v: f"{v:,}",
                  "activation_bytes": format_bytes, "macs_share": format_share}
    return TableReport(f"Per-layer summary: {type(model).__name__}", COLUMNS, rows, formatters=formatters,
                       headers=HEADERS, notes=notes)
