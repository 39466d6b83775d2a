"""Whole-module formulas: price a module as one unit instead of the operators inside it.

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
is priced by it (``own_complexity.py`` says what it may return). Looking up the class's MRO, the
nearest class that registers a formula or defines the method wins.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from .own_complexity import METHOD, own_complexity_formula
from .registry import Cost

ModuleFormula = Callable[[torch.nn.Module, tuple, dict, Any], Cost]

_MODULE_FORMULAS: dict[type, ModuleFormula] = {}


def register_module_formula(module_cls: type, *, override: bool = False) -> Callable[[ModuleFormula], ModuleFormula]:
    """Bind ``fn(module, args, kwargs, output) -> Cost`` to a module class (and its subclasses).

    Registering a class that already has a formula raises ``ValueError`` unless
    ``override=True``.
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
