"""``count_ops``: MACs and FLOPs of one forward (and optionally backward) pass of a torch model.

The counting itself is ``recorder.CountingMode``; this module prepares the run (meta copies,
fresh autograd leaves), runs the phases, turns failures into errors that say where, and puts
the user's model back exactly as it was found.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import torch
from torch.utils import _pytree as pytree

import deeplite_like.backends.torch.counting.formulas  # noqa: F401  (fills the formula table)
from deeplite_like.backends.torch.counting.meta import MetaValues
from deeplite_like.backends.torch.counting.recorder import CountingMode, counting_mode
from deeplite_like.backends.torch.counting.registry import CountOptions
from deeplite_like.backends.torch.inputs import fixed_batch_hint
from deeplite_like.backends.torch.kernels import ATTENTION_KERNELS, AttentionKernel
from deeplite_like.backends.torch.state import kept_random_state, kept_tensor_attributes, swapped_tensors
from deeplite_like.backends.torch.tensors import (LayerFacts, StorageLedger, TrafficLog, describe_args, first_tensor_batch,
                                                  is_dtensor, is_fully_sharded, loss_of, memory_stats, meta_like,
                                                  spanned_bytes, storage_key, tensors_in)
from deeplite_like.errors import BackwardError, ForwardError, UntrackedOpWarning, check_flag, inputs_hint, model_inputs
from deeplite_like.results import OpCount, parent_names, roll_up_containers
from deeplite_like.safety import (checkpoint, interrupt_guard, model_lock, protected, restore_all, restore_each,
                                  uninterruptible)

LossFn = Callable[[Any], torch.Tensor]


def count_ops(model: torch.nn.Module, *inputs: Any, args: Any = None, kwargs: Mapping[str, Any] | None = None,
              backward: bool = False, meta: bool = False, loss_fn: LossFn | None = None, causal_half: bool = False,
              bytes_moved: bool = False, attention: str | None = None, warn_untracked: bool = True,
              **model_kwargs: Any) -> OpCount:
    """Count the MACs and FLOPs (ints, for the batch given) of ``model(*args, **kwargs)``.

    ``count_ops(model, x)``, ``count_ops(model, ids, kwargs={"attention_mask": mask})`` or
    ``count_ops(model, args=(ids,), kwargs={...})``: the model's inputs are the positional
    arguments after it (or ``args``) and ``kwargs``; every other keyword is one of our options
    (``deeplite_like.errors.model_inputs``; loose model keywords are deprecated).

    Every aten operator that runs is priced by its formula (``register_formula``) and
    attributed to the module call it ran in (``OpCount.by_module``, nested: a parent includes
    its children; ``""`` is the root; a container that is never called itself, such as an
    ``nn.ModuleList``, has the sum of its children's figures and ``calls`` 0), to its operator
    name (``by_operator``) and to the innermost module (``module_ops``). Operators with no formula that are not known to be free
    count 0, are listed in ``OpCount.untracked`` and are warned about once
    (``UntrackedOpWarning``) unless ``warn_untracked=False``.

    The model runs in the mode it is in (train/eval) and under the caller's grad mode. It is
    left exactly as found: mode, device, dtype, ``requires_grad``, hooks, parameter and buffer
    values in any mode (a train-mode batch norm's running statistics, an eval-mode counter, QAT
    observers and FakeQuantize scales are restored), tensors kept as plain module attributes,
    ``.grad``, and the random generators (a train-mode dropout draws numbers). Nothing is
    stored on the modules while counting: a copy or pickle the forward makes is a plain copy.

    Args:
        model: the module to run.
        *inputs, args, kwargs: its inputs, tensors nested in any containers.
        backward: also reduce the output to a scalar and run the backward pass; the ops that
            actually run are counted (``phases``: ``forward``, ``loss``, ``backward``).
        meta: run on the meta device (no memory allocated, no arithmetic done): parameters,
            buffers and tensor inputs are replaced by meta tensors of the same shape and dtype.
            Implied when the model already has meta tensors. The forward must not depend on
            tensor values (``.item()``, data-dependent branches).
        loss_fn: ``loss_fn(output) -> scalar tensor`` for ``backward``; by default the sum of
            every floating-point output that requires grad.
        causal_half: count causal attention as half of dense (``CountOptions.causal_half``).
        bytes_moved: also count the bytes each operator reads and writes (``OpCount.records``,
            ``OpStats.bytes``, ``OpCount.bytes`` / ``fused_bytes``; the convention:
            ``tensors.TrafficLog``, ``docs/conventions.rst``), for ``deeplite_like.roofline``.
        attention: on meta, the ``scaled_dot_product_attention`` kernel to count (``"cuda"``: flash,
            or memory-efficient with a mask; ``"cpu"``: the CPU's flash where it applies; ``"math"``;
            ``kernels.AttentionKernel``). ``None``: torch's choice for the tensors (the math path on
            meta in forward; the model's device's kernel in a meta backward). A real run takes the
            kernel its device picks, so ``attention`` needs ``meta``.
        warn_untracked: warn once about untracked operators.

    Raises:
        ForwardError: the forward raised; the message names the innermost module that failed,
            its type and the shapes it received (the original error is chained).
        BackwardError: the loss or the backward pass failed.
        FormulaError: a formula raised (chained inside the ``ForwardError``/``BackwardError``).
        ValueError: ``backward=True`` with nothing to differentiate.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"count_ops expects a torch.nn.Module, got {type(model).__name__}")
    backward, meta = check_flag(backward, "backward", "count_ops"), check_flag(meta, "meta", "count_ops")
    causal_half = check_flag(causal_half, "causal_half", "count_ops")
    bytes_moved = check_flag(bytes_moved, "bytes_moved", "count_ops")
    if attention not in ATTENTION_KERNELS:
        raise ValueError(f"count_ops(attention={attention!r}): expected one of {list(ATTENTION_KERNELS)}")
    warn_untracked = check_flag(warn_untracked, "warn_untracked", "count_ops")
    args, kwargs = model_inputs("count_ops", inputs, args, kwargs, model_kwargs)
    result = observe(model, args, kwargs, backward=backward, meta=meta, loss_fn=loss_fn,
                     options=CountOptions(causal_half=causal_half), bytes_moved=bytes_moved,
                     attention=attention).counts
    if warn_untracked:
        warn_if_untracked(result.untracked, stacklevel=2)
    return result


@dataclass
class Observation:
    """What one instrumented run of a model saw (``observe``).

    ``counts``: MACs/FLOPs per module, operator and phase (``count_ops``'s result). ``memory``:
    peak activation memory of the forward (``tensors.MemoryStats``), when asked. ``layers``:
    qualified name -> ``LayerFacts`` (shapes, output bytes) of each module's first call, when
    asked.
    """

    counts: OpCount
    memory: Any = None
    layers: dict[str, LayerFacts] | None = None


def observe(model: torch.nn.Module, args: tuple, kwargs: dict, *, backward: bool = False, meta: bool = False,
            loss_fn: LossFn | None = None, options: CountOptions | None = None, memory: bool = False,
            layers: bool = False, grad: bool | None = None, unfuse: bool = True,
            wrap_errors: bool = True, bytes_moved: bool = False, attention: str | None = None) -> Observation:
    """One instrumented run of ``model(*args, **kwargs)``: counts, and when asked peak memory and layer facts.

    Everything is read from the same pass, by the same module attribution (``CountingMode``'s
    global module hooks, ``recorder.py``): each operator is priced, its fresh output storages
    are added to the live bytes (``tensors.StorageLedger``), and each module's first call leaves
    its shapes. ``count_ops``, ``peak_activation_memory``, ``layerwise_summary`` and the
    profiler's default functions (which share one observation per ``compute_network_status``)
    are views of it.

    ``grad``: run the forward with grad enabled or not (``None``: the caller's mode; ``backward``
    enables it). ``unfuse``: turn the fused transformer fast path off so that its layers' inner
    work is seen (nested-tensor inputs keep it: only the fused kernels take them).
    ``wrap_errors``: a failing forward raises ``ForwardError`` naming the module (``False``: the
    model's own exception, with a note naming the module). ``bytes_moved``: log what each
    operator reads and writes (``tensors.TrafficLog``). ``attention``: the attention kernel counted
    on meta (``count_ops``).
    """
    modules = list(model.named_modules())
    slots = _tensor_slots(modules)
    on_meta = meta or any(tensor.is_meta for _, _, tensor, _, _ in slots)
    if on_meta and any(is_dtensor(tensor) for _, _, tensor, _, _ in slots):
        raise ValueError(f"count_ops(meta=True) cannot count {type(model).__name__}: it holds DTensor parameters "
                         "(tensor parallel or FSDP2), whose meta copies would lose their sharding and count the "
                         "unsharded model; count with meta=False inside each rank (docs/distributed.rst)")
    if attention is not None and not on_meta:
        raise ValueError(f"count_ops(attention={attention!r}) chooses the attention kernel counted on meta; a real "
                         "run takes the kernel its device picks: add meta=True, or leave attention out")
    if backward:
        _check_differentiable(model, args, kwargs, on_meta)
    mode = counting_mode(options or CountOptions(), track_backward=backward, meta=on_meta)
    mode.result.batch_size = first_tensor_batch(args, kwargs)
    if layers:
        mode.layers = {}
    if bytes_moved:
        mode.traffic = TrafficLog()
    stats = None
    # which inputs are non-leaves that require grad: the forward may write those in place (as plain torch allows)
    non_leaves = non_leaf_inputs(args, kwargs)
    input_leaves: list[torch.Tensor] = []

    with interrupt_guard(), model_lock(module for _, module in modules), \
            _RestoringStack() as cleanup:  # unwinds in reverse, uninterrupted: the mode exits first
        if backward:  # a backward pass needs autograd (and tensors made for it), also under inference_mode()
            cleanup.enter_context(torch.inference_mode(False))
        cleanup.enter_context(kept_random_state(model))
        cleanup.enter_context(kept_tensor_attributes([module for _, module in modules]))
        state: dict[str, torch.Tensor] = {}
        if on_meta:
            _refuse_nested_on_meta(args, kwargs)
            state, copies, args, kwargs = to_meta(model, args, kwargs, mode.values)
            cleanup.enter_context(swapped_tensors(model, copies))
            kernel = attention if attention is not None else _target_attention_kernel(slots) if backward else None
            if kernel is not None:  # attention's backward differs by kernel (the fused ones recompute Q.K^T)
                cleanup.enter_context(AttentionKernel(kernel))
        else:
            cleanup.enter_context(_restored_tensors(slots, mode))
        if backward:  # fresh leaves: backward stops at the inputs, the caller's tensors get no .grad
            args, kwargs, input_leaves = grad_inputs(args, kwargs, non_leaves)
            cleanup.enter_context(_preserved_grads(model))
        inputs = list(tensors_in((args, kwargs)))
        if memory:  # the inputs are live from the start; parameters, buffers and inputs are not activations
            external = {key for t in (*inputs, *(tensor for _, _, tensor, _, _ in slots), *state.values())
                        if (key := storage_key(t)) is not None}
            mode.ledger = StorageLedger(spanned_bytes(inputs), external, mode.module_running)
            cleanup.callback(mode.ledger.detach_all)
        cleanup.callback(mode.detach)
        # Nested inputs run only through the fused transformer kernels: keep them (they price per sequence).
        mode.attach(modules, unfuse=unfuse and not any(t.is_nested for t in inputs))
        if backward or grad is not None:
            cleanup.enter_context(torch.set_grad_enabled(True if backward else grad))
        cleanup.enter_context(mode)

        mode.set_phase("forward")
        if any(type(module).__name__ == "OptimizedModule" for _, module in modules):
            # torch.compile'd modules warn about global module hooks on every call: ours, for this count
            cleanup.enter_context(warnings.catch_warnings())
            warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
        output = _forward(model, args, kwargs, mode, on_meta, wrap_errors)
        if memory:
            stats = memory_stats(mode.ledger, output, on_meta, torch.is_grad_enabled(), mode.result.batch_size or 1)
            mode.ledger.detach_all()
            mode.ledger = None
        if backward:
            mode.set_phase("loss")
            loss = loss_of(output, loss_fn)
            mode.set_phase("backward")
            backward_pass(loss, [] if is_fully_sharded(model) else _leaves(model, state) + input_leaves)
        del output

    result = mode.finish()
    roll_up_containers(result.by_module, parent_names(name for name, _ in modules))
    return Observation(result, stats, mode.layers)


# -- phases ---------------------------------------------------------------------------------
def _forward(model: torch.nn.Module, args: tuple, kwargs: dict, mode: CountingMode, on_meta: bool,
             wrap_errors: bool = True) -> Any:
    try:
        return model(*args, **kwargs)  # (on meta the meta copies are in place: ``swapped_tensors``)
    except Exception as exc:
        error = _forward_error(model, exc, mode, on_meta)
        if wrap_errors:
            raise error from exc
        if hasattr(exc, "add_note"):  # the model's own exception, told where it happened
            exc.add_note(str(error))
        raise


def _forward_error(model: torch.nn.Module, exc: Exception, mode: CountingMode, on_meta: bool) -> ForwardError:
    """Name the innermost module the exception went through, with the inputs it received."""
    frame = mode.failed_frame(exc)
    what = f"{type(exc).__name__}: {exc}"
    hint = ("The forward ran on the meta device, where tensors have no values and some operators no kernel: "
            "a forward that reads values (.item(), data-dependent branches) or runs such an operator must be "
            "measured with real tensors: pass meta=False, with a model that is not on meta." if on_meta else
            f"{inputs_hint('count_ops')}.")
    hint += fixed_batch_hint(exc, mode.result.batch_size)
    if frame is None:
        return ForwardError(f"the forward pass of {type(model).__name__} failed outside any module call: "
                            f"{what}. {hint}")
    where = "the root module" if frame.name == "" else f"module {frame.name!r}"
    return ForwardError(f"the forward pass failed in {where} ({type(frame.module).__name__}) called with "
                        f"{describe_args(frame.args, frame.kwargs)}: {what}. {hint}")


def backward_pass(loss: torch.Tensor, leaves: list[torch.Tensor], failed: str = "the backward pass failed") -> None:
    # ``inputs=`` keeps the pass to the model's parameters and our own input leaves: it never
    # reaches into a graph the caller built (e.g. a loss_fn target that requires grad).
    # An FSDP2 model gets none: its graph's leaves are the unsharded parameters it gathered,
    # not the sharded ones it holds between steps (``tensors.is_fully_sharded``).
    # Reentrant checkpointing refuses ``inputs=`` (it runs a backward of its own inside): then the
    # whole graph runs, and the gradients it leaves on tensors not ours are put back as they were.
    foreign: list[tuple[torch.Tensor, Any]] = []
    try:
        if leaves and _has_reentrant_checkpoint(loss):
            ours = {id(t) for t in leaves}
            foreign = [(t, t.grad) for t in _graph_leaves(loss) if id(t) not in ours]
            leaves = []
        torch.autograd.backward(loss, inputs=leaves or None)
    except Exception as exc:
        raise BackwardError(f"{failed}: {type(exc).__name__}: {exc}") from exc
    finally:
        for tensor, grad in foreign:
            tensor.grad = grad


def _graph_nodes(loss: torch.Tensor) -> Iterator[Any]:
    """Every autograd node ``loss`` depends on (each once)."""
    seen: set[int] = set()
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(next_node for next_node, _ in node.next_functions)


def _has_reentrant_checkpoint(loss: torch.Tensor) -> bool:
    return any(node.name() == "CheckpointFunctionBackward" for node in _graph_nodes(loss))


def _graph_leaves(loss: torch.Tensor) -> list[torch.Tensor]:
    """The leaf tensors whose ``.grad`` a full backward of ``loss`` writes."""
    return [node.variable for node in _graph_nodes(loss) if hasattr(node, "variable")]


# -- preparing the run ----------------------------------------------------------------------
def _check_differentiable(model: torch.nn.Module, args: tuple, kwargs: dict, on_meta: bool = False) -> None:
    if not on_meta:  # (meta runs use fresh copies)
        made = next((name for name, p in model.named_parameters() if p.is_inference()), None)
        if made is not None:
            raise ValueError(f"backward=True: parameter '{made}' of {type(model).__name__} was made under "
                             "torch.inference_mode(), and autograd cannot differentiate through such tensors. Build "
                             "the model outside inference_mode (torch.no_grad() is fine), or count with meta=True")
    if any(p.requires_grad for p in model.parameters()):
        return
    if any(t.requires_grad for t in tensors_in((args, kwargs))):
        return
    raise ValueError(f"backward=True needs something to differentiate, but no input requires grad and "
                     f"{type(model).__name__} has no trainable parameter: pass an input with "
                     "requires_grad=True, or unfreeze parameters with requires_grad_(True)")


def _target_attention_kernel(slots: list[tuple[dict, str, torch.Tensor, bool, bool]]) -> str | None:
    """The attention kernel family a meta run prices, as the device the model's tensors came from picks it.

    On meta, torch runs attention's math path, whose backward keeps the probabilities; the CPU and
    CUDA pick fused kernels whose backward recomputes them (``formulas/attention.py``). So a meta
    count of a CPU model runs the CPU's choice and one of a CUDA model CUDA's
    (``kernels.AttentionKernel``), and equals the real count; a model already on meta has no
    device to follow and keeps torch's meta choice. Forward costs are the same for every kernel.
    """
    devices = {tensor.device.type for _, _, tensor, _, _ in slots}
    if devices == {"cpu"}:
        return "cpu"
    if devices == {"cuda"}:
        return "cuda"
    return None


def _refuse_nested_on_meta(args: tuple, kwargs: dict) -> None:
    """Nested tensors have no meta form (torch keeps their component sizes in a real tensor)."""
    for tensor in tensors_in((args, kwargs)):
        if tensor.is_nested:
            raise ValueError(f"count_ops(meta=True) got a nested tensor input ({describe_args((tensor,), {})[1:-1]}): "
                             "torch has no meta nested tensors. Count on real tensors (meta=False, a model "
                             "not on the meta device), or pass the padded dense tensor instead")


def _tensor_slots(modules: list[tuple[str, torch.nn.Module]]) -> list[tuple[dict, str, torch.Tensor, bool, bool]]:
    """``(module._parameters or ._buffers, name, tensor, is_buffer, module.training)`` for every model tensor."""
    return [(table, name, tensor, is_buffer, module.training) for _, module in modules
            for table, is_buffer in ((module._parameters, False), (module._buffers, True))
            for name, tensor in table.items() if tensor is not None]


def to_meta(model: torch.nn.Module, args: tuple, kwargs: dict,
            values: MetaValues | None) -> tuple[dict[str, torch.Tensor], dict[int, torch.Tensor], tuple, dict]:
    """What a run on the meta device needs, in one pass over the model's tensors.

    Returns ``(state, copies, args, kwargs)``: meta copies of the parameters and buffers not on
    meta already, by qualified name (tied tensors once: ``named_parameters`` drops duplicates)
    and by the identity of their originals (``state.swapped_tensors`` puts the one copy in every
    owner's slot); and the inputs as meta tensors. With ``values``, the meta inputs and buffers get
    the values of their real originals (small integer ones only, ``meta.MetaValues``).
    """
    state: dict[str, torch.Tensor] = {}
    copies: dict[int, torch.Tensor] = {}
    for is_buffer, named in ((False, model.named_parameters()), (True, model.named_buffers())):
        for name, tensor in named:
            if not tensor.is_meta:
                copy = state[name] = copies[id(tensor)] = meta_like(tensor)
                if is_buffer and values is not None:
                    values.seed(copy, tensor)
    real = pytree.tree_leaves((args, kwargs))
    args, kwargs = pytree.tree_map_only(torch.Tensor, meta_like, (args, kwargs))
    if values is not None:
        for before, after in zip(real, pytree.tree_leaves((args, kwargs))):
            if isinstance(before, torch.Tensor):
                values.seed(after, before)
    return state, copies, args, kwargs


def _leaves(model: torch.nn.Module, state: dict) -> list[torch.Tensor]:
    """What backward differentiates in the model: the run's trainable parameters."""
    params = [state.get(name, p) for name, p in model.named_parameters()]
    return [p for p in params if p.requires_grad]


def non_leaf_inputs(args: tuple, kwargs: dict) -> list[bool]:
    """For each leaf of ``(args, kwargs)``: whether it is a non-leaf tensor that requires grad (``grad_inputs``)."""
    return [isinstance(t, torch.Tensor) and t.requires_grad and not t.is_leaf for t in pytree.tree_leaves((args, kwargs))]


def grad_inputs(args: tuple, kwargs: dict, non_leaves: list[bool]) -> tuple[tuple, dict, list[torch.Tensor]]:
    """The inputs that require grad as fresh autograd leaves of ours (backward stops there, the
    caller's tensors get no ``.grad``), and those leaves.

    An input the caller gave as a non-leaf (``x.clone()`` of a tensor that requires grad) is passed
    as a non-leaf again, a copy of the fresh leaf: the forward may write it in place, as plain torch
    allows, where an in-place write to a leaf that requires grad raises.
    """
    flat, spec = pytree.tree_flatten((args, kwargs))
    leaves: list[torch.Tensor] = []
    for i, value in enumerate(flat):
        if isinstance(value, torch.Tensor) and value.is_inference():  # (made under inference_mode: cannot
            with torch.inference_mode(False):                          # be saved for backward)
                flat[i] = value = value.clone()
        if isinstance(value, torch.Tensor) and value.requires_grad:
            leaf = value.detach().requires_grad_(True)
            leaves.append(leaf)
            flat[i] = leaf.clone() if non_leaves[i] else leaf
    args, kwargs = pytree.tree_unflatten(flat, spec)
    return args, kwargs, leaves


# -- leaving the model as found -------------------------------------------------------------
@contextlib.contextmanager
@protected
def _preserved_grads(model: torch.nn.Module) -> Iterator[None]:
    """Start from ``.grad = None`` (so backward only assigns, never accumulates) and restore it."""
    saved = [(p, p.grad) for p in model.parameters()]
    try:
        for p, _ in saved:
            p.grad = None
        checkpoint()  # (an interrupt held during the set-up is raised here)
        yield
    finally:
        with uninterruptible():
            for p, grad in saved:
                p.grad = grad


@contextlib.contextmanager
@protected
def _restored_tensors(slots: list[tuple[dict, str, torch.Tensor, bool, bool]], mode: CountingMode) -> Iterator[None]:
    """Put back parameters and buffers the forward replaced or changed in place.

    Buffers are copied up front and always written back, in any mode: batch norm updates its
    running statistics in a kernel whose schema does not declare the write
    (``native_batch_norm``) and without bumping the version counter, so no cheaper test sees
    it, and QAT observers and counters write buffers in eval mode too. Buffers are small next
    to a forward. Parameters, which a forward rarely writes and which are large, are copied
    only when an op declared to write them is about to run (``CountingMode.watch``).
    """
    with torch.no_grad():
        buffers = {id(tensor): (tensor, tensor.clone()) for _, _, tensor, is_buffer, _ in slots
                   if is_buffer and not tensor.is_inference()}
    mode.watch([tensor for _, _, tensor, is_buffer, _ in slots if not is_buffer])
    try:
        checkpoint()  # (an interrupt held during the set-up is raised here)
        yield
    finally:
        with uninterruptible(), torch.no_grad():
            restore_all(lambda: restore_each(slots, _put_slot_back), mode.restore_mutated,
                        lambda: restore_each(buffers.values(), lambda entry: entry[0].copy_(entry[1])))


@protected
def _put_slot_back(slot: tuple[dict, str, torch.Tensor, bool, bool]) -> None:
    table, name, tensor, _, _ = slot
    if isinstance(table, dict) and table.get(name) is not tensor:  # (a ScriptModule's is not a dict)
        table[name] = tensor


class _RestoringStack(contextlib.ExitStack):
    """An ``ExitStack`` whose setting up and unwinding (the restore of the model) each run to their end
    whatever interrupts them: a context entered is always registered for its exit (a dispatch mode
    pushed is always popped), and every exit runs."""

    @protected
    def enter_context(self, cm: Any) -> Any:
        with uninterruptible():  # (its exit raises an interrupt held meanwhile, once the exit is registered)
            return super().enter_context(cm)

    @protected
    def __exit__(self, *exc_info: Any) -> bool:
        with uninterruptible():
            return super().__exit__(*exc_info)


def warn_if_untracked(untracked: Mapping[str, int], stacklevel: int = 1) -> None:
    """Warn once (``UntrackedOpWarning``) about operators that ran with no formula, if any.

    ``stacklevel`` as ``warnings.warn``'s, counted from the caller of this function.
    """
    if not untracked:
        return
    listing = ", ".join(f"{name} ({calls} call{'s' if calls != 1 else ''})"
                        for name, calls in sorted(untracked.items(), key=lambda kv: (-kv[1], kv[0])))
    warnings.warn(f"{len(untracked)} operator(s) ran with no FLOP formula and were counted as 0: {listing}. "
                  "Register a formula with deeplite_like.backends.torch.counting.register_formula, or mark the "
                  "op as free of arithmetic with register_free.", UntrackedOpWarning, stacklevel=stacklevel + 1)
