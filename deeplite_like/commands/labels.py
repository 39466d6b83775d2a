"""Metric names that say what was counted: ``Computational complexity (forward + backward)``.

With ``--backward`` the MACs and FLOPs are those of a training step. Their rows are relabelled
in every format (table, JSON, CSV, compare) by giving each such value a subclass of its own
metric whose friendly name adds ``(forward + backward)``; the value, its unit, its
comparative and its details are unchanged.
"""
from __future__ import annotations

from typing import Any

BACKWARD_LABEL = "forward + backward"


def _labelled_class(cls: type, label: str) -> type:
    name = cls.friendly_name()
    return type(cls.__name__, (cls,), {"FRIENDLY_NAME": f"{name} ({label})", "__module__": cls.__module__})


def label_backward(statuses: dict[str, Any]) -> dict[str, Any]:
    """``statuses`` with every metric measured with ``backward=True`` (its details say so) relabelled."""
    from deeplite_like.status import Metric

    labelled = {}
    for key, status in statuses.items():
        if isinstance(status, Metric) and status.details.get("backward") is True:
            copy = status.fresh()
            copy.__class__ = _labelled_class(type(status), BACKWARD_LABEL)
            copy.value, copy.details = status.value, dict(status.details)
            status = copy
        labelled[key] = status
    return labelled
