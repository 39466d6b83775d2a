"""Errors and warnings of the Keras counting engine."""
from __future__ import annotations


class CountingError(RuntimeError):
    """A counting pass could not finish; the message says where and what to do."""


class ForwardError(CountingError):
    """The model's forward raised while being counted (the cause is chained)."""


class FormulaError(CountingError):
    """A layer formula raised or returned something unusable."""


class UntrackedLayerWarning(UserWarning):
    """Layers ran with no formula, no recorded sublayers, and are not known to be free: counted as 0."""
