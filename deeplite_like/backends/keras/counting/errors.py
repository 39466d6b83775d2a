"""Errors and warnings of the Keras counting engine (the error classes are shared with the PyTorch backend)."""
from __future__ import annotations

from deeplite_like.errors import CountingError, FormulaError, ForwardError

__all__ = ["CountingError", "FormulaError", "ForwardError", "UntrackedLayerWarning"]


class UntrackedLayerWarning(UserWarning):
    """Layers ran with no formula, no recorded sublayers, and are not known to be free: counted as 0."""
