"""The formula table of the torch counting engine.

A formula is a small pure function of one operator call, bound to aten ops by a decorator::

    @register_formula(aten.mm)
    def mm(call: OpCall) -> Cost:
        "(m, k) @ (k, n): m*n*k MACs."
        (m, k), (_, n) = call.args[0].shape, call.args[1].shape
        return Cost.contraction(m * n * k)

The engine (``engine.py``) knows nothing of any particular op: it looks the formula up by the
op's overload (``aten.add.Tensor``) first, then by its packet (``aten.add``). An op found
neither in the formula table nor in the free set is *untracked*.

Per-op facts are ``op_info``'s; module formulas are ``register_module_formula``'s.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Callable

import torch

from deeplite_like.results import Cost



@dataclass(frozen=True)
class CountOptions:
    """Counting options a formula may read.

    Attributes:
        causal_half: count causal attention as half of dense (default: dense, as it runs).
    """

    causal_half: bool = False


@dataclass(slots=True)
class OpCall:
    """One operator call as a formula sees it: the op, its arguments and its output.

    Tensors may be real, meta or fake; formulas read only shapes, dtypes and scalars.
    """

    op: Any  # torch._ops.OpOverload
    args: tuple
    kwargs: dict
    out: Any
    options: CountOptions = field(default_factory=CountOptions)

    @property
    def name(self) -> str:
        return op_name(self.op)


Formula = Callable[[OpCall], Cost]

_FORMULAS: dict[Any, Formula] = {}
_FREE: set[Any] = set()


def op_name(op: Any) -> str:
    """``aten.addmm`` for ``aten.addmm.default``: the packet's name, as users read it."""
    packet = getattr(op, "overloadpacket", op)
    name = getattr(packet, "__name__", None) or str(packet)
    namespace = getattr(packet, "__module__", "") or ""
    if namespace.startswith("torch._ops."):
        return f"{namespace.rsplit('.', 1)[-1]}.{name}"
    return str(packet) if "." in str(packet) else name


# True once a formula or free mark is kept by name (its op was not loaded when registered).
_by_name = [False]


def _as_key(op: Any) -> Any:
    """The table key of an op: the op itself, or for ``'ns::name[.overload]'`` the op it names.

    A name whose op is not loaded (yet) is kept as the string, outside ``aten``/``prims``:
    ``'torchvision::nms'`` registers before (or without) ``import torchvision``, and matches
    the op by its schema name when it runs.
    """
    if isinstance(op, str):  # "mylib::myop" or "mylib::myop.overload"
        ns, _, rest = op.partition("::")
        packet_name, _, overload = rest.partition(".")
        try:
            packet = getattr(getattr(torch.ops, ns), packet_name)
            return getattr(packet, overload) if overload else packet
        except (AttributeError, RuntimeError):
            if ns in ("aten", "prims"):
                raise
            _by_name[0] = True
            return op
    return op


def _schema_names(op: Any) -> tuple[str, ...]:
    """``('ns::name.overload', 'ns::name')`` of an op overload, for formulas kept by name."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return ()
    overload = schema.overload_name
    return (f"{schema.name}.{overload}", schema.name) if overload else (schema.name,)


def register_formula(*ops: Any, override: bool = False) -> Callable[[Formula], Formula]:
    """Bind a formula to one or more ops (packets, overloads or ``'ns::name'`` strings).

    Registering an op that already has a formula raises ``ValueError`` unless
    ``override=True`` (custom formulas for built-in ops must be deliberate).
    """
    keys = [_as_key(op) for op in ops]

    def decorator(fn: Formula) -> Formula:
        for key in keys:
            if key in _FORMULAS and not override and _FORMULAS[key] is not fn:
                raise ValueError(f"{op_name(key)} already has the formula {_FORMULAS[key].__qualname__}; "
                                 "pass override=True to replace it")
        for key in keys:
            _FORMULAS[key] = fn
            _FREE.discard(key)
        return fn

    return decorator


def register_free(*ops: Any) -> None:
    """Declare ops that cost no arithmetic (views, copies, indexing, casts, comparisons)."""
    for op in ops:
        _FREE.add(_as_key(op))


def unregister(*ops: Any) -> None:
    """Remove formulas or free marks (for user code and tests that register temporarily)."""
    for op in ops:
        key = _as_key(op)
        _FORMULAS.pop(key, None)
        _FREE.discard(key)


def lookup(op: Any) -> Formula | None:
    """The formula for an op overload: by overload first, then by packet."""
    formula = _FORMULAS.get(op)
    if formula is None:
        formula = _FORMULAS.get(getattr(op, "overloadpacket", None))
    if formula is None and _by_name[0]:
        for name in _schema_names(op):
            formula = _FORMULAS.get(name)
            if formula is not None:
                break
    return formula


def is_free(op: Any) -> bool:
    if op in _FREE or getattr(op, "overloadpacket", None) in _FREE:
        return True
    return _by_name[0] and any(name in _FREE for name in _schema_names(op))


# -- per-op facts ---------------------------------------------------------------------------------
# Keyed by ``id(op)``: ``OpOverload.__hash__`` is a Python method, too slow for once per op call.
# The entry holds the op, so the id cannot be reused while the entry lives.
_OP_INFO: dict[int, tuple[str, tuple, Callable, int, Any]] = {}
NEW, IN_PLACE, POINTWISE_IN_PLACE = 1, 2, 3  # ops ``MetaOutputs`` may replay (see ``op_info``)


def holds_tensors(argument: Any) -> bool:
    """Whether a schema argument's type is or contains a Tensor (``Tensor``, ``Tensor?``, ``Tensor[]``)."""
    kind = argument.type
    while kind is not None and not isinstance(kind, torch._C.TensorType):
        contained = kind.containedTypes() if hasattr(kind, "containedTypes") else []
        kind = contained[0] if contained else None
    return kind is not None


def op_info(func: Any) -> tuple[str, tuple, Callable, int, Any]:
    """``(name, written, run, replay, op)`` of an op: its name, the ``(index, name)`` of each
    argument its schema declares written (``Tensor(a!)``), what to call to run it, whether
    ``MetaOutputs`` may replay it (0, ``NEW`` or ``IN_PLACE``), and the op itself.

    Per-op facts (``op_info``), cached for the process by op identity: an op's name, the arguments
    its schema declares written (``Tensor(a!)``: ``add_``, ``clamp_``, ``copy_``, ``out=``), the C++
    callable to run it, and whether ``meta.MetaOutputs`` may replay its outputs (``NEW``: it returns
    new tensors; ``IN_PLACE``: it writes ``self`` only and returns it; ``POINTWISE_IN_PLACE``: an
    in-place pointwise op whose only tensor is ``self``, such as ``relu_`` or ``hardtanh_``, which
    cannot change the metadata of ``self``). None of this changes while the process runs; the
    formula look-up, which may, is the counting mode's (once per count).
    """
    info = _OP_INFO.get(id(func))
    if info is None or info[4] is not func:
        schema = getattr(func, "_schema", None)
        arguments = schema.arguments if schema is not None else ()
        written = tuple((i, arg.name) for i, arg in enumerate(arguments)
                        if arg.alias_info is not None and arg.alias_info.is_write)
        returns = schema.returns if schema is not None else ()
        replay = 0
        if returns and all(isinstance(r.type, torch._C.TensorType) for r in returns):
            if not written and all(r.alias_info is None for r in returns):
                replay = NEW
            elif (len(returns) == 1 and [i for i, _ in written] == [0] and returns[0].alias_info is not None
                  and returns[0].alias_info.before_set == arguments[0].alias_info.before_set):
                replay = IN_PLACE
                if torch.Tag.pointwise in getattr(func, "tags", ()) and \
                        not any(holds_tensors(arg) for arg in arguments[1:]):
                    replay = POINTWISE_IN_PLACE
        # A plain OpOverload's __call__ only forwards to its C++ ``_op``: call that directly.
        run = func._op if type(func) is torch._ops.OpOverload else func
        info = _OP_INFO[id(func)] = (op_name(func), written, run, replay, func)
    return info


# -- module formulas ------------------------------------------------------------------------------
ModuleFormula = Callable[[torch.nn.Module, tuple, dict, Any], Cost]

_MODULE_FORMULAS: dict[type, ModuleFormula] = {}


def register_module_formula(module_cls: type, *, override: bool = False) -> Callable[[ModuleFormula], ModuleFormula]:
    """Bind ``fn(module, args, kwargs, output) -> Cost`` to a module class (and its subclasses).

    Use one for a module whose inner operators have no formula (a custom kernel) or whose cost
    you define differently::

        @register_module_formula(MyBlock)
        def my_block(module, args, kwargs, output) -> Cost:
            "Two (d, d) projections per token."
            tokens = args[0].shape[0] * args[0].shape[1]
            return Cost.contraction(2 * tokens * module.dim ** 2)

    When such a module runs in the forward pass, the operators inside it (its children included)
    are not counted; the formula's cost is attributed to the module and to the operator name
    ``module:MyBlock``. A subclass uses its nearest registered base class's formula. The backward
    pass has no module formula: its operators are counted one by one, as everywhere else.

    A class that defines deeplite-profiler's ``compute_module_complexity(inputs, outputs)`` method
    is priced by it (``own_complexity_formula``: what it may return). Looking up the class's MRO, the
    nearest class that registers a formula or defines the method wins.

    Registering a class that already has a formula raises ``ValueError`` unless
    ``override=True``.

    Module formulas (``register_module_formula``) price a module as one unit instead of the operators
    inside it; a module's own ``compute_module_complexity(inputs, outputs)`` method (deeplite-profiler's)
    is priced the same way (``own_complexity_formula``).
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, torch.nn.Module)):
        raise TypeError(f"register_module_formula expects a torch.nn.Module subclass, got {module_cls!r}")

    def decorator(fn: ModuleFormula) -> ModuleFormula:
        known = _MODULE_FORMULAS.get(module_cls)
        if known is not None and known is not fn and not override:
            raise ValueError(f"{module_cls.__qualname__} already has the module formula {known.__qualname__}; "
                             "pass override=True to replace it")
        _MODULE_FORMULAS[module_cls] = fn
        return fn

    return decorator


def unregister_module_formula(*module_classes: type) -> None:
    """Remove module formulas (for user code and tests that register temporarily)."""
    for cls in module_classes:
        _MODULE_FORMULAS.pop(cls, None)


def lookup_module_formula(module_cls: type) -> ModuleFormula | None:
    """The formula of the class or of its nearest base class that has one, else ``None``.

    A class has one when it is registered, or when it defines ``compute_module_complexity``.
    """
    for cls in module_cls.__mro__:
        fn = _MODULE_FORMULAS.get(cls)
        if fn is not None:
            return fn
        if METHOD in vars(cls):
            return own_complexity_formula
    return None


def module_op_name(module_cls: type) -> str:
    """``module:MyBlock``: the operator name a module formula's cost is reported under."""
    return f"module:{module_cls.__name__}"


# -- a module's own compute_module_complexity -----------------------------------------------------
METHOD = "compute_module_complexity"


def _count(value: Any, what: str, module: torch.nn.Module) -> int:
    if isinstance(value, bool) or not isinstance(value, Real) or value < 0:
        raise TypeError(f"{type(module).__name__}.{METHOD} returned {what}={value!r}; expected a non-negative number")
    return int(value)


def as_cost(result: Any, module: torch.nn.Module) -> Cost:
    """The ``Cost`` a ``compute_module_complexity`` result stands for (``own_complexity_formula``)."""
    if isinstance(result, Cost):
        return result
    if isinstance(result, Mapping):
        if "macs" in result:
            macs = _count(result["macs"], "macs", module)
            return Cost(macs, _count(result.get("flops", 2 * macs), "flops", module))
        if "flops" in result:
            return Cost.contraction(_count(result["flops"], "flops", module))
        raise TypeError(f"{type(module).__name__}.{METHOD} returned a dict with keys {sorted(map(str, result))}; "
                        "it needs 'flops' (deeplite: the module's multiply-accumulates) or 'macs' and 'flops'")
    if isinstance(result, Real) and not isinstance(result, bool):
        return Cost.contraction(_count(result, "flops", module))
    raise TypeError(f"{type(module).__name__}.{METHOD} returned {type(result).__name__}; expected a Cost, a dict "
                    "{'flops': macs, ...} or a number of multiply-accumulates")


def own_complexity_formula(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> Cost:
    """Module formula calling ``module.compute_module_complexity(args, output)`` (keyword inputs too, if any).

    deeplite-profiler lets a custom module describe its own cost: a method
    ``compute_module_complexity(self, inputs, outputs)`` called after each forward with the forward's
    positional inputs (a tuple) and its output. The counting engine honours it the way it honours
    ``register_module_formula``: the module is priced whole, the operators inside it are not counted,
    and the cost is reported under ``module:<ClassName>``.

    What the method may return:

    * a ``Cost(macs, flops)``: used as is;
    * deeplite's dict, ``{'flops': n, ...}``: ``n`` is the module's multiply-accumulates (deeplite's
      ``flops`` are MACs, shown as GigaMACs), so it costs ``Cost.contraction(n)`` (FLOPs = 2 x n);
      ``param_size``, ``activation_size`` and ``params`` (deeplite's bytes per element for a
      quantised module) do not change counting: sizes and memory are read from the real tensors;
    * a dict with ``macs`` and ``flops`` (ours): ``Cost(macs, flops)``;
    * a number: MACs, as deeplite's ``flops``.
    """
    method = getattr(module, METHOD)
    result = method(tuple(args), output, **kwargs) if kwargs else method(tuple(args), output)
    return as_cost(result, module)
