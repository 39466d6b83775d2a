"""The built-in status keys, and the evaluation metrics whose name, units and direction the user
chooses (top-1, top-5, loss). No framework is imported here.

Every backend fills the same keys, so reports and compares work across backends.
Values are raw: counts as ints, bytes as ints, seconds as floats.
"""
from __future__ import annotations

import keyword
import re
from typing import Iterable

from deeplite_like.errors import NotProvidedError
from deeplite_like.metrics.status_keys import Comparative, Metric, StatusKey, as_comparative


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


class _CountMetric(Metric):
    UNIT_KIND = "count"
    COMPARATIVE = Comparative.LOWER_IS_BETTER
    DECREASE_WORD = "fewer"
    INCREASE_WORD = "more"


class _BytesMetric(Metric):
    UNIT_KIND = "bytes"
    BASE_UNIT = "B"
    COMPARATIVE = Comparative.LOWER_IS_BETTER
    DECREASE_WORD = "smaller"
    INCREASE_WORD = "larger"


class Macs(_CountMetric):
    NAME = "macs"
    FRIENDLY_NAME = "Computational complexity"
    BASE_UNIT = "MACs"
    DESCRIPTION = ("Multiply-accumulates of contractions (matmuls, convolutions, attention, "
                   "recurrent cells) for one batch of the chosen batch size.")


class Flops(_CountMetric):
    NAME = "flops"
    FRIENDLY_NAME = "Floating-point operations"
    BASE_UNIT = "FLOPs"
    DESCRIPTION = ("2 x MACs plus every other arithmetic op (bias and residual adds, activations, "
                   "normalisation, softmax, pooling, ...) for one batch; moves and look-ups are free.")


class TotalParams(_CountMetric):
    BASE_UNIT = "params"  # shown as '61.71 k params', never a bare 'k'
    UNIT_IS_WORD = True
    NAME = "total_params"
    FRIENDLY_NAME = "Total parameters"
    DESCRIPTION = "Number of parameters, trainable or not; a parameter shared by several modules counts once."


class TrainableParams(_CountMetric):
    BASE_UNIT = "params"  # shown as '61.71 k params', never a bare 'k'
    UNIT_IS_WORD = True
    NAME = "trainable_params"
    FRIENDLY_NAME = "Trainable parameters"
    DESCRIPTION = "Number of parameters that require gradients; shared parameters count once."


class ModelSize(_BytesMetric):
    NAME = "model_size"
    FRIENDLY_NAME = "Model size"
    DESCRIPTION = ("Bytes of all parameters at their real dtype (fp32, fp16, int8, quantized); "
                   "buffers are reported apart in the details.")


class PeakActivationMemory(_BytesMetric):
    NAME = "peak_activation_memory"
    FRIENDLY_NAME = "Peak activation memory"
    DESCRIPTION = ("Largest total of live tensor bytes during one forward pass of one batch, "
                   "inputs and outputs included, parameters and buffers excluded.")


class ActivationArena(_BytesMetric):
    NAME = "activation_arena"
    FRIENDLY_NAME = "Activation arena"
    DESCRIPTION = ("Bytes of the one block a deployed file's runtime lays its activations out in, with offsets and "
                   "alignment (the runtime's own where it can be read, else our planner's); at least the peak "
                   "activation memory. Files only (ONNX, TFLite).")


class MemoryFootprint(_BytesMetric):
    NAME = "memory_footprint"
    FRIENDLY_NAME = "Memory footprint"
    DESCRIPTION = "Parameters + buffers + peak activation memory, for one batch."


class ExecutionTime(Metric):
    NAME = "execution_time"
    FRIENDLY_NAME = "Execution time"
    BASE_UNIT = "s"
    UNIT_KIND = "seconds"
    COMPARATIVE = Comparative.LOWER_IS_BETTER
    DECREASE_WORD = "faster"
    INCREASE_WORD = "slower"
    DESCRIPTION = "Median wall time of one forward pass of one batch, after warm-up."


class Throughput(Metric):
    NAME = "throughput"
    FRIENDLY_NAME = "Throughput"
    BASE_UNIT = "samples/s"
    UNIT_KIND = "plain"  # always samples/s: a prefix that flips between runs (samples/s, ksamples/s) misleads
    COMPARATIVE = Comparative.HIGHER_IS_BETTER
    DECREASE_WORD = "lower"
    INCREASE_WORD = "higher"
    DESCRIPTION = "Samples per second: batch size / median execution time."


class InferenceTime(ExecutionTime):
    NAME = "inference_time"
    FRIENDLY_NAME = "Evaluation time"
    DESCRIPTION = "Wall time of the evaluation function over its whole data split."


class LayerwiseSummary(StatusKey):
    """Per-layer table (a report object); shown on its own, not as a row of the metric table."""

    NAME = "layerwise_summary"


#: The default evaluation metric: a percentage compared in points, higher is better.
EvalMetricDefault = make_eval_metric("eval_metric", unit_name="%", comparative=Comparative.DIFFERENCE,
                                     friendly_name="Evaluation metric")

BUILTIN_KEYS = {cls.NAME: cls for cls in (
    Macs, Flops, TotalParams, TrainableParams, ModelSize, MemoryFootprint, PeakActivationMemory, ActivationArena,
    ExecutionTime, Throughput, EvalMetricDefault, InferenceTime, LayerwiseSummary)}

__all__ = [
    "ActivationArena", "BUILTIN_KEYS", "Comparative", "Metric", "StatusKey",
    "EvalMetric", "EvalMetricAlias", "EvalMetricDefault", "ExecutionTime", "Flops", "InferenceTime",
    "LayerwiseSummary", "Macs", "MemoryFootprint", "ModelSize", "PeakActivationMemory", "Throughput",
    "TotalParams", "TrainableParams", "make_eval_metric",
]


# deeplite-profiler's ``deeplite.profiler.metrics`` names deliberately not provided (docs/migration.rst).
NOT_PROVIDED = {
    "DynamicEvalMetric": "a secondary evaluation metric is made by ComputeEvalMetric.add_secondary_metric(key, ...) "
                         "or make_eval_metric",
    "compare_status_values": "two metrics are compared in words by "
                             "deeplite_like.reports.changes.describe_change(reference, other), which compare() "
                             "and CompareReport use",
}


def __getattr__(name: str) -> object:
    if name in NOT_PROVIDED:
        raise NotProvidedError(f"deeplite_like.metrics.{name} (deeplite-profiler's name) is not provided: "
                               f"{NOT_PROVIDED[name]} (see docs/migration.rst)", name=name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
