"""Leave the user's model as it was found: snapshot and restore its mutable state.

``preserved_model_state(model)`` is the one place where measuring code promises not to alter
a model; its docstring lists everything it restores and how.
"""
from __future__ import annotations

import contextlib
import random
import sys
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _module_globals

from deeplite_like.safety import (checkpoint, interrupt_guard, model_lock, protected, restore_all,
                                  restore_each, uninterruptible)

__all__ = ["add_global_module_hooks", "kept_random_state", "kept_tensor_attributes", "model_device",
           "preserved_model_state", "remove_global_module_hooks", "tensor_attributes"]

# Attribute names of the per-module hook dicts (those missing in this torch version are skipped).
_MODULE_HOOK_DICTS = (
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)

#: Parameters with at most this many elements are copied on entry and written back when the body wrote
#: them in place (a forward that keeps a running statistic as a parameter): 256 KiB of fp32 each.
SMALL_PARAMETER = 1 << 16

# Hook dicts that live on a tensor (``Tensor.register_hook`` / ``register_post_accumulate_grad_hook``).
_TENSOR_HOOK_ATTRS = ("_backward_hooks", "_post_accumulate_grad_hooks")


@protected
def add_global_module_hooks(pre: Any, post: Any) -> list:
    """Register ``pre`` / ``post`` as global module forward hooks (``post`` with kwargs, always called).

    Remove them with ``remove_global_module_hooks``: torch's own handle forgets the ``with_kwargs``
    entry it made, which would make every compiled module warn about global hooks from then on.
    """
    return [_module_globals.register_module_forward_pre_hook(pre),
            _module_globals.register_module_forward_hook(post, with_kwargs=True, always_call=True)]


@protected
def remove_global_module_hooks(handles: list) -> None:
    """Remove hooks made by ``add_global_module_hooks`` (popped from ``handles``: safe to call twice)."""
    with uninterruptible():
        while handles:
            handle = handles[-1]
            handle.remove()
            _module_globals._global_forward_hooks_with_kwargs.pop(handle.id, None)
            handles.pop()


@dataclass
class _ModuleSnapshot:
    module: nn.Module
    training: bool
    tables: dict[str, dict[str, Any]]  # "_parameters", "_buffers", "_modules" -> a copy of that dict
    hooks: list[tuple[dict, dict]]  # (hook dict, a copy of it)


@dataclass
class _TensorSnapshot:
    tensor: torch.Tensor
    data: torch.Tensor
    requires_grad: bool
    grad: torch.Tensor | None
    hooks: dict[str, dict | None]
    values: torch.Tensor | None = None
    version: int = 0  # the tensor's version counter: an in-place write bumps it


def _snapshot_hook_dicts(owner: Any, names: tuple[str, ...]) -> list[tuple[dict, dict]]:
    """``(hook dict, a copy of it)`` for each of ``names`` that ``owner`` has."""
    found = (getattr(owner, name, None) for name in names)
    return [(hooks, dict(hooks)) for hooks in found if isinstance(hooks, dict)]


def _restore_dict(current: dict, saved: dict) -> None:
    """Make ``current`` hold what ``saved`` holds, in place (hook handles and modules refer to the dict object)."""
    if current.keys() != saved.keys() or any(current[k] is not v for k, v in saved.items()):
        current.clear()
        current.update(saved)


@protected
def _restore_table(current: Any, saved: dict) -> None:
    """Put back a module's parameter/buffer/submodule table: a dict in place; a ScriptModule's
    C++-backed view entry by entry (it writes through to the C++ module; entries cannot be removed)."""
    if isinstance(current, dict):
        _restore_dict(current, saved)
        return
    for name, value in saved.items():
        if name in current and current[name] is not value:
            current[name] = value


def _snapshot_module(module: nn.Module) -> _ModuleSnapshot:
    tables = {attr: dict(getattr(module, attr)) for attr in ("_parameters", "_buffers", "_modules")}
    return _ModuleSnapshot(module, module.training, tables, _snapshot_hook_dicts(module, _MODULE_HOOK_DICTS))


def _snapshot_tensor(tensor: torch.Tensor, is_parameter: bool, copy_values: bool) -> _TensorSnapshot:
    hooks = {}
    for name in _TENSOR_HOOK_ATTRS:
        value = getattr(tensor, name, None)
        hooks[name] = dict(value) if isinstance(value, dict) else None
    values = None
    if is_parameter:  # small ones (running statistics kept as parameters, biases, norms) are copied
        copy_values = tensor.numel() <= SMALL_PARAMETER
    if copy_values and tensor.device.type != "meta" and not tensor.is_inference():
        values = tensor.detach().clone()
    return _TensorSnapshot(
        tensor=tensor,
        data=tensor.data,
        requires_grad=tensor.requires_grad,
        grad=tensor.grad if is_parameter else None,
        hooks=hooks,
        values=values,
        version=tensor._version,
    )


@protected
def _restore_tensor(snap: _TensorSnapshot, is_parameter: bool) -> None:
    tensor = snap.tensor
    written = tensor._version != snap.version
    # Re-point the tensor at the storage, device and dtype it had (undoes .to()/.half()).
    tensor.data = snap.data
    if snap.values is not None and (written or not is_parameter):
        with torch.no_grad():
            tensor.data.copy_(snap.values)
    elif written and is_parameter and snap.values is None:
        warnings.warn(f"a parameter of shape {tuple(tensor.shape)} was written in place while the model was "
                      "measured (by its forward) and is too large to have been copied: its value changed",
                      RuntimeWarning, stacklevel=4)
    if tensor.requires_grad != snap.requires_grad:
        tensor.requires_grad_(snap.requires_grad)
    if is_parameter:
        tensor.grad = snap.grad
    for name, saved in snap.hooks.items():
        current = getattr(tensor, name, None)
        if isinstance(current, dict):
            _restore_dict(current, saved or {})


class _TensorTypes(dict):
    """type -> whether it is a ``torch.Tensor`` subclass, filled on first look-up (``_IS_TENSOR[type(v)]``)."""

    def __missing__(self, cls: type) -> bool:
        known = self[cls] = issubclass(cls, torch.Tensor)
        return known


_IS_TENSOR = _TensorTypes()  # a look-up per attribute, in C: cheaper than isinstance(v, torch.Tensor) in Python


def _has_tensor_attribute(module: nn.Module) -> bool:
    return any(map(_IS_TENSOR.__getitem__, map(type, module.__dict__.values())))


def tensor_attributes(module: nn.Module) -> dict[str, torch.Tensor]:
    """The tensors ``module`` keeps as plain attributes (not parameters, not registered buffers), by name."""
    if not _has_tensor_attribute(module):
        return {}
    return {name: value for name, value in module.__dict__.items() if _IS_TENSOR[type(value)]}


@contextlib.contextmanager
@protected
def kept_tensor_attributes(modules: Iterable[nn.Module]) -> Iterator[None]:
    """Restore the tensors the modules keep as plain attributes: which tensor each name holds, and its values.

    An attribute rebound in the body is bound again to its tensor, one added is removed, one
    deleted is put back; the values of each tensor are copied on entry and written back (not
    for inference tensors, which cannot be written outside ``torch.inference_mode``, nor meta).
    """
    saved = [(module, tensor_attributes(module)) for module in modules]
    values: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    with torch.no_grad():
        for _, attributes in saved:
            for tensor in attributes.values():
                if id(tensor) not in values and not tensor.is_meta and not tensor.is_inference():
                    values[id(tensor)] = (tensor, tensor.detach().clone())
    def write_back(entry: tuple[torch.Tensor, torch.Tensor]) -> None:
        tensor, before = entry
        if tensor.shape == before.shape and tensor.dtype == before.dtype:
            tensor.copy_(before)

    try:
        checkpoint()  # (an interrupt held during the set-up is raised here)
        yield
    finally:
        with uninterruptible(), torch.no_grad():
            restore_all(lambda: restore_each([(m, a) for m, a in saved if a or _has_tensor_attribute(m)],
                                             lambda entry: _restore_tensor_attributes(*entry)),
                        lambda: restore_each(values.values(), write_back))


def _restore_tensor_attributes(module: nn.Module, attributes: dict[str, torch.Tensor]) -> None:
    state = module.__dict__
    for name in [n for n, v in state.items() if _IS_TENSOR[type(v)] and n not in attributes]:
        del state[name]
    for name, tensor in attributes.items():
        if state.get(name) is not tensor:
            state[name] = tensor


@contextlib.contextmanager
@protected
def kept_random_state(model: nn.Module | None = None) -> Iterator[None]:
    """Leave the CPU random generator and every initialised CUDA device's as found; for a model in
    training mode (or no model given) also Python's ``random`` and NumPy's global generator.

    What ``torch.random.fork_rng`` does, without its look-ups of the model's devices (which cost
    as much as a small model's forward): a model on CUDA has initialised CUDA, and then every
    device's generator is kept. ``model``: whose training flag decides the Python and NumPy generators.
    """
    cpu_state = torch.get_rng_state()
    cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    # A training forward may also draw with ``random`` / ``numpy.random`` (layer drop, SpecAugment's masks):
    # kept for a model in training mode (NumPy's state costs ~0.3 ms to read and write back)
    python_state = numpy_state = numpy = None
    if model is None or model.training:
        python_state = random.getstate()
        numpy = sys.modules.get("numpy")
        numpy_state = numpy.random.get_state() if numpy is not None else None
    try:
        checkpoint()  # (an interrupt held during the set-up is raised here)
        yield
    finally:
        with uninterruptible():
            torch.set_rng_state(cpu_state)
            if cuda_states is not None:
                torch.cuda.set_rng_state_all(cuda_states)
            if python_state is not None:
                random.setstate(python_state)
            if numpy_state is not None:
                numpy.random.set_state(numpy_state)


@contextlib.contextmanager
@protected
def swapped_tensors(model: nn.Module, copies: dict[int, torch.Tensor]) -> Iterator[None]:
    """Run the body with ``copies[id(original)]`` in every parameter and buffer slot holding an original.

    Every owner of a tied tensor gets the same copy, as ``functional_call(tie_weights=True)`` does;
    the originals are put back on exit. Cheaper than ``torch.func.functional_call`` (no map of
    every tensor to untie and tie again at each call), and it holds for the whole body (a forward
    re-run in backward by checkpointing finds the copies too). TorchScript modules take it too
    (their tables write through to the C++ module), where ``functional_call`` refuses them.
    """
    saved = [(table, name, tensor) for module in model.modules()
             for table in (module._parameters, module._buffers)
             for name, tensor in table.items() if tensor is not None and id(tensor) in copies]
    try:
        for table, name, tensor in saved:
            table[name] = copies[id(tensor)]
        checkpoint()  # (an interrupt held during the set-up is raised here)
        yield
    finally:
        with uninterruptible():
            restore_each(saved, _put_back)


@protected
def _put_back(entry: tuple[Any, str, torch.Tensor]) -> None:
    table, name, tensor = entry
    table[name] = tensor


@contextlib.contextmanager
@protected
def preserved_model_state(model: nn.Module, restore_buffer_values: bool = True) -> Iterator[nn.Module]:
    """Snapshot ``model``'s mutable state, yield the model, and restore that state on exit.

    Restored (also when the body raises): every module's ``training`` flag; each module's
    parameter, buffer and submodule dicts; each parameter's and buffer's device, dtype and
    storage; ``requires_grad``; every hook dict (module, parameter tensor); the
    values of every buffer, in any mode (costs one copy of the buffers;
    ``restore_buffer_values=False`` skips it); the tensors kept as plain module attributes
    (``kept_tensor_attributes``); the random generators (``kept_random_state``). Parameter
    ``.grad``s are set to ``None`` for the duration of the body and put back on exit.

    Parameter values written in place (a forward that keeps a running statistic as a parameter):
    parameters of up to ``SMALL_PARAMETER`` elements are copied on entry and written back if their
    version counter moved; a larger one written in place is warned about (an optimizer step on the
    model itself - a measurement must not do that).

    Safe against Ctrl-C and threads (``deeplite_like.safety``): the restore runs to its end
    whatever interrupts it (the interrupt is raised after), one failing step does not skip the
    others, and two threads measuring the same model take turns.

    Everything a measurement may touch is snapshotted on entry and put back in
    ``finally`` (also when the body raises):

    * the ``training`` flag of every module (restored flag by flag, not with ``.train()``, so a
      model whose submodules were in mixed modes keeps that mix);
    * the module tree itself: each module's ``_parameters``, ``_buffers`` and ``_modules`` dicts
      (a parameter or submodule replaced in the body is put back);
    * each parameter's and buffer's data: device, dtype and storage (``p.data`` is re-pointed at
      the tensor it had, so ``model.to(...)`` / ``.half()`` inside the body is undone at no copy
      cost);
    * the values of every buffer, in any mode: copied on entry and written back on exit. A forward
      writes buffers in eval mode too (a counter, a cache, QAT observers and FakeQuantize
      ``scale``/``zero_point``, whose ``observer_enabled`` does not follow ``.eval()``), and batch
      norm updates its running statistics in train mode. Buffers are small next to a forward: the
      copy costs little (``restore_buffer_values=False`` skips it);
    * tensors kept as plain attributes of a module (``self.cache = torch.zeros(...)``, not
      registered as buffers): which tensor each attribute holds (one added by the body is removed)
      and its values;
    * ``requires_grad`` of every parameter;
    * ``.grad`` of every parameter: it is *set aside* (the body sees ``None``) and put back on
      exit, so a backward run inside the body neither reads nor accumulates into the user's
      gradients;
    * every hook dict: each module's forward/backward/state-dict hook dicts and the tensor hooks of
      parameters. Hook dicts are restored in place (cleared and refilled), because hook handles
      refer to the dict object. torch's *global* module hooks are not snapshotted: they are shared
      by every thread (restoring a snapshot would bring back another thread's removed hooks), and
      each of ours is removed by its owner in ``finally`` (``remove_global_module_hooks``);
    * the random generators: CPU, and CUDA on the devices the model is on (a dropout in train mode,
      ``torch.rand`` in a forward draw numbers), with ``torch.random.fork_rng``.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"preserved_model_state expects a torch.nn.Module, got {type(model).__name__}")
    modules = list(model.modules())
    with interrupt_guard(), model_lock(modules):  # Ctrl-C never half-restores; one thread at a time
        module_snaps = [_snapshot_module(m) for m in modules]
        param_snaps = [_snapshot_tensor(p, True, False) for p in model.parameters()]
        buffer_snaps = [_snapshot_tensor(b, False, restore_buffer_values) for b in model.buffers()]
        for p in model.parameters():
            p.grad = None
        try:
            with kept_random_state(model), kept_tensor_attributes(modules):
                checkpoint()  # (an interrupt held during the set-up is raised here)
                yield model
        finally:
            with uninterruptible(), torch.no_grad():
                # Module tree first, so that parameters and buffers below are found where they were.
                restore_all(lambda: restore_each(module_snaps, _restore_module),
                            lambda: restore_each(param_snaps, lambda snap: _restore_tensor(snap, True)),
                            lambda: restore_each(buffer_snaps, lambda snap: _restore_tensor(snap, False)))


@protected
def _restore_module(snap: _ModuleSnapshot) -> None:
    for attr, saved in snap.tables.items():
        _restore_table(getattr(snap.module, attr), saved)
    snap.module.training = snap.training
    for hooks, saved in snap.hooks:
        _restore_dict(hooks, saved)


def model_device(model: nn.Module) -> torch.device:
    """The device holding ``model``'s parameters and buffers (``cpu`` for a model with none).

    Raises ``ValueError`` naming one tensor per device when the model is spread over several
    devices (model parallel): a caller must then say which device it means.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model_device expects a torch.nn.Module, got {type(model).__name__}")
    seen: dict[torch.device, str] = {}
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, tensor in named:
            seen.setdefault(tensor.device, f"{kind} '{name}'")
    if not seen:
        return torch.device("cpu")
    if len(seen) > 1:
        where = ", ".join(f"{dev} ({name})" for dev, name in seen.items())
        raise ValueError(
            f"{type(model).__name__} has tensors on several devices: {where}. "
            "Move the model to one device, or pass the device to use explicitly."
        )
    return next(iter(seen))
