"""Errors of a counting or profiling pass, shared by both backends (no framework imports).

One class per kind of failure, whichever backend raised it: ``except ForwardError`` catches a
model whose forward failed under the PyTorch or the Keras backend, from ``count_ops``,
``compute_network_status`` or ``get_model_profile`` alike.
"""
from __future__ import annotations

__all__ = ["BackwardError", "CountingError", "FormulaError", "ForwardError", "UntrackedLayerWarning",
           "UntrackedOpWarning"]


class CountingError(RuntimeError):
    """A counting pass could not finish; the message says where and what to do."""


class ForwardError(CountingError):
    """The model's forward raised while being counted or profiled (the cause is chained)."""


class BackwardError(CountingError):
    """The loss or the backward pass failed while being counted (the cause is chained)."""


class FormulaError(CountingError):
    """A formula (of an operator, a layer or a whole module) raised or returned something unusable."""


class UntrackedOpWarning(UserWarning):
    """Operators ran with no formula and are not known to be free: they were counted as 0 (PyTorch, ONNX)."""


class UntrackedLayerWarning(UserWarning):
    """Layers ran with no formula, no recorded sublayers, and are not known to be free: counted as 0 (Keras)."""
