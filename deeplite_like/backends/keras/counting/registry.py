"""The formula table of the Keras counting engine: one small pure function per layer class.

A formula prices one recorded layer call from shapes, dtypes and the layer's configuration::

    @register_layer_formula(MyProjection)
    def my_projection(call: LayerCall) -> Cost:
        "(..., d) -> (..., d): rows*d*d MACs."
        d = call.input.shape[-1]
        return Cost.contraction(call.input.numel // d * d * d)

The engine (``engine.py``) knows no particular layer: it looks the formula up along the
layer's class MRO (a subclass uses its nearest registered base's formula). Built-in formulas
are registered by the *public name* of the Keras class (``"keras.layers.Conv2D"``) and
resolved when a model is first counted, so importing this package never imports Keras.

Opaque and transparent formulas
    An *opaque* formula (the default for user formulas) prices the whole call: layer calls
    made inside it (``MultiHeadAttention``'s projections, ``LSTM``'s cell) are not counted
    again and do not appear in ``OpCount.by_module``. A *transparent* formula prices only
    the layer's own work; the layers it calls are counted by their own formulas
    (``Bidirectional``: its merge; ``Dense``: a layer passed as ``activation``).

A layer with no formula is a container when layer calls were recorded inside it (its cost is
its children's), free when it is known to do no arithmetic (``register_free_layer``), and
*untracked* otherwise: counted as 0, reported in ``OpCount.untracked`` and warned about.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, NamedTuple

from deeplite_like.results import Cost


@dataclass(frozen=True)
class CountOptions:
    """Counting options a formula may read.

    Attributes:
        training: the model runs in training mode (dropout and batch statistics are priced).
        causal_half: count causal attention as half of dense (default: dense, as it runs).
    """

    training: bool = False
    causal_half: bool = False


class TensorSpec(NamedTuple):
    """A recorded tensor: its shape (ints; ``None`` only where the run left it unknown), its dtype,
    and whether it carried a Keras mask (``Embedding(mask_zero=True)``, ``Masking``)."""

    shape: tuple
    dtype: str
    masked: bool = False

    @property
    def numel(self) -> int:
        """Number of elements (0 if a dimension is unknown)."""
        if any(d is None for d in self.shape):
            return 0
        return math.prod(self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_float(self) -> bool:
        """True for floating and complex dtypes: only their arithmetic is counted as FLOPs."""
        return self.dtype.startswith(("float", "bfloat", "complex"))


@dataclass
class LayerCall:
    """One recorded layer call as a formula sees it.

    ``args``/``kwargs`` are what the layer's ``call`` received and ``outputs`` what it
    returned, with every tensor replaced by a ``TensorSpec`` (shape and dtype only).
    """

    layer: Any
    path: str
    args: tuple
    kwargs: dict
    outputs: Any
    options: CountOptions = field(default_factory=CountOptions)
    untracked_parts: list = field(default_factory=list)

    @property
    def input(self) -> TensorSpec:
        """The first tensor the layer received."""
        spec = first_spec((self.args, self.kwargs))
        if spec is None:
            raise ValueError(f"layer {self.path!r} ({type(self.layer).__name__}) received no tensor")
        return spec

    @property
    def inputs(self) -> list[TensorSpec]:
        """Every tensor in the first positional argument (a tensor, or a list of them for merges)."""
        return list(specs_in(self.args[0] if self.args else self.kwargs))

    @property
    def output(self) -> TensorSpec:
        """The first tensor the layer returned."""
        spec = first_spec(self.outputs)
        if spec is None:
            raise ValueError(f"layer {self.path!r} ({type(self.layer).__name__}) returned no tensor")
        return spec

    def argument(self, name: str, position: int, default: Any = None) -> Any:
        """An argument of ``call`` by keyword, else by position, else ``default``."""
        if name in self.kwargs:
            return self.kwargs[name]
        if position < len(self.args):
            return self.args[position]
        return default

    @property
    def training(self) -> bool:
        """The ``training`` flag the layer was called with (else the count's option)."""
        value = self.kwargs.get("training")
        return bool(value) if isinstance(value, bool) else self.options.training

    def report_untracked(self, what: str) -> None:
        """Declare a part of this call that the formula cannot price (listed in ``untracked``)."""
        self.untracked_parts.append(what)


def is_keras_layer(obj: Any) -> bool:
    """``obj`` is a Keras layer (not a functional-graph operation), told without importing Keras."""
    return any(k.__name__ == "Layer" and k.__module__.startswith("keras") for k in type(obj).__mro__)


def specs_in(tree: Any) -> Iterator[TensorSpec]:
    """Every ``TensorSpec`` in nested tuples, lists and dicts, in order."""
    if isinstance(tree, TensorSpec):
        yield tree
    elif isinstance(tree, (list, tuple)):
        for item in tree:
            yield from specs_in(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from specs_in(item)


def first_spec(tree: Any) -> TensorSpec | None:
    return next(specs_in(tree), None)


LayerFormula = Callable[[LayerCall], Cost]


@dataclass(frozen=True)
class Entry:
    """A registered formula: the function, whether it is opaque, and the operator name it reports."""

    formula: LayerFormula
    opaque: bool
    name: str | None = None  # None: the layer's class name


FREE = Entry(formula=lambda call: Cost(), opaque=False, name="<free>")
#: Priced by the framework operators the layer runs itself (``engine.own_ops``), by design: layers
#: whose work depends on their mode and data (preprocessing and augmentation: identity at
#: inference, image transforms in training), foreign-model wrappers, spectrograms. Where no
#: operator hook exists (JAX) such a layer is untracked, by class name.
OP_LEVEL = Entry(formula=lambda call: Cost(), opaque=False, name="<op-level>")
#: ``OP_LEVEL`` layers that are the identity at inference (random augmentation): where no
#: operator hook exists they are free at inference (untracked only in training).
INFERENCE_IDENTITY = Entry(formula=lambda call: Cost(), opaque=False, name="<inference-identity>")
OP_MARKS = (OP_LEVEL, INFERENCE_IDENTITY)

_BY_CLASS: dict[type, Entry] = {}
_BY_NAME: dict[str, Entry] = {}  # public dotted names (the built-ins), resolved to classes by ``lookup``
_MARKED_NAMES: dict[str, Entry] = {}  # public name -> FREE, OP_LEVEL or INFERENCE_IDENTITY
_RESOLVED: dict[str, type] = {}  # public name -> class, once resolved
#: Public names that this Keras version does not have (a test keeps it empty on the supported one).
MISSING: list[str] = []


def register_layer_formula(*layer_classes: Any, opaque: bool = True, override: bool = False,
                           name: str | None = None) -> Callable[[LayerFormula], LayerFormula]:
    """Bind ``fn(call: LayerCall) -> Cost`` to layer classes (or public names like ``"keras.layers.Dense"``).

    ``opaque=True``: the formula prices everything the call does, layers called inside it are
    not counted again. ``opaque=False``: it prices the layer's own work only. ``name``: the
    operator name reported in ``OpCount.by_operator`` (default: the layer's class name).
    Registering a class that already has a formula raises ``ValueError`` unless
    ``override=True``.
    """
    _check_keys("register_layer_formula", layer_classes)

    def decorator(fn: LayerFormula) -> LayerFormula:
        entry = Entry(fn, opaque, name)
        for key in layer_classes:
            known = _registered(key)
            if known is not None and known not in (FREE, *OP_MARKS) and known.formula is not fn and not override:
                label = key if isinstance(key, str) else key.__qualname__
                raise ValueError(f"{label} already has the formula {known.formula.__qualname__}; "
                                 "pass override=True to replace it")
        for key in layer_classes:
            if isinstance(key, str):
                _BY_NAME[key] = entry
                _MARKED_NAMES.pop(key, None)
            else:
                _BY_CLASS[key] = entry
        return fn

    return decorator


def _registered(key: str | type) -> Entry | None:
    """The entry registered for exactly this class or name (a class also finds its public name's)."""
    if isinstance(key, str):
        return _BY_NAME.get(key)
    if key in _BY_CLASS:
        return _BY_CLASS[key]
    if not key.__module__.startswith("keras"):
        return None  # only Keras' own classes are registered by public name
    for public_name, entry in _BY_NAME.items():
        if _resolve_name(public_name) is key:
            return entry
    return None


def _check_keys(who: str, layer_classes: tuple) -> None:
    for key in layer_classes:
        if not isinstance(key, (str, type)):
            raise TypeError(f"{who} expects layer classes or public names, got {key!r}")


def _mark(who: str, layer_classes: tuple, mark: Entry) -> None:
    _check_keys(who, layer_classes)
    for key in layer_classes:
        if isinstance(key, str):
            _MARKED_NAMES[key] = mark
        else:
            _BY_CLASS[key] = mark


def register_free_layer(*layer_classes: Any) -> None:
    """Declare layer classes (or public names) that do no arithmetic: reshapes, copies, look-ups."""
    _mark("register_free_layer", layer_classes, FREE)


def register_op_level_layer(*layer_classes: Any, inference_identity: bool = False) -> None:
    """Declare layer classes (or public names) priced by the operators they run (``OP_LEVEL``);
    ``inference_identity=True``: the layer returns its input at inference (``INFERENCE_IDENTITY``)."""
    _mark("register_op_level_layer", layer_classes, INFERENCE_IDENTITY if inference_identity else OP_LEVEL)


def unregister_layer_formula(*layer_classes: Any) -> None:
    """Remove formulas or free marks (for user code and tests that register temporarily).

    A class removes what was registered for that class object (a user's formula, or a
    user's override of a built-in, after which the built-in applies again); a public name
    (``"keras.layers.Dense"``) removes the built-in registered under that name.
    """
    for key in layer_classes:
        if isinstance(key, str):
            _BY_NAME.pop(key, None)
            _MARKED_NAMES.pop(key, None)
        else:
            _BY_CLASS.pop(key, None)


def _resolve_name(public_name: str) -> type | None:
    """``"keras.layers.Conv2D"`` -> the class (``None`` if this Keras version lacks it)."""
    cls = _RESOLVED.get(public_name)
    if cls is not None:
        return cls
    module_name, _, attr = public_name.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        if public_name not in MISSING:
            MISSING.append(public_name)
        return None
    _RESOLVED[public_name] = cls
    return cls


def lookup(cls: type, cache: dict[type, Entry | None]) -> Entry | None:
    """The entry of ``cls`` or of its nearest registered base class (``FREE`` for free layers,
    ``OP_LEVEL`` for layers priced by their operators)."""
    if cls in cache:
        return cache[cls]
    by_class = dict(_BY_CLASS)
    for public_name, entry in (*_BY_NAME.items(), *_MARKED_NAMES.items()):
        resolved = _resolve_name(public_name)
        if resolved is not None and resolved not in by_class:
            by_class[resolved] = entry
    found = None
    for base in cls.__mro__:
        found = by_class.get(base)
        if found is not None:
            break
    cache[cls] = found
    return found
