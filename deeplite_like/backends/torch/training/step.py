"""One training step, as it runs: the optimizer it builds, what one rank holds of that optimizer's
state, and the step under storage-lifetime tracking.

**The optimizer.** ``build_optimizer`` makes it from a name, an ``Optimizer`` class or a factory.
What one rank holds under data-parallel sharding (``ShardPlan``, from ``resolve_sharding``): the
model used, stated exactly on ``ShardPlan``: DDP, ZeRO 1-3 and FSDP2 with its mixed-precision,
resharding and CPU-offload options.

**The step** is the real one: forward, loss, ``loss.backward()``, ``optimizer.step()``, on copies
of the model's parameters (meta copies by default, so nothing is allocated). It runs under the
counting pass (``counting/recorder.py``'s ``CountingMode``), which sees every operator and knows
which module runs it, in the forward by its global module hooks and in the backward by the
autograd node's sequence number: the one module attribution of the package. ``StepTracker`` is
that pass's storage ledger (``tensors.StorageLedger``) with a record of each allocation (its
serial number, bytes, phase and module), each free, and a mark after every operator, from which
``estimate.py`` derives the peak, the phases, the per-module activations and, by
re-weighting the same events, the per-rank figures of a sharded run.

Two ways the measured step can differ from the model's plain forward live here too: activation
checkpointing applied to chosen modules for the step, then undone (``checkpointed``), and CUDA
autocast's cast policy (``AutocastPolicy``), applied where ``torch.autocast`` does not run: on
meta tensors.
"""
from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.checkpoint import checkpoint

from deeplite_like.backends.torch.counting.recorder import CountingMode
from deeplite_like.backends.torch.kernels import WRAPS_ATTENTION, run_inside
from deeplite_like.backends.torch.tensors import StorageLedger, storage_key, storage_parts, tensor_leaves


__all__ = ["COMM_BACKENDS", "AutocastPolicy", "Fsdp2Timeline", "Fsdp2Unit", "KINDS", "OffloadedActivations",
           "ShardPlan", "StepRecord", "StepTracker", "build_optimizer", "checkpointed", "in_forward", "repeated_blocks", "resolve_autocast_dtype", "resolve_sharding", "select_modules", "shard_bytes",
           "fsdp2_units", "tensor_storages", "unit_index"]


_OPTIMIZERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "adamw": ("torch.optim", "AdamW", {}),
    "adam": ("torch.optim", "Adam", {}),
    "sgd": ("torch.optim", "SGD", {"lr": 1e-3, "momentum": 0.9}),
    "adafactor": ("torch.optim", "Adafactor", {}),
    "adagrad": ("torch.optim", "Adagrad", {}),
    "rmsprop": ("torch.optim", "RMSprop", {}),
    # bitsandbytes (an optional extra): states in uint8 with a float32 absmax per block of 256
    # elements; tensors under min_8bit_size (4,096 elements) keep float32 states
    "adamw8bit": ("bitsandbytes.optim", "AdamW8bit", {}),
    "adam8bit": ("bitsandbytes.optim", "Adam8bit", {}),
}


def build_optimizer(optimizer: Any, params: list[torch.Tensor], foreach: bool = True,
                    fused: bool = False) -> tuple[torch.optim.Optimizer, str, str]:
    """An optimizer over ``params`` from a name, an ``Optimizer`` class or a factory; its name and implementation.

    Names: ``adamw``, ``adam``, ``sgd`` (momentum 0.9, so it keeps one state), ``adafactor``,
    ``adagrad``, ``rmsprop``, and bitsandbytes' ``adamw8bit`` / ``adam8bit`` where it is installed.
    A name or a class is built with ``foreach=True`` where the class
    takes it (torch's default on CUDA), ``foreach=False`` (the per-tensor loop, torch's default on
    CPU) or ``fused=True`` (which overrides ``foreach``). A factory is called as ``factory(params)`` and used as built.
    The implementation is ``"foreach"``, ``"for-loop"``, ``"fused"`` or, for a factory, what it
    chose (``"default"`` when it passed neither: torch then picks by device; ``"single"`` for a
    class with one implementation). A paged optimizer (bitsandbytes' ``Paged*``) is refused: its
    large states live in CUDA unified memory, which the driver pages out to the host under pressure.
    """
    if isinstance(optimizer, str):
        key = optimizer.lower()
        if key not in _OPTIMIZERS:
            raise ValueError(f"optimizer={optimizer!r} is not a known name; use one of {sorted(_OPTIMIZERS)}, "
                             "an optimizer class, or a factory params -> optimizer")
        module_name, class_name, defaults = _OPTIMIZERS[key]
        module = _optimizers_module(module_name, optimizer)
        cls = getattr(module, class_name, None)
        if cls is None:
            raise ValueError(f"optimizer={optimizer!r}: this {module_name} has no {class_name} (torch "
                             f"{torch.__version__})")
        built = _unpaged(_from_class(cls, params, defaults, foreach, fused))
        return built, key, _implementation(built.defaults)
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        built = _unpaged(_from_class(optimizer, params, {}, foreach, fused))
        return built, optimizer.__name__, _implementation(built.defaults)
    if callable(optimizer):
        if fused or not foreach:  # (not silently ignored)
            raise ValueError("foreach= / fused= choose the implementation of an optimizer given by name or class; "
                             f"the factory {optimizer!r} builds its own: pass foreach=/fused= to the optimizer there")
        built = optimizer(params)
        if not isinstance(built, torch.optim.Optimizer):
            raise TypeError(f"optimizer factory {optimizer!r} returned {type(built).__name__}, not a "
                            "torch.optim.Optimizer; it is called as factory(params)")
        return _unpaged(built), type(built).__name__, _implementation(built.defaults)
    raise TypeError(f"optimizer takes a name ({sorted(_OPTIMIZERS)}), an Optimizer class or a factory "
                    f"params -> optimizer, got {optimizer!r}")


def _optimizers_module(module_name: str, optimizer: str) -> Any:
    """``torch.optim``, or bitsandbytes' ``optim`` (an optional extra) for its 8-bit names."""
    if module_name == "torch.optim":
        return torch.optim
    try:
        import bitsandbytes.optim  # (deferred: an optional extra, imported only when named)
    except ImportError as error:
        raise ValueError(f"optimizer={optimizer!r} needs bitsandbytes, which is not installed (pip install "
                         "bitsandbytes, or the package's [bnb] extra)") from error
    return bitsandbytes.optim


def _unpaged(built: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """``built``, unless it is paged (bitsandbytes) or its step needs a closure (LBFGS): refused, saying why."""
    closure = inspect.signature(built.step).parameters.get("closure")
    if closure is not None and closure.default is inspect.Parameter.empty:
        raise ValueError(f"{type(built).__name__}.step(closure) re-evaluates the model through a closure (forward "
                         "and backward, as many times as it searches): that loop is not modelled; estimate a step "
                         "of an optimizer that steps once per backward")
    if getattr(built, "is_paged", False):
        unpaged = type(built).__name__.replace("Paged", "")
        by_name = f" or optimizer={unpaged.lower()!r}" if unpaged.lower() in _OPTIMIZERS else ""
        raise ValueError(f"{type(built).__name__} is a paged optimizer: bitsandbytes puts its states of 100,000 "
                         "elements or more in CUDA unified memory, which the driver pages out to the host under "
                         "memory pressure, so no device figure holds for them; estimate the same states unpaged: "
                         f"optimizer=bitsandbytes.optim.{unpaged}{by_name}")
    return built


def _from_class(cls: type, params: list[torch.Tensor], defaults: dict[str, Any], foreach: bool,
                fused: bool) -> torch.optim.Optimizer:
    kwargs = dict(defaults)
    takes = inspect.signature(cls.__init__).parameters
    if fused:
        if "fused" not in takes:
            raise ValueError(f"fused=True: torch.optim.{cls.__name__} has no fused implementation (its __init__ takes "
                             "no 'fused'); use foreach=True or foreach=False")
        kwargs["fused"] = True
    if "foreach" in takes:
        kwargs["foreach"] = foreach and not fused
    elif not foreach and not fused:
        raise ValueError(f"foreach=False: torch.optim.{cls.__name__} takes no 'foreach' (it has one implementation); "
                         "leave foreach at its default")
    return cls(params, **kwargs)


def _implementation(defaults: dict[str, Any]) -> str:
    """Which step an optimizer runs, from its defaults: fused, foreach, for-loop, or torch's default."""
    if defaults.get("fused"):
        return "fused"
    if defaults.get("foreach") is None:
        return "default" if "foreach" in defaults else "single"
    return "foreach" if defaults["foreach"] else "for-loop"


# -- sharding -------------------------------------------------------------------------------------
_STRATEGIES = {
    None: (False, False, False),
    "ddp": (False, False, False),
    "zero1": (False, False, True),
    "zero2": (False, True, True),
    "zero3": (True, True, True),
    "fsdp": (True, True, True),
}


@dataclass(frozen=True)
class ShardPlan:
    """Which model states a strategy divides among ``world_size`` ranks; FSDP2's policy.

    What one rank holds under data-parallel sharding strategies (the model used, stated exactly).
    Strategies (``sharding=``), for ``world_size`` ranks that each run the measured step on their own
    micro-batch:

    * ``None``: one device, nothing divided.
    * ``'ddp'``: ``DistributedDataParallel``. Everything is replicated, and the reducer's
      gradient buckets hold a flat copy of every trainable gradient for the whole run (PyTorch's
      DDP documentation: ``gradient_as_bucket_view=True`` "can reduce peak memory usage, where the
      saved memory size will be equal to the total gradients size").
    * ``'zero1'``: optimizer states divided among ranks.
    * ``'zero2'``: optimizer states and gradients divided; the unsharded gradients of one unit
      exist during backward until they are reduce-scattered.
    * ``'zero3'`` / ``'fsdp'``: parameters, gradients and states divided; FSDP2's ``fully_shard``
      applied to each unit and to the root (the parameters outside every unit: embeddings, final
      norm, head), its all-gather and reduce-scatter buffers, gathered parameters and unsharded
      gradients replayed operator by operator (``Fsdp2Timeline``).

    FSDP2 options (``'fsdp'`` / ``'zero3'`` only):

    * ``mixed_precision``: FSDP2's ``MixedPrecisionPolicy`` (or a mapping with its fields). The
      sharded parameters stay in their own dtype (the float32 master weights), and so do the sharded
      gradients and the optimizer states; each unit's parameters are all-gathered in ``param_dtype``
      and the forward and backward compute in it (floating inputs cast when ``cast_forward_inputs``);
      each unit's gradients are reduce-scattered from a flat buffer in ``reduce_dtype``. No weight is
      copied by autocast and saved for backward: the gathered ``param_dtype`` parameters are FSDP's
      buffers, freed after each unit.
    * ``reshard_after_forward=False``: each unit keeps its gathered parameters from its forward to
      its post-backward (no re-gather).
    * ``cpu_offload=True``: FSDP2's ``CPUOffloadPolicy``: each rank's shards of the parameters,
      gradients and optimizer states live in host memory and the optimizer step runs there; the
      device holds FSDP2's buffers and the activations.

    Units are the modules FSDP would wrap: by default the children of the largest
    ``nn.ModuleList`` (the repeated blocks of a transformer); the whole model when it has none.
    A tensor is divided as FSDP2 divides it: on dim 0, each rank holding ``ceil(dim0 / world_size)``
    rows (padded); a 0-dim tensor is not divided.

    ``param_dtype`` / ``reduce_dtype``: the dtypes of the gathered parameters and of the gradient
    reduce-scatter under a mixed-precision policy (``None``: the parameters' own).
    """

    strategy: str | None
    world_size: int
    params: bool
    grads: bool
    states: bool
    param_dtype: torch.dtype | None = None
    reduce_dtype: torch.dtype | None = None
    cast_forward_inputs: bool = True
    reshard_after_forward: bool = True
    cpu_offload: bool = False


_POLICY_FIELDS = ("param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs")


def _policy_fields(policy: Any) -> dict[str, Any]:
    """The fields of FSDP2's ``MixedPrecisionPolicy`` (read from the object or a mapping), checked."""
    if isinstance(policy, dict):
        unknown = sorted(set(policy) - set(_POLICY_FIELDS))
        if unknown:
            raise ValueError(f"mixed_precision: unknown field {unknown[0]!r}; FSDP2's MixedPrecisionPolicy has "
                             f"{', '.join(_POLICY_FIELDS)}")
        fields = {name: policy.get(name) for name in _POLICY_FIELDS}
        fields["cast_forward_inputs"] = policy.get("cast_forward_inputs", True)
    elif all(hasattr(policy, name) for name in _POLICY_FIELDS):
        fields = {name: getattr(policy, name) for name in _POLICY_FIELDS}
    else:
        raise TypeError("mixed_precision takes FSDP2's torch.distributed.fsdp.MixedPrecisionPolicy(param_dtype=..., "
                        f"reduce_dtype=...) or a dict of its fields, got {policy!r}")
    for name in ("param_dtype", "reduce_dtype", "output_dtype"):
        value = fields[name]
        if value is not None and not (isinstance(value, torch.dtype) and value.is_floating_point):
            raise ValueError(f"mixed_precision: {name}={value!r} is not a floating torch.dtype")
    if fields["output_dtype"] is not None:
        raise ValueError("mixed_precision: output_dtype is not modelled (the output stays in param_dtype); leave it "
                         "None")
    if not isinstance(fields["cast_forward_inputs"], bool):
        raise TypeError(f"mixed_precision: cast_forward_inputs must be a bool, got {fields['cast_forward_inputs']!r}")
    return fields


def resolve_sharding(sharding: str | None, world_size: int, mixed_precision: Any = None,
                     reshard_after_forward: bool = True, cpu_offload: bool = False) -> ShardPlan:
    """Check ``sharding`` / ``world_size`` (and FSDP2's options) and say what the strategy divides."""
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    key = sharding.lower() if isinstance(sharding, str) else sharding
    if key not in _STRATEGIES:
        raise ValueError(f"sharding={sharding!r} is not known; use one of None, 'ddp', 'zero1', 'zero2', "
                         "'zero3', 'fsdp'")
    if key is None and world_size != 1:
        raise ValueError(f"world_size={world_size} needs a sharding strategy (sharding='ddp', 'zero1', 'zero2', "
                         "'zero3' or 'fsdp'); sharding=None means one device")
    params, grads, states = _STRATEGIES[key]
    if not isinstance(reshard_after_forward, bool):
        raise TypeError(f"reshard_after_forward must be a bool (FSDP2's int form, resharding to a smaller group, is "
                        f"not modelled), got {reshard_after_forward!r}")
    if not isinstance(cpu_offload, bool):
        raise TypeError(f"cpu_offload must be a bool (FSDP2's CPUOffloadPolicy), got {cpu_offload!r}")
    if (mixed_precision is not None or not reshard_after_forward or cpu_offload) and not params:
        option = ("mixed_precision" if mixed_precision is not None else
                  "reshard_after_forward=False" if not reshard_after_forward else "cpu_offload=True")
        raise ValueError(f"{option} is an option of FSDP2 (fully_shard): pass sharding='fsdp' (or 'zero3'), not "
                         f"sharding={sharding!r}")
    if mixed_precision is None:
        return ShardPlan(key, world_size, params, grads, states, reshard_after_forward=reshard_after_forward,
                         cpu_offload=cpu_offload)
    fields = _policy_fields(mixed_precision)
    return ShardPlan(key, world_size, params, grads, states, param_dtype=fields["param_dtype"],
                     reduce_dtype=fields["reduce_dtype"] or fields["param_dtype"],
                     cast_forward_inputs=fields["cast_forward_inputs"], reshard_after_forward=reshard_after_forward,
                     cpu_offload=cpu_offload)


def shard_bytes(tensor: torch.Tensor, world_size: int, element_size: int | None = None) -> int:
    """Bytes one rank holds of ``tensor`` divided on dim 0 (``ceil(dim0 / world_size)`` rows), at
    ``element_size`` bytes per element when given (a shard kept in another dtype than ``tensor``'s)."""
    size = tensor.element_size() if element_size is None else element_size
    if tensor.dim() == 0 or world_size == 1:
        return tensor.numel() * size
    rows = tensor.shape[0]
    row_bytes = (tensor.numel() // rows if rows else 0) * size
    return math.ceil(rows / world_size) * row_bytes


# -- FSDP2's buffers, operator by operator --------------------------------------------------------
COMM_BACKENDS = ("nccl", "gloo")


@dataclass(frozen=True)
class Fsdp2Unit:
    """Per-rank bytes of the buffers FSDP2 makes for one ``fully_shard`` unit (index 0: the root).

    Read from ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`` (torch 2.13): every
    parameter padded on dim 0 to a multiple of ``world_size`` rows. ``gathered``: the flat all-gather
    output (``all_gather_output``, the padded unsharded parameters in ``param_dtype``) and, as big,
    the parameters copied out of it (``all_gather_copy_out``). ``copy_in``: the flat all-gather input
    FSDP2 casts the shards into under a ``param_dtype`` (0 without one). ``reduce_input``: the flat
    reduce-scatter input (padded unsharded gradients in ``reduce_dtype``). ``reduce_output``: its
    output, one shard in ``reduce_dtype``, which becomes the sharded gradients when that is the
    parameters' dtype and is cast to it otherwise (``cast``: the reduce dtype differs).
    """

    name: str
    gathered: int
    copy_in: int
    reduce_input: int
    reduce_output: int
    cast: bool


def fsdp2_units(params: dict[str, torch.Tensor], unit_names: list[str], plan: ShardPlan,
                master_sizes: dict[Any, int]) -> list[Fsdp2Unit]:
    """The root unit (parameters outside ``unit_names``) and each unit, with their buffer sizes (``Fsdp2Unit``).

    ``params``: qualified name -> trainable parameter (its element size is the gathered one; its master
    element size, by storage key, in ``master_sizes``)."""
    ws = plan.world_size
    members: list[list[torch.Tensor]] = [[] for _ in range(len(unit_names) + 1)]
    for name, tensor in params.items():
        members[unit_index(name, unit_names)].append(tensor)
    units = []
    for name, tensors in zip(["", *unit_names], members):
        tensors = tensor_storages(tensors)
        padded = [shard_bytes(t, ws) * ws // t.element_size() for t in tensors]  # elements, padded rows
        size = [t.element_size() for t in tensors]
        master = [master_sizes.get(storage_key(t), t.element_size()) for t in tensors]
        # (only parameters that require grad are reduce-scattered)
        reduce = [(plan.reduce_dtype.itemsize if plan.reduce_dtype is not None else s) * t.requires_grad
                  for s, t in zip(size, tensors)]
        units.append(Fsdp2Unit(
            name, gathered=sum(n * s for n, s in zip(padded, size)),
            copy_in=sum(n // ws * s for n, s, m in zip(padded, size, master) if s != m),
            reduce_input=sum(n * r for n, r in zip(padded, reduce)),
            reduce_output=sum(n // ws * r for n, r in zip(padded, reduce)),
            cast=any(r and r != m for r, m in zip(reduce, master))))
    return units


def unit_index(name: str, unit_names: list[str]) -> int:
    """1 + the index in ``unit_names`` of the unit holding the parameter or module ``name``; 0: the root."""
    return next((i + 1 for i, unit in enumerate(unit_names) if name == unit or name.startswith(f"{unit}.")), 0)



KINDS = ("gathered parameters", "all-gather buffers", "reduce-scatter buffers", "unsharded gradients")


class Fsdp2Timeline:
    """FSDP2's buffers on one rank at every operator of a recorded step (``StepRecord.marks``).

    FSDP2's own algorithm (torch 2.13, ``_fsdp_param_group.py`` / ``_fsdp_state.py``), replayed on
    the units' boundaries in the record (the first and last operator of each unit, forward and
    backward), with the default ``reshard_after_forward`` (``True`` for the units, the root kept
    gathered from its forward to its backward):

    * forward: the root's pre-forward all-gathers it; each unit's pre-forward allocates its all-gather
      output, frees the one kept from the unit before (implicit prefetch: kept until the next
      unit's copy-out), copies its parameters out; its post-forward frees them (resharding); the
      root's post-forward frees the last all-gather output.
    * backward: the root's pre-backward prefetches the last unit's all-gather; each unit's
      pre-backward copies out the prefetched one (freeing the all-gather output) and prefetches
      the unit before; its post-backward frees the gathered parameters, frees the reduce-scatter
      input kept from the unit before (``reduce_scatter_max_input_buffers=1``), allocates its own,
      frees the unsharded gradients and reduce-scatters into one shard (cast to the parameters' dtype
      when the reduce dtype differs). A unit whose inputs need no gradient (the first block on raw
      inputs) and the root post-backward in the final callback, root first; the last reduce-scatter
      input is freed there.
    * ``comm_backend='gloo'``: gloo's ``_allgather_base_`` gathers into a flat tensor of its own (the
      unit's gathered size, for the time of the collective; found in the allocator's trace), and its
      ``_reduce_scatter_base_`` (no native reduce-scatter) clones the input likewise. NCCL makes neither.

    ``level[i]``: bytes after operator ``i``; ``surge[i]``: the most bytes while the hooks that run
    before operator ``i`` run (against the live total before it). ``kinds``: the split of either, by
    ``KINDS``, where it is largest (``at_level`` / ``at_surge``). ``grad_bumps``: per operator, the
    gradients it allocated, as (unit index, unsharded bytes beyond what their shard weighs).
    ``unit_of_mark``: the unit of each operator's module; -1 for the model itself (``''``), whose
    operators in the backward (gradient accumulation) do not end the unit running.
    """

    def __init__(self, units: list[Fsdp2Unit], unit_of_mark: list[int], phases: list[str],
                 grad_bumps: dict[int, list[tuple[int, int]]], reshard_after_forward: bool, comm_backend: str):
        self.units, self.reshard, self.gloo = units, reshard_after_forward, comm_backend == "gloo"
        self.held = [0] * len(KINDS)
        self.level: list[int] = []
        self.surge: list[int] = []
        self.at_level: list[tuple[int, ...]] = []
        self.at_surge: list[tuple[int, ...]] = []
        self.after_hooks: list[int] = []  # bytes once the hooks before operator ``i`` ran
        self._gathered: set[int] = set()  # units whose parameters are copied out
        self._pending: set[int] = set()  # units with an all-gather output awaiting its copy-out
        self._kept: int | None = None  # the unit whose all-gather output the forward keeps (implicit prefetch)
        self._reduce_inputs: list[int] = []  # units whose reduce-scatter input is kept
        self._bumps = [0] * len(units)
        self._order: list[int] = []  # post-forward order
        self._reduced: set[int] = set()
        self._surge, self._surge_kinds = 0, tuple(self.held)  # (the most while the current hooks run)
        self._replay(unit_of_mark, phases, grad_bumps)

    # the buffers, kind by kind; every change is a sample of the surge
    def _add(self, kind: int, nbytes: int) -> None:
        self.held[kind] += nbytes
        if sum(self.held) > self._surge:
            self._surge, self._surge_kinds = sum(self.held), tuple(self.held)

    def _replay(self, unit_of_mark: list[int], phases: list[str], grad_bumps: dict[int, list[tuple[int, int]]]) -> None:
        where, current = "", 0
        for index, (unit, phase) in enumerate(zip(unit_of_mark, phases)):
            self._surge, self._surge_kinds = sum(self.held), tuple(self.held)
            pass_of = phase if phase in ("forward", "backward") else ""
            if pass_of != where:  # a pass ends, another begins
                self._end_pass(where, current)
                where, current = pass_of, 0
                self._begin_pass(where)
            if unit < 0:  # the model itself: a root operator in the forward, autograd's bookkeeping in the backward
                unit = current if where == "backward" else 0
            if where and unit != current:
                self._leave(where, current)
                current = unit
                self._enter(where, unit)
            self.after_hooks.append(sum(self.held))
            for owner, nbytes in grad_bumps.get(index, ()):
                self._bumps[owner] += nbytes
                self.held[3] += nbytes
            self.surge.append(self._surge)
            self.at_surge.append(self._surge_kinds)
            self.level.append(sum(self.held))
            self.at_level.append(tuple(self.held))

    def _begin_pass(self, where: str) -> None:
        if where == "forward":
            self._order.clear()
            self._reduced.clear()
            self._unshard(0)
            self._copy_out(0, keep=True)
        elif where == "backward":
            self._unshard(0)
            self._copy_out(0)
            if len(self._order) > 1:  # the root's pre-backward prefetches the unit that ran last
                self._unshard(self._order[-2])

    def _end_pass(self, where: str, current: int) -> None:
        if where == "forward":
            self._leave(where, current)
            self._order.append(0)
            self._drop_kept()
        elif where == "backward":
            self._leave(where, current, final=True)
            for unit in range(len(self.units)):  # the final callback: root first, then by name
                if unit not in self._reduced:
                    self._post_backward(unit)
            while self._reduce_inputs:
                self._add(2, -self.units[self._reduce_inputs.pop()].reduce_input)
            for unit in sorted(self._pending):  # a prefetch never used
                self._add(1, -self.units[unit].gathered)
            self._pending.clear()

    def _enter(self, where: str, unit: int) -> None:
        if unit == 0:
            return
        if where == "forward":
            self._unshard(unit)
            self._copy_out(unit, keep=True)
            return
        self._unshard(unit)
        self._copy_out(unit)
        if unit in self._order:  # prefetch the unit that ran before it in the forward
            position = len(self._order) - 1 - self._order[::-1].index(unit)
            if position > 0:
                self._unshard(self._order[position - 1])

    def _leave(self, where: str, unit: int, final: bool = False) -> None:
        if unit == 0:
            return
        if where == "forward":
            if self.reshard and unit in self._gathered:
                self._gathered.discard(unit)
                self._add(0, -self.units[unit].gathered)
            self._order.append(unit)
        elif not final and unit not in self._reduced:  # its inputs' gradients are computed: post-backward
            self._post_backward(unit)

    def _unshard(self, unit: int) -> None:
        if unit in self._gathered or unit in self._pending:
            return
        u = self.units[unit]
        self._add(1, u.copy_in)
        self._add(1, u.gathered)
        if self.gloo:  # (gloo's _allgather_base_ gathers into a flat tensor of its own, then copies it out)
            self._add(1, u.gathered)
            self._add(1, -u.gathered)
        self._add(1, -u.copy_in)
        self._pending.add(unit)

    def _copy_out(self, unit: int, keep: bool = False) -> None:
        if unit not in self._pending:
            return
        if keep:
            self._drop_kept()
        self._pending.discard(unit)
        self._gathered.add(unit)
        self._add(0, self.units[unit].gathered)
        if keep:
            self._kept = unit
        else:
            self._add(1, -self.units[unit].gathered)

    def _drop_kept(self) -> None:
        if self._kept is not None:
            self._add(1, -self.units[self._kept].gathered)
            self._kept = None

    def _post_backward(self, unit: int) -> None:
        u = self.units[unit]
        self._reduced.add(unit)
        if unit in self._gathered:
            self._gathered.discard(unit)
            self._add(0, -u.gathered)
        while self._reduce_inputs:  # (one reduce-scatter input kept at a time)
            self._add(2, -self.units[self._reduce_inputs.pop(0)].reduce_input)
        if not u.reduce_input:
            return
        self._add(2, u.reduce_input)
        self._add(3, -self._bumps[unit])
        self._bumps[unit] = 0
        if self.gloo:
            self._add(2, u.reduce_input)
            self._add(2, -u.reduce_input)
        if u.cast:  # the shard in the reduce dtype beside its cast (the gradients' own weight)
            self._add(2, u.reduce_output)
            self._add(2, -u.reduce_output)
        self._reduce_inputs.append(unit)


def repeated_blocks(model: nn.Module) -> list[str]:
    """Qualified names of the children of the ``nn.ModuleList`` holding most parameters ([] if none)."""
    best: tuple[int, str, nn.ModuleList] | None = None
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module):
            size = sum(p.numel() for p in module.parameters())
            if best is None or size > best[0]:
                best = (size, name, module)
    if best is None:
        return []
    prefix = f"{best[1]}." if best[1] else ""
    return [f"{prefix}{child}" for child in best[2]._modules]


def select_modules(model: nn.Module, spec: Any, what: str) -> list[str]:
    """Qualified names of the modules ``spec`` chooses.

    ``spec``: ``True`` (the repeated blocks, see ``repeated_blocks``), a module class or tuple
    of classes, a predicate ``(name, module) -> bool``, or an iterable of qualified names.
    ``what`` names the argument in errors.
    """
    named = dict(model.named_modules())
    if spec is True:
        names = repeated_blocks(model)
        if not names:
            raise ValueError(f"{what}=True chooses the children of the model's largest nn.ModuleList, and "
                             f"{type(model).__name__} has none; pass module classes or qualified names")
        return names
    if isinstance(spec, type) or (isinstance(spec, tuple) and spec and all(isinstance(t, type) for t in spec)):
        names = [name for name, m in named.items() if name and isinstance(m, spec)]
    elif callable(spec):
        predicate: Callable[[str, nn.Module], bool] = spec
        names = [name for name, m in named.items() if name and predicate(name, m)]
    elif isinstance(spec, Iterable) and not isinstance(spec, (str, bytes)):
        names = list(spec)
        missing = [n for n in names if n not in named]
        if missing:
            raise ValueError(f"{what}: no module named {missing[0]!r} in {type(model).__name__}; "
                             f"qualified names look like {list(named)[1:4]}")
    else:
        raise TypeError(f"{what} takes True, module classes, a predicate (name, module) -> bool or qualified "
                        f"names, got {spec!r}")
    if not names:
        raise ValueError(f"{what}={spec!r} chose no module of {type(model).__name__}")
    # Outermost only: a module inside another chosen one is already covered by it.
    chosen = sorted(set(names))
    return [n for n in chosen if not any(n.startswith(f"{o}.") for o in chosen if o != n)]


# -- The step as it runs: storage tracking, activation checkpointing, autocast -------------------------------


@dataclass
class StepRecord:
    """What one tracked step did, as events (see the module docstring).

    ``sizes[s]``, ``origin[s]`` (phase, module): allocation ``s``. ``events``: ``(serial, +1 / -1)``
    in order. ``marks``: ``(len(events) after the operator, phase, module, operator)``, one per
    operator. ``forward_end_events`` / ``phase_start_events``: ``len(events)`` when the forward returned / a phase began. ``base_bytes``: live before the step (parameters, buffers, inputs, and whatever
    the warm-up left alive is among the events).
    """

    base_bytes: int
    sizes: list[int] = field(default_factory=list)
    origin: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[int, int]] = field(default_factory=list)
    marks: list[tuple[int, str, str, str]] = field(default_factory=list)
    forward_end_events: int = 0
    phase_start_events: dict[str, int] = field(default_factory=dict)


# Phases where a scalar read of a meta tensor (``.item()``) gets a placeholder value: an optimizer
# that scales its update by a value it reads (Adafactor's RMS of the parameter) allocates the same
# whatever the value. In the forward and backward a read could steer control flow, so it still fails.
_SCALAR_READ_PHASES = ("warm-up", "optimizer")


_LIFT_FRESH = torch.ops.aten.lift_fresh.default


class StepTracker(StorageLedger):
    """The counting pass's storage ledger, recording each allocation and free and a mark per operator.

    ``mode``: the ``CountingMode`` the step runs under (``mode.ledger`` is this tracker); it
    names the module running (``CountingMode.module_running``) and keeps the phase.

    On meta, the small integer and boolean tensors derived from the inputs keep their values (the
    counting pass's ``MetaValues``), so value-dependent control flow on index tensors (transformers'
    packed-sequence check on position ids) takes the branch a real run takes.

    ``device``: the step's device. A tensor made from Python data (``torch.tensor([[0, 1, -1]])`` as a
    loss's target, made in the loop) is allocated before dispatch, and the dispatcher shows only its
    ``lift_fresh``, which the schema calls an alias: on the step's device it is a fresh allocation, counted
    there. Not counted: one made on the CPU for a meta step (host memory on a GPU), and a 0-d one (a
    scalar such as the optimizer's ``torch.tensor(1.0)`` step increment: host memory on a GPU, like the
    float64 scalars torch wraps Python numbers in; counting it on a CPU would part ``meta=False`` from meta).
    On meta, ``torch.tensor(data, device="meta")`` reaches no dispatch mode at all: unseen.
    """

    def __init__(self, base_bytes: int, external: set[tuple[str, int]], mode: CountingMode,
                 device: torch.device | None = None) -> None:
        super().__init__(base_bytes, external, mode.module_running)
        self.mode = mode
        mode.ledger = self
        self.record = StepRecord(base_bytes)
        self.phase = "setup"
        self._serial: dict[tuple[str, int], int] = {}
        self._device_type = device.type if device is not None else None

    def count(self, func: Any, out: Any) -> None:
        super().count(func, out)
        if func is _LIFT_FRESH and isinstance(out, torch.Tensor) and out.dim() and \
                out.device.type == self._device_type:
            self._allocated(out)
        self.record.marks.append((len(self.record.events), self.phase, self._where(), str(func)))

    def _allocated_storage(self, tensor: torch.Tensor) -> None:
        key = storage_key(tensor)
        if key is None or key in self._bytes or key in self._external:
            return
        super()._allocated_storage(tensor)
        serial = len(self.record.sizes)
        self._serial[key] = serial
        self.record.sizes.append(self._bytes[key])
        self.record.origin.append((self.phase, self._where()))
        self.record.events.append((serial, 1))

    def _freed(self, key: tuple[str, int]) -> None:
        super()._freed(key)
        self.record.events.append((self._serial.pop(key), -1))

    def adopt(self, tensors: list[torch.Tensor]) -> None:
        """Record storages made before the step that belong to it (an optimizer's state made in its
        ``__init__``, as Adagrad's sums): allocations of phase ``setup``, freed like any other."""
        for tensor in tensors:
            self._allocated(tensor)

    def serial_of(self, tensor: torch.Tensor) -> int | None:
        """Allocation serial of the storage holding ``tensor`` (None if not allocated in the step)."""
        key = storage_key(tensor)
        return self._serial.get(key) if key is not None else None

    @contextlib.contextmanager
    def in_phase(self, name: str) -> Iterator[None]:
        """Label the operators run in the body with phase ``name``; remember where its events first start
        (a phase repeated, as forward and backward are under gradient accumulation, keeps its first start)."""
        self.phase = name
        self.mode.set_phase(name)
        if self.mode.values is not None:
            self.mode.values.placeholder_reads = name in _SCALAR_READ_PHASES
        self.record.phase_start_events.setdefault(name, len(self.record.events))
        yield


def tensor_storages(tree: Any) -> list[torch.Tensor]:
    """Tensor leaves of ``tree``, one per storage (first seen wins; a sparse tensor's indices and values)."""
    seen: set[tuple[str, int]] = set()
    out = []
    for tensor in (part for leaf in tensor_leaves(tree) for part in storage_parts(leaf)):
        key = storage_key(tensor)
        if key is not None and key not in seen:
            seen.add(key)
            out.append(tensor)
    return out


# -- activation checkpointing ---------------------------------------------------------------------
@contextlib.contextmanager
def checkpointed(model: nn.Module, names: list[str], modes: Callable[[], list[Any]]) -> Iterator[None]:
    """Run each named module's forward under non-reentrant ``torch.utils.checkpoint``; undone on exit.

    As ``checkpoint`` re-enters ``torch.autocast`` for the recomputation, the recomputation in
    backward re-enters the function modes of the step (autocast policy, attention kernel), which
    the autograd engine does not carry into backward: ``modes()`` makes fresh ones.
    """
    modules = dict(model.named_modules())
    patched = []
    try:
        for name in names:
            module = modules[name]
            had = "forward" in module.__dict__
            original = module.forward

            def run(*args: Any, _f: Callable = original, **kwargs: Any) -> Any:
                if in_forward():
                    return _f(*args, **kwargs)
                with contextlib.ExitStack() as stack:  # the recomputation, in backward
                    for mode in modes():
                        stack.enter_context(mode)
                    return _f(*args, **kwargs)

            def forward(*args: Any, _run: Callable = run, **kwargs: Any) -> Any:
                # preserve_rng_state=False: the RNG state copy is host memory and changes no byte here.
                return checkpoint(_run, *args, use_reentrant=False, preserve_rng_state=False, **kwargs)

            module.forward = forward
            patched.append((module, had, original))
        yield
    finally:
        for module, had, original in reversed(patched):
            if had:
                module.forward = original
            else:
                del module.forward


def in_forward() -> bool:
    """Whether this is the forward, as opposed to a recomputation in backward (no autograd node is executing)."""
    return torch._C._current_autograd_node() is None


# -- CUDA autocast's policy, on meta --------------------------------------------------------------
_LOWER = frozenset({
    "__matmul__", "__rmatmul__", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul",
    "multi_dot", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "linear", "matmul", "mm", "mv", "prelu", "einsum", "scaled_dot_product_attention",
    "gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell",
})
_FLOAT32 = frozenset({
    "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "acos", "asin", "binary_cross_entropy_with_logits",
    "cosh", "cosine_embedding_loss", "cdist", "cosine_similarity", "cross_entropy", "cumprod", "cumsum",
    "dist", "erfinv", "exp", "expm1", "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss",
    "layer_norm", "log", "log_softmax", "log10", "log1p", "log2", "margin_ranking_loss", "mse_loss",
    "multilabel_margin_loss", "multi_margin_loss", "nll_loss", "norm", "normalize", "pdist",
    "poisson_nll_loss", "pow", "prod", "reciprocal", "rsqrt", "sinh", "smooth_l1_loss", "soft_margin_loss",
    "softmax", "softmin", "softplus", "sum", "renorm", "tan", "triplet_margin_loss", "huber_loss",
})
_PROMOTE = frozenset({
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sample", "index_put", "scatter_add",
    "tensordot", "cat", "stack",
})

_NAMES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
          "half": torch.float16}


# -- activation offloading --------------------------------------------------------------------------
class _Packed:
    """One saved tensor moved to host memory: its host copy (``None`` on meta: no values to keep), what to
    make again on the device, and its bytes, counted in ``OffloadedActivations.host_bytes`` while it lives."""

    def __init__(self, owner: "OffloadedActivations", tensor: torch.Tensor) -> None:
        self.owner, self.shape, self.dtype, self.device = owner, tensor.shape, tensor.dtype, tensor.device
        self.nbytes = tensor.numel() * tensor.element_size()
        self.host = None
        if not tensor.is_meta:
            with _disable_current_modes():  # (host memory: not the device's, not an operator of the step)
                self.host = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
                self.host.copy_(tensor)
        owner.host_bytes += self.nbytes
        owner.peak_host_bytes = max(owner.peak_host_bytes, owner.host_bytes)

    def __del__(self) -> None:
        self.owner.host_bytes -= self.nbytes


class OffloadedActivations(torch.autograd.graph.saved_tensors_hooks):
    """``torch.autograd.graph.save_on_cpu`` as a GPU runs it, on meta too: each tensor autograd saves in the
    forward (activations, and the weights and inputs a backward reads) is copied to host memory when it is
    saved, so the device holds it only while the forward still does; its backward copies it back to the
    device (a fresh tensor the size of the saved one, contiguous) for the time that node runs.
    ``peak_host_bytes``: the most host memory the copies held at once."""

    def __init__(self) -> None:
        self.host_bytes = self.peak_host_bytes = 0
        super().__init__(self._pack, self._unpack)

    def _pack(self, tensor: torch.Tensor) -> _Packed:
        return _Packed(self, tensor)

    @staticmethod
    def _unpack(packed: _Packed) -> torch.Tensor:
        if packed.host is None:  # meta: a fresh device tensor of the saved one's size (the copy's allocation)
            return torch.empty(packed.shape, dtype=packed.dtype, device=packed.device)
        return packed.host.to(packed.device, copy=True)


def resolve_autocast_dtype(value: Any) -> torch.dtype | None:
    """``None`` / ``False`` -> no autocast; ``True`` -> bfloat16; a dtype or its name (``"bf16"``)."""
    if value is None or value is False:
        return None
    if value is True:
        return torch.bfloat16
    if isinstance(value, str) and value.lower() in _NAMES:
        return _NAMES[value.lower()]
    if value in (torch.bfloat16, torch.float16):
        return value
    raise ValueError(f"autocast={value!r} is not a low-precision dtype; use torch.bfloat16, torch.float16, "
                     f"or one of {sorted(_NAMES)}")


def _eligible(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64


class AutocastPolicy(TorchFunctionMode):
    """Applies CUDA autocast's cast policy to every tensor (meta included).

    ``torch.autocast`` works through per-device dispatch keys (``AutocastCUDA``,
    ``AutocastCPU``); meta tensors have none, so under ``torch.autocast("cuda")`` a meta forward
    silently stays in float32. ``AutocastPolicy`` is a ``TorchFunctionMode`` that applies the same
    policy at the same level (above autograd, so every cast is recorded in the graph exactly as
    autocast's casts are), from the op lists of PyTorch's AMP documentation ("CUDA Ops that can
    autocast to float16 / to float32 / promote to the widest input type"):

    * lower precision (``dtype``): matmuls, linear, convolutions, attention, RNN cells;
    * float32: reductions, losses, softmax, normalisations, exp/log/pow and friends (only
      lower-precision inputs are cast up);
    * widest input type: ``cat``, ``stack``, ``addcmul`` and the others of that list.

    Casts apply to floating tensors other than float64, as autocast's do. Like autocast, casts of
    leaf tensors that require grad (the weights) are cached until the region exits, so each weight
    is cast once per forward and its low-precision copy lives as long as the region (or as long as
    autograd saved it). Ops not in any list run in the dtype of their inputs.
    """

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __exit__(self, *exc: object) -> None:
        self._cache.clear()  # autocast drops its weight-cast cache when the region exits
        super().__exit__(*exc)

    def _cast(self, value: Any, dtype: torch.dtype) -> Any:
        if not _eligible(value) or value.dtype == dtype:
            return value
        if value.is_leaf and value.requires_grad:
            cached = self._cache.get(id(value))
            if cached is not None and cached[0] is value and cached[1].dtype == dtype:
                return cached[1]
            cast = value.to(dtype)
            self._cache[id(value)] = (value, cast)
            return cast
        return value.to(dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in WRAPS_ATTENTION:  # (nn.MultiheadAttention: autocast casts its projections and attention)
            return run_inside(self, func, types, args, kwargs)
        if name in _LOWER:
            target = self.dtype
        elif name in _FLOAT32:
            if not any(_eligible(v) and v.dtype in (torch.float16, torch.bfloat16)
                       for v in pytree.tree_leaves((args, kwargs))):
                return func(*args, **kwargs)
            target = torch.float32
        elif name in _PROMOTE:
            dtypes = [v.dtype for v in pytree.tree_leaves((args, kwargs)) if _eligible(v)]
            if len(set(dtypes)) < 2:
                return func(*args, **kwargs)
            target = max(dtypes, key=lambda d: torch.finfo(d).bits)
        else:
            return func(*args, **kwargs)
        args, kwargs = pytree.tree_map(lambda v: self._cast(v, target), (args, kwargs))
        return func(*args, **kwargs)
