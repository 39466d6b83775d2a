"""Errors and warnings of the PyTorch backend (the error classes are shared with the Keras backend)."""
from __future__ import annotations

from deeplite_like.errors import BackwardError, CountingError, FormulaError, ForwardError

__all__ = ["BackwardError", "CountingError", "FormulaError", "ForwardError", "UntrackedOpWarning"]


class UntrackedOpWarning(UserWarning):
    """Operators ran with no formula and are not known to be free: they were counted as 0."""
