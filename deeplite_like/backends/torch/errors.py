"""Errors and warnings of the PyTorch backend (the error classes are shared with the Keras backend)."""
from __future__ import annotations

from deeplite_like.errors import BackwardError, CountingError, FormulaError, ForwardError, UntrackedOpWarning

__all__ = ["BackwardError", "CountingError", "FormulaError", "ForwardError", "UntrackedOpWarning"]
