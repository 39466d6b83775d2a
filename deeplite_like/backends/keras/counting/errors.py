"""Errors and warnings of the Keras counting engine (the error classes are shared with the PyTorch backend)."""
from __future__ import annotations

from deeplite_like.errors import CountingError, FormulaError, ForwardError, UntrackedLayerWarning

__all__ = ["CountingError", "FormulaError", "ForwardError", "UntrackedLayerWarning"]
