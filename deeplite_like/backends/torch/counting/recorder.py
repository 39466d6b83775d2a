"""The counting pass itself: a ``TorchDispatchMode`` that prices every aten op, plus module hooks.

``CountingMode`` sees each operator once, below autograd and after composite ops are
decomposed, however it was called (modules, ``torch.nn.functional``, ``torch.*``, tensor
methods, Python operators). It knows no particular op: it asks the formula table
(``registry.lookup`` / ``registry.is_free``) once per op overload and caches the answer.

Attribution
    Forward: per-module pre/post hooks (registered on the model's own modules by
    ``attach``, removed by ``detach``) keep a stack of frames. A frame holds a *context*: the
    ``OpStats`` of the module and of every module that encloses this call, and the module's own
    ``module_ops`` dict. An op adds its cost to each of those (a handful of integer adds), so
    ``by_module`` is nested by construction and follows the real call stack.

    Backward: no module hook runs in backward, so each forward context is also filed under the
    autograd *sequence number* at which it began (``torch.autograd._get_sequence_nr()``, a
    thread-local counter that every autograd node takes its number from when it is created).
    In backward, the node being executed (``torch._C._current_autograd_node()``) tells, by its
    sequence number, which module call created it: the op is attributed there. We chose this
    over grad hooks on module inputs/outputs (``torch.utils.module_tracker``'s approach)
    because it needs no per-tensor hooks, works when a module's inputs do not require grad
    (where an "inputs' grads are ready" hook never fires and the module is never popped), and
    is exact for interleaved branches. Nodes with no forward context (the engine's initial
    ``ones_like``, ``AccumulateGrad``, whose sequence number is the maximum) go to the root.

Leaving the model as found
    ``watch`` registers tensors (the engine passes the model's parameters) by storage. Before
    an op that declares a write to one of its arguments (``Tensor(a!)`` in its schema:
    ``add_``, ``clamp_``, ``copy_``, ``out=``) touches a watched storage, the tensor is copied
    once; ``restore_mutated`` writes the copies back. Buffers are not left to this: batch norm
    writes its running statistics through ``native_batch_norm``, whose schema does not declare
    the write, so the engine copies buffers up front (``engine._restored_tensors``).
"""
from __future__ import annotations

import bisect
import sys
from typing import Any, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from deeplite_like.opcount import OpCount, OpStats

from ..errors import FormulaError
from .modules import lookup_module_formula, module_op_name
from .registry import CountOptions, OpCall, is_free, lookup, op_name

_UNTRACKED = object()  # cache marker: the op has no formula and is not free

_get_sequence_nr = getattr(torch.autograd, "_get_sequence_nr", None)
_current_autograd_node = getattr(torch._C, "_current_autograd_node", None)


class _Context(NamedTuple):
    """Where an op's cost goes: every enclosing module's stats, and the innermost's op table."""

    names: tuple[str, ...]
    stats: tuple[OpStats, ...]
    ops: dict[str, OpStats]


class _Frame:
    """One module call in progress."""

    __slots__ = ("module", "name", "ctx", "exc", "args", "kwargs", "formula", "ghost")

    def __init__(self, module, name, ctx, exc, args, kwargs, formula=None, ghost=False):
        self.module = module
        self.name = name
        self.ctx = ctx
        self.exc = exc  # the exception being handled when the call began (usually None)
        self.args = args
        self.kwargs = kwargs
        self.formula = formula
        self.ghost = ghost  # inside a module priced by a module formula: not accounted


class CountingMode(TorchDispatchMode):
    """Counts MACs/FLOPs of every operator run under it into ``self.result`` (an ``OpCount``).

    Use ``attach(list(model.named_modules()))`` before running the model and ``detach()``
    after (in ``finally``); ``set_phase`` before each phase (``forward``, ``loss``,
    ``backward``); ``finish()`` for the result.
    """

    def __init__(self, options: CountOptions, track_backward: bool = False):
        super().__init__()
        self.options = options
        self.result = OpCount()
        root_stats = OpStats()
        self.result.by_module[""] = root_stats
        self._root = _Context(("",), (root_stats,), self.result.module_ops.setdefault("", {}))
        self._ctx = self._root
        self._stack: list[_Frame] = [_Frame(None, "", self._root, None, (), {})]
        self._opaque = 0  # > 0 inside a module that has a module formula
        self._phase = OpStats()
        self._in_backward = False
        self._op_cache: dict[Any, tuple[str, Any, tuple]] = {}
        self._watched: dict[int, list[torch.Tensor]] = {}  # storage address -> model tensors on it
        self._mutated: list[tuple[torch.Tensor, torch.Tensor]] = []  # (model tensor, copy before)
        self._module_formula_cache: dict[type, Any] = {}
        self._names: dict[int, str] = {}
        self._handles: list = []
        self.failures: dict[BaseException, _Frame] = {}
        # Backward attribution: sorted sequence numbers at which each forward context began.
        self._track_backward = track_backward and _get_sequence_nr is not None
        self._seqs: list[int] = []
        self._seq_ctxs: list[_Context] = []
        self._node_ctx: dict[int, _Context] = {}
        self._mark_context()

    # -- phases ---------------------------------------------------------------------------
    def set_phase(self, phase: str) -> None:
        """Count what follows under ``phase`` (``forward``, ``loss`` or ``backward``)."""
        self._phase = self.result.phases.setdefault(phase, OpStats())
        self._in_backward = phase == "backward" and _current_autograd_node is not None

    # -- module hooks ---------------------------------------------------------------------
    def attach(self, named_modules: list[tuple[str, torch.nn.Module]]) -> None:
        """Hook every module (``model.named_modules()``: first qualified names, the root is ``""``).

        TorchScript modules take no hooks: their ops count toward the enclosing module.
        """
        for name, module in named_modules:
            if isinstance(module, torch.jit.ScriptModule):
                continue
            self._names[id(module)] = name
            self._handles.append(module.register_forward_pre_hook(self._enter, with_kwargs=True, prepend=True))
            self._handles.append(module.register_forward_hook(self._exit, with_kwargs=True, always_call=True))

    def detach(self) -> None:
        """Remove every hook ``attach`` added (safe to call twice)."""
        while self._handles:
            self._handles.pop().remove()

    def _enter(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if self._in_backward:  # a re-run forward (checkpointing) is attributed by its node
            return None
        parent = self._stack[-1]
        exc = sys.exc_info()[1]
        if self._opaque:
            self._stack.append(_Frame(module, self._names[id(module)], parent.ctx, exc, args, kwargs, ghost=True))
            return None
        name = self._names[id(module)]
        by_module = self.result.by_module
        stats = by_module.get(name)
        if stats is None:
            stats = by_module[name] = OpStats()
        stats.calls += 1
        ops = self.result.module_ops.setdefault(name, {})
        ctx = parent.ctx
        if name in ctx.names:  # re-entered (recursion): do not count the module twice
            ctx = _Context(ctx.names, ctx.stats, ops)
        else:
            ctx = _Context(ctx.names + (name,), ctx.stats + (stats,), ops)
        formula = self._module_formula(type(module))
        self._stack.append(_Frame(module, name, ctx, exc, args, kwargs, formula))
        self._ctx = ctx
        if formula is not None:
            self._opaque += 1
        self._mark_context()
        return None

    def _exit(self, module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if self._in_backward:
            return None
        frame = self._stack[-1]
        if frame.module is not module or len(self._stack) == 1:
            return None  # our pre-hook did not run for this call (an earlier pre-hook raised)
        self._stack.pop()
        exc = sys.exc_info()[1]
        failed = exc is not None and exc is not frame.exc
        if failed and exc not in self.failures:
            self.failures[exc] = frame  # the first frame to see an exception is the innermost
        if frame.ghost:
            return None
        self._ctx = self._stack[-1].ctx
        self._mark_context()
        if frame.formula is not None:
            self._opaque -= 1
            if not failed:
                self._price_module(frame, module, args, kwargs, output)
        return None

    def _module_formula(self, cls: type) -> Any:
        try:
            return self._module_formula_cache[cls]
        except KeyError:
            fn = self._module_formula_cache[cls] = lookup_module_formula(cls)
            return fn

    def _price_module(self, frame: _Frame, module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        name = module_op_name(type(module))
        try:
            macs, flops = frame.formula(module, args, kwargs, output)
            macs, flops = int(macs), int(flops)
        except Exception as exc:
            error = FormulaError(f"the module formula {getattr(frame.formula, '__qualname__', frame.formula)!r} "
                                 f"for {type(module).__name__} (module {frame.name or '<root>'!r}) failed: "
                                 f"{type(exc).__name__}: {exc}. It must return a Cost(macs, flops).")
            self.failures[error] = frame
            raise error from exc
        self._add(name, macs, flops, frame.ctx)

    def _mark_context(self) -> None:
        if self._track_backward:
            self._seqs.append(_get_sequence_nr())
            self._seq_ctxs.append(self._ctx)

    # -- model tensors written by the forward ---------------------------------------------
    def watch(self, tensors: list[torch.Tensor]) -> None:
        """Copy any of these (real, strided) tensors before an op first writes to its storage."""
        for tensor in tensors:
            if tensor.layout == torch.strided and not tensor.is_meta:
                address = tensor.untyped_storage().data_ptr()
                if address:
                    self._watched.setdefault(address, []).append(tensor)

    def restore_mutated(self) -> None:
        """Write back the values of watched tensors the run changed (call outside the mode)."""
        with torch.no_grad():
            while self._mutated:
                tensor, before = self._mutated.pop()
                tensor.copy_(before)

    def _before_write(self, written: tuple, args: tuple, kwargs: dict) -> None:
        for index, arg_name in written:
            value = args[index] if index < len(args) else kwargs.get(arg_name)
            for tensor in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided and not tensor.is_meta:
                    for owner in self._watched.pop(tensor.untyped_storage().data_ptr(), ()):
                        self._mutated.append((owner, owner.clone()))  # the mode is off in here: not counted

    # -- operators ------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        entry = self._op_cache.get(func)
        if entry is None:
            entry = self._classify(func)
        name, formula, written = entry
        if written and self._watched:
            self._before_write(written, args, kwargs)
        out = func(*args, **kwargs)
        if self._opaque:
            return out
        if formula is None:
            return out
        if formula is _UNTRACKED:
            untracked = self.result.untracked
            untracked[name] = untracked.get(name, 0) + 1
            return out
        try:
            macs, flops = formula(OpCall(func, args, kwargs, out, self.options))
            macs, flops = int(macs), int(flops)
        except Exception as exc:
            raise FormulaError(f"the formula {getattr(formula, '__qualname__', formula)!r} for {name} failed on "
                               f"{_describe_args(args, kwargs)}: {type(exc).__name__}: {exc}. Fix it, or "
                               "replace it with register_formula(..., override=True).") from exc
        self._add(name, macs, flops, self._backward_context() if self._in_backward else self._ctx)
        return out

    def _classify(self, func: Any) -> tuple[str, Any, tuple]:
        formula = lookup(func)
        if formula is None and not is_free(func):
            formula = _UNTRACKED
        schema = getattr(func, "_schema", None)
        written = tuple((i, arg.name) for i, arg in enumerate(schema.arguments if schema is not None else ())
                        if arg.alias_info is not None and arg.alias_info.is_write)
        entry = self._op_cache[func] = (op_name(func), formula, written)
        return entry

    def _add(self, name: str, macs: int, flops: int, ctx: _Context) -> None:
        for stats in ctx.stats:
            stats.macs += macs
            stats.flops += flops
        for table in (ctx.ops, self.result.by_operator):
            stats = table.get(name)
            if stats is None:
                stats = table[name] = OpStats()
            stats.macs += macs
            stats.flops += flops
            stats.calls += 1
        phase = self._phase
        phase.macs += macs
        phase.flops += flops
        phase.calls += 1

    def _backward_context(self) -> _Context:
        node = _current_autograd_node()
        if node is None or not self._track_backward:
            return self._root
        seq = node._sequence_nr()
        ctx = self._node_ctx.get(seq)
        if ctx is None:
            i = bisect.bisect_right(self._seqs, seq) - 1
            # A node made after the forward (loss, AccumulateGrad) finds the last context: the root.
            ctx = self._seq_ctxs[i] if i >= 0 else self._root
            self._node_ctx[seq] = ctx
        return ctx

    # -- result ---------------------------------------------------------------------------
    def finish(self) -> OpCount:
        """Totals from the phases, empty per-module op tables dropped; returns ``self.result``."""
        result = self.result
        result.macs = sum(p.macs for p in result.phases.values())
        result.flops = sum(p.flops for p in result.phases.values())
        result.module_ops = {name: ops for name, ops in result.module_ops.items() if ops}
        return result


def _describe_tensor(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        device = "" if value.device.type == "cpu" else f" {value.device}"
        return f"Tensor[{', '.join(str(int(s)) for s in value.shape)}] {dtype}{device}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe_tensor(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe_tensor(v)}" for k, v in value.items()) + "}"
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__}(...)"


def _describe_args(args: tuple, kwargs: dict) -> str:
    """``(Tensor[2, 3] float32, mask=Tensor[2] bool)``: what a call received, for error messages."""
    parts = [_describe_tensor(a) for a in args] + [f"{k}={_describe_tensor(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"
