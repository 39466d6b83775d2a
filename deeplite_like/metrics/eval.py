"""Evaluation metrics whose name, units and direction the user chooses (top-1, top-5, loss)."""
from __future__ import annotations

import keyword
import re
from typing import Iterable

from deeplite_like.status import Comparative, Metric, StatusKey, as_comparative


class EvalMetric(Metric):
    """Base of user-named evaluation metrics; build one with :func:`make_eval_metric`."""

    UNIT_KIND = "plain"
    COMPARATIVE = Comparative.DIFFERENCE


class EvalMetricAlias(StatusKey):
    """``eval_metric`` holding the value of an evaluation metric named otherwise (``'accuracy'``).

    deeplite-profiler stores every evaluation under ``eval_metric``; ``ComputeEvalMetric(f, 'accuracy')``
    fills both. The alias is not displayed (the named metric is), and it is weak: any other
    function computing ``eval_metric`` takes the key from it silently.
    """

    NAME = "eval_metric"
    WEAK = True


def make_eval_metric(name: str, unit_name: str = "", comparative: Comparative = Comparative.DIFFERENCE,
                     friendly_name: str | None = None, description: str | None = None) -> type[EvalMetric]:
    """Create an ``EvalMetric`` subclass whose ``NAME`` is ``name``.

    ``comparative`` says how two models are compared: ``DIFFERENCE`` (``-0.70 pts`` for a
    percentage, higher is better), ``DIFFERENCE_LOWER`` (a loss), ``HIGHER_IS_BETTER`` /
    ``LOWER_IS_BETTER`` (ratios) or ``NONE``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"an evaluation metric needs a non-empty string name, got {name!r}")
    if not isinstance(comparative, Comparative):
        parsed = as_comparative(comparative) if isinstance(comparative, str) else None
        if parsed is None:
            raise TypeError(f"comparative must be a Comparative member (or deeplite's name of one, 'diff', 'div', "
                            f"'reciprocal', 'none'), got {comparative!r}")
        comparative = parsed
    lower = comparative in (Comparative.LOWER_IS_BETTER, Comparative.DIFFERENCE_LOWER)
    attrs = {
        "NAME": name,
        "BASE_UNIT": unit_name,
        "COMPARATIVE": comparative,
        "FRIENDLY_NAME": friendly_name or name.replace("_", " ").capitalize(),
        "DESCRIPTION": description or f"User evaluation metric '{name}' ({comparative.value}).",
        "DECREASE_WORD": "lower",
        "INCREASE_WORD": "higher",
        "__module__": __name__,
        "__doc__": f"Evaluation metric {name!r} ({'lower' if lower else 'higher'} is better).",
    }
    class_name = "".join(part.capitalize() for part in name.replace("-", "_").split("_") if part) or "Eval"
    if not class_name.isidentifier() or keyword.iskeyword(class_name):
        class_name = "EvalMetric_"
    return type(class_name + "Metric", (EvalMetric,), attrs)


_TOPK = re.compile(r"^top(\d+)$")


def parse_topk_names(metrics: Iterable[str] | str) -> dict[str, int]:
    """``('top1', 'top5')`` -> ``{'top1': 1, 'top5': 5}``, for the backends' accuracy helpers."""
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise ValueError("evaluate needs at least one metric, e.g. metrics=('top1', 'top5')")
    parsed = {}
    for name in names:
        match = _TOPK.match(name) if isinstance(name, str) else None
        if match is None or int(match.group(1)) < 1:
            raise ValueError(f"unknown evaluation metric {name!r}; use 'topK' names such as 'top1', 'top5'")
        parsed[name] = int(match.group(1))
    return parsed
