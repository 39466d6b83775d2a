"""Run one training step under storage-lifetime tracking and keep the record of what was live.

The step is the real one: forward, loss, ``loss.backward()``, ``optimizer.step()``, on copies
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils.checkpoint import checkpoint

from deeplite_like.backends.torch.counting.recorder import CountingMode
from deeplite_like.backends.torch.tensors import StorageLedger, storage_key, tensor_leaves

__all__ = ["AutocastPolicy", "StepRecord", "StepTracker", "checkpointed", "in_forward",
           "resolve_autocast_dtype", "tensor_storages"]


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


class StepTracker(StorageLedger):
    """The counting pass's storage ledger, recording each allocation and free and a mark per operator.

    ``mode``: the ``CountingMode`` the step runs under (``mode.ledger`` is this tracker); it
    names the module running (``CountingMode.module_running``) and keeps the phase.

    On meta, the small integer and boolean tensors derived from the inputs keep their values (the
    counting pass's ``MetaValues``), so value-dependent control flow on index tensors (transformers'
    packed-sequence check on position ids) takes the branch a real run takes.
    """

    def __init__(self, base_bytes: int, external: set[tuple[str, int]], mode: CountingMode) -> None:
        super().__init__(base_bytes, external, mode.module_running)
        self.mode = mode
        mode.ledger = self
        self.record = StepRecord(base_bytes)
        self.phase = "setup"
        self._serial: dict[tuple[str, int], int] = {}

    def count(self, func: Any, out: Any) -> None:
        super().count(func, out)
        self.record.marks.append((len(self.record.events), self.phase, self._where(), str(func)))

    def _allocated(self, tensor: torch.Tensor) -> None:
        key = storage_key(tensor)
        if key is None or key in self._bytes or key in self._external:
            return
        super()._allocated(tensor)
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
    """Tensor leaves of ``tree``, one per storage (first seen wins)."""
    seen: set[tuple[str, int]] = set()
    out = []
    for tensor in tensor_leaves(tree):
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
