"""Errors and warnings of the PyTorch backend."""
from __future__ import annotations


class CountingError(RuntimeError):
    """A counting pass could not finish; the message says where and what to do."""


class ForwardError(CountingError):
    """The model's forward raised while being counted (the cause is chained)."""


class BackwardError(CountingError):
    """The loss or the backward pass failed while being counted (the cause is chained)."""


class FormulaError(CountingError):
    """A formula (of an operator or of a whole module) raised or returned something unusable."""


class UntrackedOpWarning(UserWarning):
    """Operators ran with no formula and are not known to be free: they were counted as 0."""
