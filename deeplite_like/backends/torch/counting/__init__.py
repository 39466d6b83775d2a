"""Operator-level MAC/FLOP counting for PyTorch models.

``count_ops`` runs the model under a ``TorchDispatchMode`` and prices each aten operator with
a formula from the table (``registry.py``, filled by ``formulas/``); ``register_formula``,
``register_free`` and ``register_module_formula`` extend it.
"""
from deeplite_like.errors import BackwardError, CountingError, FormulaError, ForwardError, UntrackedOpWarning

from .engine import count_ops
from .registry import (Cost, CountOptions, OpCall, register_formula, register_free, register_module_formula, unregister,
                       unregister_module_formula)

__all__ = [
    "BackwardError", "Cost", "CountOptions", "CountingError", "FormulaError", "ForwardError", "OpCall",
    "UntrackedOpWarning", "count_ops", "register_formula", "register_free", "register_module_formula",
    "unregister", "unregister_module_formula",
]
