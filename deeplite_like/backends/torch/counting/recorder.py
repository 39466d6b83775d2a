"""The counting pass itself: a ``TorchDispatchMode`` that prices every aten op, plus module calls.

It is also the observation pass (``engine.observe``): with a ``ledger`` (``tensors.StorageLedger``)
it adds each operator's fresh output storages to the live bytes, for peak memory; with ``layers``
it keeps each module's first call's shapes and output bytes, for the per-layer table. Counts,
memory and shapes therefore come from one forward and one module attribution, ``CountingMode``'s.

How ``CountingMode`` attributes each operator to a module call (forward and backward), leaves the
model as found, counts under ``torch.distributed`` and stays fast: its class docstring.
"""
from __future__ import annotations

import bisect
import contextlib
import sys
import threading
from typing import Any, Callable, Protocol, TypeVar

import torch
from torch._C import DispatchKey
from torch._ops import HigherOrderOperator
from torch.utils._python_dispatch import TorchDispatchMode

from deeplite_like.backends.torch.counting.formulas.attention import HIGHER_ORDER_FORMULAS
from deeplite_like.backends.torch.counting.meta import MetaOutputs, MetaValues
from deeplite_like.backends.torch.counting.registry import (CountOptions, OpCall, is_free, lookup,
                                                            lookup_module_formula, module_op_name, op_info)
from deeplite_like.backends.torch.kernels import device_meta_kernels, eager_flex_attention, unfused
from deeplite_like.backends.torch.state import add_global_module_hooks, remove_global_module_hooks
from deeplite_like.backends.torch.tensors import (LayerFacts, any_nested, describe_args, layer_facts, local_tensor,
                                                  price_per_component)
from deeplite_like.errors import FormulaError
from deeplite_like.results import OpCount, OpStats
from deeplite_like.safety import checkpoint, protected, restore_all, uninterruptible


M = TypeVar("M", bound="LightDispatchMode")
_DYNAMO_SAFE: dict[type, type] = {}


class LightDispatchMode(TorchDispatchMode):
    """Base of our dispatch modes: no TorchDynamo wrapper (nor import) unless TorchDynamo is loaded.

    torch wraps every mode's ``__torch_dispatch__`` in ``torch._dynamo.disable`` unless the mode's
    ``_should_skip_dynamo()`` says ``False``. The wrapper costs about 1 us per operator, and its
    first call imports ``torch._dynamo`` (over a second, several on a loaded machine). It only
    matters when an eval-frame callback is set, i.e. ``torch.compile`` code is running, which needs
    ``torch._dynamo`` loaded. So a ``LightDispatchMode`` skips the wrapper; ``make`` builds the
    wrapped (``dynamo_safe``) subclass when ``torch._dynamo`` is already loaded, and a running mode
    switches to it (``switch_if_dynamo_loaded``) once something loads it.

    Every dispatch mode of the torch backend (counting, memory tracking) derives from it.
    """

    _dynamo_safe = False  # True in the ``dynamo_safe(cls)`` subclasses

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def switch_if_dynamo_loaded(self) -> None:
        """Become the ``dynamo_safe`` subclass if ``torch._dynamo`` was loaded since (compiled code may run)."""
        if not self._dynamo_safe and "torch._dynamo" in sys.modules:
            self.__class__ = dynamo_safe(type(self))


def dynamo_safe(cls: type) -> type:
    """A subclass of ``cls`` whose ``__torch_dispatch__`` runs with TorchDynamo disabled (torch's default)."""
    safe = _DYNAMO_SAFE.get(cls)
    if safe is None:
        safe = _DYNAMO_SAFE[cls] = type(cls.__name__, (cls,), {
            "__torch_dispatch__": torch._disable_dynamo(cls.__torch_dispatch__, recursive=True),
            "_dynamo_safe": True, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
        })
    return safe


def make(cls: type[M], *args: Any, **kwargs: Any) -> M:
    """``cls(*args, **kwargs)``, as its ``dynamo_safe`` subclass when ``torch._dynamo`` is loaded."""
    return (dynamo_safe(cls) if "torch._dynamo" in sys.modules else cls)(*args, **kwargs)


# Modules that skip their children's forwards (one fused kernel) unless the fused fast path is
# off: while one is counted, the fast path is off (``kernels.unfused``), so that its children run.
FUSED_UNLESS_HOOKED: tuple[type, ...] = (torch.nn.TransformerEncoderLayer,)

_local = threading.local()  # .mode: the CountingMode attached in this thread, if any

_UNTRACKED = object()  # cache marker: the op has no formula and is not free
_ABSENT = object()  # cache marker: no module formula looked up yet

_get_sequence_nr = getattr(torch.autograd, "_get_sequence_nr", None)
_current_autograd_node = getattr(torch._C, "_current_autograd_node", None)


# -- the hook point for torch.distributed -----------------------------------------------------
# The counting core knows no distributed behaviour. ``distributed/recording.py`` registers it here
# when ``deeplite_like.backends.torch.distributed`` is imported (the backend's package root imports
# it, so any use of the backend has it). Until then no op is a collective and a tensor subclass's
# op is counted as any other; a count of plain tensors never calls into it.
class DistributedRecording(Protocol):
    """What the counting mode asks of ``distributed/recording.py`` (``register_distributed``)."""

    comm_ops: frozenset[str]  # names of the collective operators and of the waits on them

    def comm_formula(self, mode: CountingMode, name: str, default: Any) -> Any:
        """The formula of collective ``name`` (logs its bytes, 0 FLOPs), ``None`` for a wait."""

    def subclass_dispatch(self, mode: CountingMode, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
        """The op's result when a tensor subclass (DTensor) runs it, else ``PLAIN``."""


PLAIN = object()  # ``subclass_dispatch``: not a distributed subclass, count the op as usual
_distributed: list[DistributedRecording] = []  # the registered recording (at most one)


def register_distributed(recording: DistributedRecording) -> None:
    """Give the counting mode its behaviour under ``torch.distributed`` (``distributed/recording.py``)."""
    _distributed[:] = [recording]


class _Context:
    """Where an op's cost goes: every enclosing module's stats, and the innermost's op table.

    ``pending`` accumulates ``[macs, flops, calls]`` per operator name until ``_flush``
    spreads it over ``stats``, ``ops``, ``by_operator`` and the phase.
    """

    __slots__ = ("names", "stats", "ops", "pending")

    def __init__(self, names: tuple[str, ...], stats: tuple[OpStats, ...], ops: dict[str, OpStats]):
        self.names = names
        self.stats = stats
        self.ops = ops
        self.pending: dict[str, list[int]] = {}


class _Frame:
    """A module call that raised: what ``ForwardError`` reports (``CountingMode.failures``)."""

    __slots__ = ("module", "name", "args", "kwargs")

    def __init__(self, module: torch.nn.Module, name: str, args: tuple, kwargs: dict):
        self.module = module
        self.name = name
        self.args = args
        self.kwargs = kwargs


class CountingMode(LightDispatchMode):
    """Counts MACs/FLOPs of every operator run under it into ``self.result`` (an ``OpCount``).

    Make one with ``counting_mode(...)``. Use ``attach(list(model.named_modules()))`` before
    running the model and ``detach()`` after (in ``finally``), in the thread that runs the
    model; ``set_phase`` before each phase (``forward``, ``loss``, ``backward``); ``finish()``
    for the result.

    Attribution
        Forward: ``attach`` registers two *global* module hooks
        (``torch.nn.modules.module.register_module_forward_pre_hook`` / ``register_module_forward_hook``,
        ``always_call``), which ``detach`` removes: nothing on any class or instance is replaced, so
        the model's own code sees exactly the model it was given (``type(self).forward``,
        ``inspect.signature``, ``__dict__``: transformers' ``GradientCheckpointingLayer`` still
        checkpoints, because it finds its own ``forward`` on its class). The hooks fire for every
        module call of the process; they count a call only from the thread that counts and only for
        a module this mode attached (by identity): other threads, copies and other instances go
        uncounted (two threads never measure one model at once: ``deeplite_like.safety.model_lock``,
        taken by ``engine.observe``). A module call opens a
        *context*: the ``OpStats`` of the module and of every module that encloses this call, and
        the module's own ``module_ops`` dict. An op adds its cost to a per-context accumulator
        (three integer adds); the accumulators are spread over the enclosing modules, the operator
        table and the phase when the phase ends, so ``by_module`` is nested by construction and
        follows the real call stack.

        Hooks order: global hooks run before a module's own. A module's own forward pre-hooks (the
        user's) therefore run inside its context and its own forward hooks outside it, in the
        enclosing module, as under ``torch.utils.module_tracker`` (``FlopCounterMode``).
        TorchScript modules are not followed: their operators count toward the enclosing module.
        Why hooks and not the per-class ``forward`` dispatchers used before: ``docs/conventions.rst``
        ("Module attribution") and ``benchmarks/bench_attribution.py``.

        Backward: no module code runs in backward, so each forward context is also filed under the
        autograd *sequence number* at which it began (``torch.autograd._get_sequence_nr()``, a
        thread-local counter that every autograd node takes its number from when it is created).
        In backward, the node being executed (``torch._C._current_autograd_node()``) tells, by its
        sequence number, which module call created it: the op is attributed there. We chose this
        over grad hooks on module inputs/outputs (``torch.utils.module_tracker``'s approach)
        because it needs no per-tensor hooks, works when a module's inputs do not require grad
        (where an "inputs' grads are ready" hook never fires and the module is never popped), and
        is exact for interleaved branches. Nodes with no forward context (the engine's initial
        ``ones_like``, ``AccumulateGrad``, whose sequence number is the maximum) go to the root.
        A forward re-run in backward (activation checkpointing's recomputation) calls modules
        again: such a call opens a context under its module's ancestors by qualified name, so the
        recomputed operators are attributed to the modules that run them, in the backward phase.

    Leaving the model as found
        ``watch`` registers tensors (the engine passes the model's parameters) by storage. Before
        an op that declares a write to one of its arguments (``Tensor(a!)`` in its schema:
        ``add_``, ``clamp_``, ``copy_``, ``out=``) touches a watched storage, the tensor is copied
        once; ``restore_mutated`` writes the copies back. Buffers are not left to this: batch norm
        writes its running statistics through ``native_batch_norm``, whose schema does not declare
        the write, so the engine copies buffers up front (``engine._restored_tensors``).

    torch.distributed
        The counting core imports nothing of ``distributed/``: that package registers its behaviour
        at the hook point below (``register_distributed``) when it is imported, which the backend's
        package root does. Then an op whose arguments hold tensor subclasses (``types`` is not
        empty) goes through ``distributed.recording.subclass_dispatch`` first: a DTensor op is run by
        DTensor under the mode, so the local ops on this rank's shards are what is counted.
        Collective operators are priced at 0 FLOPs by ``CommLog`` formulas that log their bytes
        (``OpCount.communication``). A count of plain tensors never calls into it. See
        ``docs/distributed.rst``.

    Speed
        Per-op facts (name, written arguments, the C++ callable) are cached for the process by op
        identity (``registry.op_info``), the formula look-up once per count. ``counting_mode`` leaves out
        torch's dynamo-disabling wrapper of ``__torch_dispatch__`` while TorchDynamo is not loaded
        (``LightDispatchMode``, below).
        On the meta device, ``meta.MetaOutputs`` replays the outputs of repeated ops instead
        of running their (often Python) meta kernels. ``benchmarks/bench_torch_count.py`` measures the result
        (``docs/benchmarks.rst``).

    ``CountingMode`` sees each operator once, below autograd and after composite ops are
    decomposed, however it was called (modules, ``torch.nn.functional``, ``torch.*``, tensor
    methods, Python operators). It knows no particular op: it asks the formula table
    (``registry.lookup`` / ``registry.is_free``) once per op overload and caches the answer.
    """

    # (LightDispatchMode: no TorchDynamo wrapper nor import unless torch._dynamo is loaded; this holds
    # for subclasses of CountingMode too)

    supports_higher_order_operators = True  # FlexAttention & co. reach ``__torch_dispatch__`` (``_higher_order``)

    def __init__(self, options: CountOptions, track_backward: bool = False, meta: bool = False):
        super().__init__()
        self.options = options
        self.result = OpCount()
        root_stats = OpStats()
        self.result.by_module[""] = root_stats
        self._root = _Context(("",), (root_stats,), self.result.module_ops.setdefault("", {}))
        self._ctx = self._root
        self._pending: list[_Context] = []  # contexts with a non-empty ``pending``
        self._opaque = 0  # > 0 inside a module that has a module formula
        self._phase = OpStats()
        self._phase_name = ""
        self._in_backward = False
        # torch.distributed (the hook point above): made by the registered recording when first needed
        self._comm: Any = None  # its ``CommLog``: the collectives counted
        self._in_dtensor = False
        self._logical: Any = None  # its ``LogicalShare``: this rank's share of the logical model
        self._op_cache: dict[int, tuple[str, Any, tuple, Callable, int]] = {}  # id(op) -> _classify
        self._meta = MetaOutputs() if meta else None
        self.values = MetaValues(self._where) if meta else None  # values of small integer tensors on meta
        self._to_watch: list[torch.Tensor] = []  # given to ``watch``, addresses not read yet
        self._watched: dict[int, list[torch.Tensor]] = {}  # storage address -> model tensors on it
        self._mutated: list[tuple[torch.Tensor, torch.Tensor]] = []  # (model tensor, copy before)
        self._module_formula_cache: dict[type, Any] = {}
        self._names: dict[int, str] = {}  # id(module) -> qualified name, for the modules attached
        self._unfused: contextlib.ExitStack | None = None
        self._rows: dict[str, tuple[OpStats, dict, Any]] = {}  # name -> by_module row, module_ops row, formula
        self._handles: list = []
        self._attached = False
        self._thread = 0
        self._hooked: list[tuple] = []  # module calls in progress: (module, name, _open())
        self._previous_mode: Any = None
        self.failures: dict[BaseException, _Frame] = {}
        # Backward attribution: sorted sequence numbers at which each forward context began.
        self._track_backward = track_backward and _get_sequence_nr is not None
        self._seqs: list[int] = []
        self._seq_ctxs: list[_Context] = []
        self._node_ctx: dict[int, _Context] = {}
        self._mark_context()
        # What else the pass observes (``engine.observe``): storage lifetimes (peak memory) and each
        # module's first call (the per-layer table). None: not observed.
        self.ledger: Any = None  # a ``tensors.StorageLedger``; told of every operator's outputs
        self.traffic: Any = None  # a ``tensors.TrafficLog``; told of every operator's reads and writes
        self.layers: dict[str, LayerFacts] | None = None  # qualified name -> facts of its first call

    # -- phases ---------------------------------------------------------------------------
    def set_phase(self, phase: str) -> None:
        """Count what follows under ``phase`` (``forward``, ``loss`` or ``backward``)."""
        self._flush()
        self._phase = self.result.phases.setdefault(phase, OpStats())
        self._phase_name = phase
        self._in_backward = phase == "backward" and _current_autograd_node is not None

    # -- module calls ---------------------------------------------------------------------
    @protected
    def attach(self, named_modules: list[tuple[str, torch.nn.Module]], unfuse: bool = True) -> None:
        """Follow every module's calls (``model.named_modules()``: first qualified names, the root is ``""``).

        ``unfuse``: turn the fused transformer fast path off while a layer that has one is counted
        (``kernels.unfused``), so that its children run and are attributed; ``False`` for nested-tensor
        inputs, which only the fused kernels accept (priced whole, per sequence).

        Counting follows this thread's calls only, through two global module hooks (see the
        class docstring); nothing is stored on the modules or their classes. TorchScript modules
        are not followed: their ops count toward the enclosing module.
        """
        self._thread = threading.get_ident()
        fused = False
        for name, module in named_modules:
            if isinstance(module, torch.jit.ScriptModule):
                continue
            self._names[id(module)] = name
            fused = fused or isinstance(module, FUSED_UNLESS_HOOKED)
        with uninterruptible():  # (what is set up here is what detach finds to undo: never half of it)
            self._unfused = contextlib.ExitStack()
            if fused and unfuse:
                self._unfused.enter_context(unfused())
            self._unfused.enter_context(eager_flex_attention())
            self._unfused.enter_context(device_meta_kernels())
            self._previous_mode = getattr(_local, "mode", None)
            self._attached = True
            _local.mode = self
            if self._names:
                self._handles += add_global_module_hooks(self._hook_enter, self._hook_exit)
        checkpoint()  # (an interrupt held while setting up is raised now: detach will find all of it)

    @protected
    def detach(self) -> None:
        """Remove what ``attach`` added (safe to call twice; every step runs, uninterrupted)."""
        with uninterruptible():
            restore_all(self._leave_thread, lambda: remove_global_module_hooks(self._handles), self._restore_kernels)

    @protected
    def _leave_thread(self) -> None:
        if self._attached:
            self._attached = False
            _local.mode = self._previous_mode

    @protected
    def _restore_kernels(self) -> None:
        """Put the fused fast path and FlexAttention's compile switch back (``attach`` turned them off)."""
        if self._unfused is not None:
            self._unfused, unfused_stack = None, self._unfused
            unfused_stack.close()

    def _call(self, module: torch.nn.Module, forward: Callable, args: tuple, kwargs: dict,
              name: str | None = None) -> Any:
        """Run ``forward(*args, **kwargs)`` as a call of ``module`` (an entry point other than ``forward``).

        ``name``: the module's qualified name (default: the attached module's; a module this mode
        did not attach runs uncounted as a call).
        """
        if name is None:
            name = self._names.get(id(module))
        if name is None:
            return forward(*args, **kwargs)
        opened = self._open(module, name)
        try:
            output = forward(*args, **kwargs)
        except BaseException as exc:
            self._failed(exc, module, name, args, kwargs)
            raise
        finally:
            if opened is not None:
                self._close(opened)
        if opened is not None and opened[2] is not None:
            self._price_module(opened[2], name, module, args, kwargs, output, opened[1])
        if self.layers is not None:
            self._note_layer(name, args, kwargs, output)
        return output

    def _note_layer(self, name: str, args: tuple, kwargs: dict, output: Any) -> None:
        """Keep the shapes and output bytes of a module's first call (``layers``: the per-layer table)."""
        if name not in self.layers:
            self.layers[name] = layer_facts(args, kwargs, output)

    def attached_name(self, module: torch.nn.Module) -> str | None:
        """The qualified name of an attached module (``None``: not one of the model's modules)."""
        return self._names.get(id(module))

    def _open(self, module: torch.nn.Module, name: str) -> tuple[_Context, _Context, Any] | None:
        """Enter a module call: ``(context before, its context, module formula)``, or None inside a
        module priced whole (its inner modules are not accounted, only located on failure)."""
        if self._opaque:
            return None
        row = self._rows.get(name)
        if row is None:
            row = self._row(module, name)
        stats, ops, formula = row
        stats.calls += 1
        before = parent = self._ctx
        if self._in_backward and parent is self._root:  # a forward re-run in backward (recomputation)
            parent = self._ancestors(name)
        if name in parent.names:  # re-entered (recursion): do not count the module twice
            ctx = _Context(parent.names, parent.stats, ops)
        else:
            ctx = _Context(parent.names + (name,), parent.stats + (stats,), ops)
        self._ctx = ctx
        if self._track_backward:
            self._mark_context()
        if formula is not None:
            self._opaque += 1
        return before, ctx, formula

    def _ancestors(self, name: str) -> _Context:
        """The context of ``name``'s enclosing modules by qualified name (for a call that has no
        caller on record: a module re-run in backward by activation checkpointing)."""
        names, stats = ("",), (self.result.by_module[""],)
        parts = name.split(".") if name else []
        for i in range(1, len(parts)):
            prefix = ".".join(parts[:i])
            row = self._rows.get(prefix)
            if row is not None:
                names += (prefix,)
                stats += (row[0],)
        return _Context(names, stats, self._root.ops)

    def _row(self, module: torch.nn.Module, name: str) -> tuple[OpStats, dict, Any]:
        """At a module's first call: its rows in ``by_module`` and ``module_ops``, and its module formula."""
        result = self.result
        row = self._rows[name] = (result.by_module.setdefault(name, OpStats()),
                                  result.module_ops.setdefault(name, {}), self._module_formula(type(module)))
        return row

    def _close(self, opened: tuple[_Context, _Context, Any]) -> None:
        parent, _, formula = opened
        if formula is not None:
            self._opaque -= 1
        self._ctx = parent
        if self._track_backward:
            self._mark_context()

    def _hook_enter(self, module: torch.nn.Module, args: tuple) -> None:
        """A module call begins (the global pre-hook): open its context."""
        if threading.get_ident() != self._thread and not self._recomputing():
            return None
        name = self._names.get(id(module))
        if name is None:  # (a global hook: it sees every module of the process)
            return None
        self._hooked.append((module, name, self._open(module, name)))
        return None

    def _recomputing(self) -> bool:
        """In our backward, a forward re-run by an autograd node (which may run on a device's thread)."""
        return self._in_backward and _current_autograd_node() is not None

    def _hook_exit(self, module: torch.nn.Module, args: tuple, *kwargs_output: Any) -> None:
        """A module call ends (the global, always called forward hook): ``(module, args, kwargs, output)``,
        or ``(module, args, None)`` when the forward raised (torch then passes no kwargs)."""
        if threading.get_ident() != self._thread and not self._recomputing():
            return None
        if not self._hooked or self._hooked[-1][0] is not module:
            return None  # not one of ours, or our pre-hook did not run for this call (an earlier one raised)
        _, name, opened = self._hooked.pop()
        failed = len(kwargs_output) == 1  # (torch calls an always-called hook without kwargs when forward raised)
        if failed:
            kwargs, output = _failed_call_kwargs(), None
            self._failed(sys.exc_info()[1], module, name, args, kwargs)
        else:
            kwargs, output = kwargs_output
        if opened is not None:
            self._close(opened)
            if opened[2] is not None and not failed:
                self._price_module(opened[2], name, module, args, kwargs, output, opened[1])
        if self.layers is not None and not failed:
            self._note_layer(name, args, kwargs, output)
        return None

    def _module_formula(self, cls: type) -> Any:
        formula = self._module_formula_cache.get(cls, _ABSENT)
        if formula is _ABSENT:
            formula = self._module_formula_cache[cls] = lookup_module_formula(cls)
        return formula

    def failed_frame(self, exc: BaseException) -> _Frame | None:
        """The innermost module call that ``exc`` (or the deepest of its chained causes) went through."""
        frame, seen, cause = None, set(), exc
        while cause is not None and id(cause) not in seen:  # the deepest chained cause we saw fail wins
            seen.add(id(cause))
            frame = self.failures.get(cause, frame)
            cause = cause.__cause__ or cause.__context__
        return frame

    def _failed(self, exc: BaseException, module: torch.nn.Module, name: str, args: tuple, kwargs: dict) -> None:
        if self._in_backward:  # a recomputation stopped early (checkpoint's own signal): keep nothing alive
            return
        if exc not in self.failures:  # the first frame to see an exception is the innermost
            self.failures[exc] = _Frame(module, name, args, kwargs)

    def _price_module(self, formula: Callable, name: str, module: torch.nn.Module, args: tuple, kwargs: dict,
                      output: Any, ctx: _Context) -> None:
        try:
            macs, flops = formula(module, args, kwargs, output)
            macs, flops = int(macs), int(flops)
        except Exception as exc:
            error = FormulaError(f"the module formula {getattr(formula, '__qualname__', formula)!r} "
                                 f"for {type(module).__name__} (module {name or '<root>'!r}) failed: "
                                 f"{type(exc).__name__}: {exc}. It must return a Cost(macs, flops).")
            self.failures[error] = _Frame(module, name, args, kwargs)
            raise error from exc
        self._add(module_op_name(type(module)), macs, flops, ctx)
        if self.traffic is not None:
            self.traffic.add(module_op_name(type(module)), ctx.names, self._phase_name, macs, flops)

    def _mark_context(self) -> None:
        if self._track_backward:
            seq = _get_sequence_nr()
            if self._seqs and seq < self._seqs[-1]:  # another thread's counter (a device's backward thread)
                return
            self._seqs.append(seq)
            self._seq_ctxs.append(self._ctx)

    # -- model tensors written by the forward ---------------------------------------------
    def watch(self, tensors: list[torch.Tensor]) -> None:
        """Copy any of these (real, strided) tensors before an op first writes to its storage.

        Their storage addresses are read when the first op that writes anything runs: a forward
        without in-place ops never pays for it.
        """
        self._to_watch.extend(tensors)

    def _watch_now(self) -> None:
        for tensor in self._to_watch:
            tensor = local_tensor(tensor)  # a DTensor's storage is its local shard's
            if tensor.layout == torch.strided and not tensor.is_meta:
                address = tensor.untyped_storage().data_ptr()
                if address:
                    self._watched.setdefault(address, []).append(tensor)
        self._to_watch = []

    @protected
    def restore_mutated(self) -> None:
        """Write back the values of watched tensors the run changed (call outside the mode)."""
        with torch.no_grad():
            while self._mutated:
                tensor, before = self._mutated.pop()
                tensor.copy_(before)

    def _before_write(self, written: tuple, args: tuple, kwargs: dict) -> None:
        if self._to_watch:
            self._watch_now()
        for index, arg_name in written:
            value = args[index] if index < len(args) else kwargs.get(arg_name)
            for tensor in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided and not tensor.is_meta:
                    for owner in self._watched.pop(tensor.untyped_storage().data_ptr(), ()):
                        self._mutated.append((owner, owner.clone()))  # the mode is off in here: not counted

    # -- operators ------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self._dynamo_safe and "torch._dynamo" in sys.modules:  # compiled code may run from now on
            self.switch_if_dynamo_loaded()
        entry = self._op_cache.get(id(func))  # (the op outlives the count: its id is not reused)
        if entry is None:
            if isinstance(func, HigherOrderOperator):
                return self._higher_order(func, args, kwargs or {})
            entry = self._classify(func)
        name, formula, written, run, replay = entry
        if kwargs is None:
            kwargs = {}
        if types and _distributed:  # tensor subclasses (plain tensors have none): DTensor runs its local ops
            out = _distributed[0].subclass_dispatch(self, func, types, args, kwargs)
            if out is not PLAIN:
                return out
        if written and (self._watched or self._to_watch):
            self._before_write(written, args, kwargs)
        out = self._meta.run(func, run, replay, args, kwargs) if replay else run(*args, **kwargs)
        if self.ledger is not None:
            self.ledger.count(func, out)
        if formula is None or self._opaque:
            if self.traffic is not None:
                self.traffic.record(func, name, self._context_names(), self._phase_name, 0, 0, args, kwargs, out)
            return out
        if formula is _UNTRACKED:
            untracked = self.result.untracked
            untracked[name] = untracked.get(name, 0) + 1
            if self.traffic is not None:
                self.traffic.record(func, name, self._context_names(), self._phase_name, 0, 0, args, kwargs, out)
            return out
        try:
            macs, flops = formula(OpCall(func, args, kwargs, out, self.options))
            macs, flops = int(macs), int(flops)
        except Exception as exc:
            if any_nested(args, kwargs):  # no single shape: price it per component
                macs, flops = self._price_nested(func, formula, name, args, kwargs, out)
            else:
                raise FormulaError(f"the formula {getattr(formula, '__qualname__', formula)!r} for {name} failed on "
                                   f"{describe_args(args, kwargs)}: {type(exc).__name__}: {exc}. Fix it, or "
                                   "replace it with register_formula(..., override=True).") from exc
        if self.traffic is not None:
            self.traffic.record(func, name, self._context_names(), self._phase_name, macs, flops, args, kwargs, out)
        # _add, inlined: this line runs once per priced op
        ctx = self._ctx
        if self._in_backward and ctx is self._root:  # (not in a module re-run by a recomputation)
            ctx = self._backward_context()
        acc = ctx.pending.get(name)
        if acc is None:
            self._add(name, macs, flops, ctx)
        else:
            acc[0] += macs
            acc[1] += flops
            acc[2] += 1
        return out

    def _higher_order(self, func: HigherOrderOperator, args: tuple, kwargs: dict) -> Any:
        """A higher-order operator (FlexAttention, ``cond``, ...) that reached the mode.

        Its eager implementation (``CompositeExplicitAutograd``) runs under this mode, so every
        operator inside is seen (memory, module attribution). One priced whole
        (``HIGHER_ORDER_FORMULAS``: ``flex_attention`` and its backward) runs with its inner
        operators unpriced, as a module with a module formula does; any other is priced by its
        inner operators. One with no eager implementation is refused by name.
        """
        name = f"higher_order.{func.name()}"
        kernel = func.py_kernels.get(DispatchKey.CompositeExplicitAutograd)
        if kernel is None:
            raise NotImplementedError(f"counting cannot run the higher-order operator {name} (it has no eager "
                                      "implementation); count the model without torch.compile around it")
        formula = HIGHER_ORDER_FORMULAS.get(func.name())
        cost = None
        if formula is not None and not self._opaque:
            try:
                cost = formula(args, self.options)
            except Exception as exc:
                raise FormulaError(f"the formula for {name} failed on {describe_args(args, kwargs)}: "
                                   f"{type(exc).__name__}: {exc}") from exc
        with self:  # (the dispatcher popped this mode to call us)
            if cost is not None:
                self._opaque += 1
            try:
                out = kernel(*args, **kwargs)
            finally:
                if cost is not None:
                    self._opaque -= 1
        if cost is not None:
            ctx = self._ctx
            if self._in_backward and ctx is self._root:
                ctx = self._backward_context()
            self._add(name, int(cost.macs), int(cost.flops), ctx)
            if self.traffic is not None:
                self.traffic.add(name, ctx.names, self._phase_name, int(cost.macs), int(cost.flops))
        return out

    def _price_nested(self, func: Any, formula: Callable, name: str, args: tuple, kwargs: dict,
                      out: Any) -> tuple[int, int]:
        """An op on nested tensors, priced as the sum over their components (``tensors.price_per_component``)."""
        options = self.options
        try:
            return price_per_component(formula, lambda a, k, o: OpCall(func, a, k, o, options), args, kwargs, out)
        except Exception as exc:
            raise FormulaError(f"the formula {getattr(formula, '__qualname__', formula)!r} for {name} failed on "
                               f"the components of nested tensors {describe_args(args, kwargs)}: "
                               f"{type(exc).__name__}: {exc}. Fix it, or replace it with "
                               "register_formula(..., override=True).") from exc

    def _classify(self, func: Any) -> tuple[str, Any, tuple, Callable, int]:
        """The op's name, formula (``None``: free, ``_UNTRACKED``), written arguments, callable,
        and how ``MetaOutputs`` may replay it (0: never).

        The formula is looked up once per count (the table may change between counts); the
        rest never changes and is kept for the process (``registry.op_info``).
        """
        name, written, run, replay, _ = op_info(func)
        formula = lookup(func)
        if formula is None and not is_free(func):
            formula = _UNTRACKED
            if _distributed and name in _distributed[0].comm_ops:  # a collective (or its wait)
                formula = _distributed[0].comm_formula(self, name, _UNTRACKED)
        if self.values is not None:  # meta: replay (when allowed) inside the run that keeps values
            if replay:
                outputs, kernel, how = self._meta, run, replay

                def run_or_replay(*args: Any, **kwargs: Any) -> Any:
                    return outputs.run(func, kernel, how, args, kwargs)

                run = run_or_replay
            run, replay = self.values.wrap(func, name, written, run), 0
        entry = self._op_cache[id(func)] = (name, formula, written, run, 0)
        return entry

    def communication(self) -> list:
        """The collectives counted so far: ``CommStats`` rows (``docs/distributed.rst``)."""
        return list(self._comm.rows.values()) if self._comm is not None else []

    def _context_names(self) -> tuple[str, ...]:
        """The qualified names of the module calls enclosing the op running now, innermost last."""
        return (self._backward_context() if self._in_backward and self._ctx is self._root else self._ctx).names

    def module_running(self) -> str:
        """Qualified name of the innermost module running now; in backward, of the module whose
        forward made the autograd node being executed (``""``: the root, or no module)."""
        return (self._backward_context() if self._in_backward and self._ctx is self._root else self._ctx).names[-1]

    def _where(self) -> str:
        """The innermost module running now, for error messages."""
        name = self._ctx.names[-1]
        return "the root module" if name == "" else f"module {name!r}"

    def _add(self, name: str, macs: int, flops: int, ctx: _Context) -> None:
        acc = ctx.pending.get(name)
        if acc is None:
            if not ctx.pending:
                self._pending.append(ctx)
            acc = ctx.pending[name] = [0, 0, 0]
            # create the table rows now, so that they keep the order in which ops first ran
            if name not in ctx.ops:
                ctx.ops[name] = OpStats()
            if name not in self.result.by_operator:
                self.result.by_operator[name] = OpStats()
        acc[0] += macs
        acc[1] += flops
        acc[2] += 1

    def _flush(self) -> None:
        """Spread the pending per-context sums over modules, op tables and the current phase."""
        by_operator, phase = self.result.by_operator, self._phase
        for ctx in self._pending:
            for name, (macs, flops, calls) in ctx.pending.items():
                for stats in ctx.stats:
                    stats.macs += macs
                    stats.flops += flops
                for stats in (ctx.ops[name], by_operator[name], phase):
                    stats.macs += macs
                    stats.flops += flops
                    stats.calls += calls
            ctx.pending.clear()
        self._pending.clear()

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
        self._flush()
        result = self.result
        result.macs = sum(p.macs for p in result.phases.values())
        result.flops = sum(p.flops for p in result.phases.values())
        result.module_ops = {name: ops for name, ops in result.module_ops.items() if ops}
        result.communication = self.communication()
        if self._logical is not None and self._logical.ran:
            result.logical_macs, result.logical_flops = self._logical.totals(result.macs, result.flops)
        if self.traffic is not None:
            self.traffic.finish(result)
        return result


def _failed_call_kwargs() -> dict:
    """The keyword arguments of the module call that raised, read from ``nn.Module._call_impl``'s frame
    (torch gives an always-called hook none when the forward raised; ``ForwardError`` names them)."""
    frame = sys._getframe(2)  # _call_impl -> _hook_exit -> here
    if frame.f_code is not torch.nn.Module._call_impl.__code__:
        return {}
    kwargs = frame.f_locals.get("kwargs")
    return kwargs if isinstance(kwargs, dict) else {}


def counting_mode(options: CountOptions, track_backward: bool = False, meta: bool = False) -> CountingMode:
    """A ``CountingMode``; TorchDynamo-safe when ``torch._dynamo`` is loaded (compiled code may run).

    Without ``torch._dynamo`` loaded no compiled code can be running, and counting skips the
    dynamo-disabling wrapper (and its import). If the forward loads it (its first
    ``torch.compile``), the mode switches to the safe class at its next op; the op in flight
    may be traced by dynamo, which stays correct, only slower, and warns. ``meta``:
    the run is on the meta device; repeated ops get their outputs replayed (``MetaOutputs``).
    """
    return make(CountingMode, options, track_backward=track_backward, meta=meta)
