"""Values of the small integer and boolean tensors of a meta run, so value-dependent control flow works.

A meta tensor has a shape and a dtype but no values, so a forward that reads one
(``.item()``, ``bool(t)``, ``if mask.all():``, ``torch.nonzero``) cannot run on meta. Real
models do this, and almost always on *index* tensors that do not depend on the weights at all:
transformers 5's decoders decide whether a batch holds packed sequences from the position ids
(``find_packed_sequence_indices``: ``(mask[:, -1] == 0).all()``), others check an attention mask
for padding or build indices with ``nonzero``.

``MetaValues`` keeps, beside each such meta tensor, a CPU twin holding its real values: the
model's own integer inputs and buffers seed it, and every op whose outputs are integer or
boolean and whose tensor arguments all have values (factory ops such as ``arange`` have none to
need) is run a second time on the twins. Views of twins are views and in-place ops write the
twins, so aliasing behaves as in a real run. A floating-point tensor gets a twin only when it is
built from constants (``torch.ones``/``full``/``zeros`` then masked with integer or boolean
tensors that have twins: BART's default causal mask, DETR's pixel mask); the model's float
inputs, buffers and weights never have one, so nothing computed from them does (that would be the
real computation meta avoids). Tensors over ``MAX_ELEMENTS`` elements get none. When a read
needs a value that no twin holds (it depends on the weights or on float data), the error names
the op and the module, and says to count with real tensors.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree
from torch.utils.weak import WeakTensorKeyDictionary

from .meta_shapes import meta_output
from .op_facts import holds_tensors

__all__ = ["MAX_ELEMENTS", "MetaValueError", "MetaValues"]

#: Tensors with more elements get no twin (int64: 32 MiB): index tensors are far smaller.
MAX_ELEMENTS = 1 << 22

_META = torch.device("meta")
_CPU = torch.device("cpu")
_MISSING = object()


class MetaValueError(RuntimeError):
    """A meta run read a value that only a run on real tensors has."""


_LIFTS = (torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default)


def _is_factory(func: Any) -> bool:
    """Whether ``func`` makes tensors from nothing: a ``device`` argument, and no tensor argument."""
    schema = getattr(func, "_schema", None)
    arguments = schema.arguments if schema is not None else ()
    return any(arg.name == "device" for arg in arguments) and not any(holds_tensors(arg) for arg in arguments)


def _seeds_values(tensor: torch.Tensor) -> bool:
    """Whether a real input or buffer gives its meta copy a twin: small integer and boolean ones only."""
    return not (tensor.dtype.is_floating_point or tensor.dtype.is_complex) and tensor.numel() <= MAX_ELEMENTS


def _has_values(tensor: torch.Tensor) -> bool:
    """Whether a twin is kept for an op's output: any small tensor (a float one only gets one when every
    tensor it was computed from has one, i.e. it was built from constants: never from weights or inputs)."""
    return tensor.numel() <= MAX_ELEMENTS


class MetaValues:
    """CPU twins of the small integer/boolean meta tensors of one counting run.

    ``seed(meta, real)`` gives a meta tensor its values (the model's inputs and buffers);
    ``wrap(func, written, run)`` returns the callable the counting mode runs ``func`` with:
    it runs the meta kernel, keeps the twins up to date, and answers the reads a meta kernel
    cannot (``_local_scalar_dense``, ``nonzero``, ...) from them. ``where()`` names the module
    for errors. ``placeholder_reads``: a scalar read that no twin answers gets 1 of its type
    instead of an error (the training step's optimizer, ``training_step.py``). ``made_on_meta``:
    tensors made from nothing land on meta (``wrap``); the training step keeps them where torch
    puts them (an optimizer's step counters live on the host).
    """

    def __init__(self, where: Callable[[], str]) -> None:
        self._twins = WeakTensorKeyDictionary()
        self._where = where
        self.placeholder_reads = False
        self.made_on_meta = True

    def seed(self, meta: torch.Tensor, real: torch.Tensor) -> None:
        """Give the meta tensor ``meta`` the values of ``real`` (only for a small integer/boolean one)."""
        if meta.is_meta and not real.is_meta and _seeds_values(real) and real.shape == meta.shape:
            self._twins[meta] = real.detach().to(_CPU, copy=True)  # a copy: in-place ops write the twin

    def wrap(self, func: Any, name: str, written: tuple, run: Callable) -> Callable:
        """``run`` with twins kept: what the counting mode calls for ``func`` on meta.

        Tensors the forward makes from nothing land on meta too, as under ``torch.device("meta")``
        but without that function mode's cost on every torch call (7-14 % of a meta count of
        MobileNetV3-Large or ResNet-50): a factory (``zeros``, ``arange``, ``empty``: a ``device`` argument and
        no tensor argument) asked for the CPU makes a meta tensor, and ``torch.tensor(data)``'s
        ``lift_fresh`` gives a meta tensor whose twin holds the data.
        """
        if func in _LIFTS and self.made_on_meta:
            return self._lift_to_meta
        tracked = self._tracked(func, name, written, run)
        if not (self.made_on_meta and _is_factory(func)):
            return tracked

        def make_on_meta(*args: Any, **kwargs: Any) -> Any:
            device = kwargs.get("device")
            if device is None or device.type == "cpu":
                kwargs = {**kwargs, "device": _META}
            return tracked(*args, **kwargs)

        return make_on_meta

    def _lift_to_meta(self, tensor: torch.Tensor) -> torch.Tensor:
        """``lift_fresh`` of the tensor ``torch.tensor(data)`` made on the CPU: a meta copy with its values."""
        if tensor.is_meta:
            return tensor
        meta = torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device=_META)
        self.seed(meta, tensor)
        return meta

    def _tracked(self, func: Any, name: str, written: tuple, run: Callable) -> Callable:
        def run_tracked(*args: Any, **kwargs: Any) -> Any:
            try:
                out = run(*args, **kwargs)
            except (NotImplementedError, RuntimeError) as exc:
                out = meta_output(func, args, kwargs)  # a meta kernel stricter than the real ones
                if out is not None:
                    return out
                # A meta kernel that needs values (.item(), nonzero, masked_select, unique): run on the twins.
                return self._from_twins(func, name, args, kwargs, exc)
            if self._wanted(out) or written:
                self._follow(func, written, args, kwargs, out)
            return out

        return run_tracked

    # -- keeping twins --------------------------------------------------------------------------
    @staticmethod
    def _wanted(out: Any) -> bool:
        if isinstance(out, torch.Tensor):
            return out.is_meta and _has_values(out)
        if isinstance(out, (tuple, list)):
            return any(isinstance(t, torch.Tensor) and t.is_meta and _has_values(t) for t in out)
        return False

    def _value_of(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if not value.is_meta:
                return value
            return self._twins.get(value, _MISSING)
        if isinstance(value, torch.device) and value == _META:
            return _CPU
        return value

    def _on_twins(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """``func`` run on the twins of its arguments, or ``_MISSING`` when one has none."""
        missing = False

        def value(leaf: Any) -> Any:
            nonlocal missing
            result = self._value_of(leaf)
            if result is _MISSING:
                missing = True
            return result

        twin_args, twin_kwargs = pytree.tree_map(value, (args, kwargs))
        if missing:
            return _MISSING
        if twin_kwargs.get("device") == _META:
            twin_kwargs["device"] = _CPU
        return func(*twin_args, **twin_kwargs)

    def _follow(self, func: Any, written: tuple, args: tuple, kwargs: dict, out: Any) -> None:
        """Run ``func`` on the twins and pair its results with the meta outputs."""
        values = self._on_twins(func, args, kwargs)
        if values is _MISSING:
            for index, arg_name in written:  # a written tensor's twin no longer holds its values
                target = args[index] if index < len(args) else kwargs.get(arg_name)
                if isinstance(target, torch.Tensor):
                    self._twins.pop(target, None)
            return
        outs = out if isinstance(out, (tuple, list)) else (out,)
        twins = values if isinstance(values, (tuple, list)) else (values,)
        for meta, twin in zip(outs, twins):
            if (isinstance(meta, torch.Tensor) and meta.is_meta and isinstance(twin, torch.Tensor)
                    and twin.shape == meta.shape and _has_values(meta)):
                self._twins[meta] = twin

    # -- reads a meta kernel cannot answer --------------------------------------------------------
    def _from_twins(self, func: Any, name: str, args: tuple, kwargs: dict, exc: BaseException) -> Any:
        values = self._on_twins(func, args, kwargs)
        if values is _MISSING and self.placeholder_reads and func is torch.ops.aten._local_scalar_dense.default:
            dtype = args[0].dtype
            return True if dtype == torch.bool else 1.0 if dtype.is_floating_point or dtype.is_complex else 1
        if values is _MISSING:
            raise MetaValueError(
                f"counting on the meta device: {name} in {self._where()} needs tensor values (such as .item(), "
                "bool(tensor), nonzero or a data-dependent shape), and they depend on the weights or on "
                "floating-point data, which meta tensors do not have (only small integer and boolean tensors "
                "derived from the inputs carry values on meta). Count with real tensors: meta=False and a "
                f"model that is not on the meta device. (torch: {str(exc).splitlines()[0] if str(exc) else exc!r})"
            ) from exc
        if not isinstance(values, (torch.Tensor, tuple, list)):
            return values  # a Python scalar (.item())
        twins = values if isinstance(values, (tuple, list)) else (values,)
        metas = []
        for twin in twins:
            if isinstance(twin, torch.Tensor):
                meta = torch.empty_strided(twin.shape, twin.stride(), dtype=twin.dtype, device=_META)
                if _has_values(twin):
                    self._twins[meta] = twin
                metas.append(meta)
            else:
                metas.append(twin)
        return type(values)(metas) if isinstance(values, (tuple, list)) else metas[0]
