"""What a count on the meta device needs beyond torch's meta kernels: output shapes, values, replays.

On meta, tensors have shapes and dtypes but no values and no memory, so models too large for the
machine can be counted. Three gaps are closed here.

Output shapes (``meta_output``) for ops whose meta kernel refuses what their real kernels accept,
and output storages (``device_storage``) for ops whose real kernels leave the output in a larger one.

Values (``MetaValues``) of the small integer and boolean tensors of a meta run, so value-dependent
control flow works.

Replays (``MetaOutputs``): the outputs of repeated ops are replayed instead of running their
(often Python) meta kernels again.

Each class and function below says how it closes its gap.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree
from torch.utils.weak import WeakTensorKeyDictionary

from deeplite_like.backends.torch.counting.registry import NEW, POINTWISE_IN_PLACE, holds_tensors

__all__ = ["MAX_ELEMENTS", "MetaOutputs", "MetaValueError", "MetaValues", "meta_output"]


# -- output shapes --------------------------------------------------------------------------------
aten = torch.ops.aten


def _grouped_mm(self: torch.Tensor, mat2: torch.Tensor, offs: torch.Tensor | None = None, *rest: Any,
                out_dtype: torch.dtype | None = None, **_: Any) -> torch.Tensor:
    """(M, K) x (G, K, N) -> (M, N); (G, M, K) x (G, K, N) -> (G, M, N); (M, K) x (K, N), K split
    -> (G, M, N); (G, M, K) x (K, N), N split -> (M, N)."""
    if self.dim() == 2 and mat2.dim() == 3:
        size = (self.shape[0], mat2.shape[2])
    elif self.dim() == 3 and mat2.dim() == 3:
        size = (self.shape[0], self.shape[1], mat2.shape[2])
    elif self.dim() == 2:
        size = (offs.shape[0], self.shape[0], mat2.shape[1])
    else:
        size = (self.shape[1], mat2.shape[1])
    return torch.empty(size, dtype=out_dtype or self.dtype, device="meta")


def _scaled_grouped_mm(self: torch.Tensor, mat2: torch.Tensor, scale_a: Any, scale_b: Any,
                       offs: torch.Tensor | None = None, bias: Any = None, scale_result: Any = None,
                       out_dtype: torch.dtype | None = None, **_: Any) -> torch.Tensor:
    return _grouped_mm(self, mat2, offs, out_dtype=out_dtype or torch.bfloat16)


def _like_second(grad_output: torch.Tensor, like: torch.Tensor, *_: Any, **__: Any) -> torch.Tensor:
    """A gradient shaped as the forward's input (its second argument), contiguous, as the CPU kernel makes it."""
    return torch.empty(like.shape, dtype=like.dtype, device="meta")


#: Rules by operator. ``_grouped_mm``: see ``meta_output``. The others have a CPU kernel and no meta
#: kernel at all in torch 2.13 (``_dispatch_has_kernel_for_dispatch_key``: CPU, not Meta, no composite),
#: so a model using them could not train on meta: the backward of ``F.multi_margin_loss``, of
#: ``F.multilabel_margin_loss``, of ``F.ctc_loss`` and of ``nn.FractionalMaxPool3d``. Each gradient is shaped
#: as the forward's input (CTC: the log-probabilities), in one fresh contiguous storage, as the CPU kernels
#: make it.
_SHAPES: dict[Any, Callable[..., torch.Tensor]] = {
    packet: fn for packet, fn in ((getattr(aten, "_grouped_mm", None), _grouped_mm),
                                  (getattr(aten, "_scaled_grouped_mm", None), _scaled_grouped_mm),
                                  (aten.multi_margin_loss_backward, _like_second),
                                  (aten.multilabel_margin_loss_backward, _like_second),
                                  (aten.fractional_max_pool3d_backward, _like_second),
                                  (aten._ctc_loss_backward, _like_second))
    if packet is not None
}


def meta_output(func: Any, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The meta output of ``func(*args, **kwargs)`` from shapes, or None when ``func`` has no rule here.

    torch's meta kernel for ``_grouped_mm`` wants bf16 operands with 16-byte aligned strides (the CUDA
    kernel's constraints), while the CPU kernel runs any float dtype: a float32 mixture-of-experts
    model runs for real but not on meta. Counting needs only the output's shape and dtype, which
    follow from the operands' shapes, so for these ops the meta run builds the output from them.
    """
    rule = _SHAPES.get(getattr(func, "overloadpacket", func))
    if rule is None or not all(not isinstance(a, torch.Tensor) or a.is_meta for a in args):
        return None
    return rule(*args, **kwargs)


# -- output storages ------------------------------------------------------------------------------
def _reduced_loss(func: Any, args: tuple, kwargs: dict) -> int:
    """Elements of the storage of a reduced loss: the broadcast input's (none: the output's own, 0)."""
    names = [a.name for a in func._schema.arguments]
    index = names.index("reduction")
    reduction = kwargs.get("reduction", args[index] if index < len(args) else 1)
    return torch.broadcast_shapes(args[0].shape, args[1].shape).numel() if reduction else 0


def _columns(func: Any, args: tuple, kwargs: dict) -> int:
    """Elements of ``col2im``'s output storage: its input's (the columns)."""
    return args[0].numel()


#: Operators whose device kernels (ATen's, CPU and CUDA alike) leave their output in a storage larger
#: than the output, by making it ``empty_like`` a larger tensor and then ``resize_``-ing it smaller (which
#: keeps the storage), so the output holds the larger block as long as it lives; the meta kernels make
#: an output of its own size. Elements of that storage, by operator (0: the output's own):
#:
#: * the losses that compute the elementwise loss and reduce it into the same tensor
#:   (``binary_cross_entropy_out_cpu``'s ``loss.resize_as_(loss_reduced)``): the scalar loss holds the
#:   elementwise storage through the backward (a U-Net's ``mse_loss`` of 2 x 2 x 16 x 16 fp32: 4,096 B
#:   where the meta kernel's scalar held 4 B);
#: * ``col2im`` (``F.fold``): ``col2im_cpu`` makes its output ``empty_like`` the columns (a fold of
#:   2 x 36 x 64 fp32 columns into 2 x 4 x 8 x 8: 18,432 B, not 2,048 B).
#:
#: Found by running forward and backward of 48 layers and 17 losses on the CPU and on meta under a
#: dispatch mode and comparing each operator's output storages.
_DEVICE_STORAGE: dict[Any, Callable[[Any, tuple, dict], int]] = {
    aten.mse_loss.default: _reduced_loss, aten.smooth_l1_loss.default: _reduced_loss,
    aten.binary_cross_entropy.default: _reduced_loss, aten.soft_margin_loss.default: _reduced_loss,
    aten.col2im.default: _columns,
}


def device_storage(func: Any, run: Callable) -> Callable:
    """``run``, whose meta output sits in a storage of the size the device kernel leaves it in
    (``_DEVICE_STORAGE``); ``run`` itself for every other op."""
    elements_of = _DEVICE_STORAGE.get(func)
    if elements_of is None:
        return run

    def run_in_device_storage(*args: Any, **kwargs: Any) -> Any:
        out = run(*args, **kwargs)
        elements = elements_of(func, args, kwargs) if isinstance(out, torch.Tensor) and out.is_meta else 0
        if elements <= out.numel():
            return out
        return out.new_empty(elements).resize_(out.shape)  # (resize_ keeps the storage, as the kernel's does)

    return run_in_device_storage


# -- values of small integer tensors --------------------------------------------------------------
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
    instead of an error (the training step's optimizer, ``training/step.py``). ``made_on_meta``:
    tensors made from nothing land on meta (``wrap``); the training step keeps them where torch
    puts them (an optimizer's step counters live on the host).

    A meta tensor has a shape and a dtype but no values, so a forward that reads
    one (``.item()``, ``bool(t)``, ``if mask.all():``, ``torch.nonzero``) cannot run on meta. Real
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
        tracked = device_storage(func, self._tracked(func, name, written, run))
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
            tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            host = [t for t in tensors if not t.is_meta and t.dim() > 0]
            if host and len(host) < len(tensors):  # (the meta kernel refused mixed devices, as a GPU's would)
                raise MetaValueError(
                    f"counting on the meta device: {name} in {self._where()} got a {host[0].device.type} tensor of "
                    f"shape {tuple(host[0].shape)} beside meta tensors: one made without a device (such as "
                    "torch.arange(n) in the loss or the forward) stays on the CPU while the model runs on meta. "
                    "Make it on its operands' device (device=x.device), as a GPU run needs too. "
                    f"(torch: {str(exc).splitlines()[0] if str(exc) else exc!r})") from exc
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


# -- replayed outputs -----------------------------------------------------------------------------
# What each op returned for given argument metadata, for the process: a pure function of that
# metadata on meta, so a second count of the same model (a sweep, a compare) runs no meta kernel.
_RECORDED: dict[tuple, Any] = {}
_MAX_RECORDED = 200_000  # entries (each a few small tuples); cleared when reached


class MetaOutputs:
    """Replays the outputs of repeated ops on meta tensors.

    Many meta kernels are Python decompositions (``native_batch_norm``: about 1 ms a call; the
    per-step ``sigmoid_``/``tanh``/``addmm`` of a decomposed LSTM: tens of us each), so counting
    on meta was mostly torch computing shapes. On meta, what an op returns depends only on its
    arguments' metadata, so the second call with the same op, shapes, strides, dtypes and
    scalars does not run the kernel: an op returning new tensors gets fresh ``empty_strided``
    tensors of the recorded metadata; an in-place op on ``self`` whose first call left the
    metadata of ``self`` unchanged returns ``self`` (its version counter was already bumped
    above the dispatch mode). Only when every tensor argument is a plain strided, non-complex
    meta tensor; anything else runs the kernel. What was recorded is kept for the process
    (``_RECORDED``), so "first" means the first in the process. An in-place pointwise op with no
    other tensor argument (``relu_``, ``hardtanh_``: ``registry.POINTWISE_IN_PLACE``) returns
    ``self`` from its first call: it cannot change the metadata (``hardtanh_``'s meta kernel, a
    Python decomposition, took 1.7 ms a call).
    """

    _SCALARS = frozenset((int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                          torch.memory_format))

    def __init__(self) -> None:
        if len(_RECORDED) >= _MAX_RECORDED:
            _RECORDED.clear()
        self._outputs = _RECORDED
        self._empty = torch.ops.aten.empty_strided.default._op
        self._meta = torch.device("meta")

    def run(self, func: Any, run: Callable, replay: int, args: tuple, kwargs: dict) -> Any:
        key = self._key(args)
        if key is not None and kwargs:
            extra = self._key(tuple(kwargs.values()))
            key = None if extra is None else (key, tuple(kwargs), extra)
        if key is None:
            return run(*args, **kwargs)
        if replay == POINTWISE_IN_PLACE:
            return args[0]
        # (op_info keeps every op seen: ids are not reused; factory ops read the default dtype)
        key = (id(func), torch.get_default_dtype(), key)
        spec = self._outputs.get(key)
        if spec is None:  # first call: run the kernel, record its outputs
            if replay != NEW:
                before = self._key(args[:1])
                out = run(*args, **kwargs)
                self._outputs[key] = out is args[0] and self._key(args[:1]) == before
            else:
                out = run(*args, **kwargs)
                self._outputs[key] = self._spec(out, args)
            return out
        if spec is False:
            return run(*args, **kwargs)
        if spec is True:
            return args[0]
        many, shapes = spec
        empty, meta = self._empty, self._meta
        outs = tuple(None if s is None else empty(s[0], s[1], dtype=s[2], device=meta) for s in shapes)
        return outs if many else outs[0]

    def _key(self, values: tuple) -> tuple | None:
        """The arguments' metadata as a hashable tuple, or None when they cannot be replayed."""
        key = []
        for value in values:
            cls = type(value)
            if cls in self._SCALARS:
                key.append((cls, value))  # (the type: 1, 1.0 and True are equal keys)
            elif isinstance(value, torch.Tensor):
                if not (value.is_meta and value.layout == torch.strided) or value.dtype.is_complex \
                        or value.is_nested:
                    return None
                key.append((value.dtype, value.shape, value.stride(), value.storage_offset()))
            elif cls is list or cls is tuple or cls is torch.Size:
                inner = self._key(value)
                if inner is None:
                    return None
                key.append((cls, inner))
            else:
                return None
        return tuple(key)

    @staticmethod
    def _spec(out: Any, args: tuple) -> tuple[bool, tuple] | bool:
        """``(is a tuple, (shape, stride, dtype) per output)`` to make outputs like ``out``; False
        when they are not all plain meta tensors (or ``None``) that ``empty_strided`` makes, or
        when one shares an argument's storage although the schema declares no alias
        (``_unsafe_view``): a fresh tensor would be a new storage, which peak memory counts."""
        outs = out if isinstance(out, tuple) else (out,)
        for t in outs:
            if t is not None and (type(t) is not torch.Tensor or not t.is_meta or t.layout != torch.strided
                                  or t.storage_offset()):
                return False
        inputs = {a.untyped_storage()._cdata for a in args if type(a) is torch.Tensor}
        if any(t is not None and t.untyped_storage()._cdata in inputs for t in outs):
            return False
        return isinstance(out, tuple), tuple(None if t is None else (tuple(t.shape), t.stride(), t.dtype)
                                             for t in outs)
