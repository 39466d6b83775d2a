"""deeplite_like: profile what a deep-learning model costs, and compare models.

``import deeplite_like`` imports no framework; a backend is imported when first used.
"""
from deeplite_like import _moved
from deeplite_like._version import __version__  # (one version source: pyproject.toml reads it too)

_moved.install()  # old import paths keep working (deeplite_like/_moved.py)

from deeplite_like.backends import profiler_for
from deeplite_like.data import DataError, ForwardPass, Inputs, ModelInputPattern
from deeplite_like.data.loaders import (AverageAggregator, DataLoader, TensorInfo, TensorSampler, getLogger, setLogger,
                                        timer)
from deeplite_like.device import Device
from deeplite_like.errors import ForwardError
from deeplite_like.functions import ComputeEvalMetric, EvaluationFunction, ExternalProfilerFunction, ProfilerFunction
from deeplite_like.metrics import (EvalMetric, ExecutionTime, Flops, InferenceTime, LayerwiseSummary, MemoryFootprint,
                                   ModelSize, TotalParams)
from deeplite_like.metrics.status_keys import Comparative, Detailed, Metric, StatusKey
from deeplite_like.profiler import Profiler, compare
from deeplite_like.results import OpCount, OpStats

__all__ = [
    "Comparative", "ComputeEvalMetric", "DataError", "Detailed", "Device", "ExternalProfilerFunction", "ForwardError",
    "ForwardPass", "Inputs", "Metric", "OpCount", "OpStats", "Profiler", "ProfilerFunction", "StatusKey", "compare",
    "profiler_for",
    # deeplite-profiler's names (``deeplite.profiler.*`` maps here; docs/migration.rst)
    "AverageAggregator", "DataLoader", "EvalMetric", "EvaluationFunction", "ExecutionTime", "Flops", "InferenceTime",
    "LayerwiseSummary", "MemoryFootprint", "ModelInputPattern", "ModelSize", "TensorInfo", "TensorSampler",
    "TotalParams", "getLogger", "make_display_filter_function", "setLogger",
]

# Profiles (deeplite_like.profiling): resolved on first use, so `import deeplite_like` stays light.
_LAZY = {"get_model_profile": "deeplite_like.profiling", "FlopsProfiler": "deeplite_like.profiling",
         "ModelProfile": "deeplite_like.profiling",
         "make_display_filter_function": "deeplite_like.reports.status"}

# deeplite-profiler names deliberately not provided, and what to use instead (docs/migration.rst).
NOT_PROVIDED = {
    "DynamicEvalMetric": "a secondary evaluation metric is made by ComputeEvalMetric.add_secondary_metric(key, ...) "
                         "(or deeplite_like.metrics.make_eval_metric)",
    "Aggregator": "the only aggregator deeplite used is AverageAggregator, which is provided",
    "NotComputedValue": "a key not computed reads None (status_get), and reports show it as not computed",
    "cast_tuple": "an internal helper of deeplite's; pass tuples",
    "compare_status_values": "two metrics are compared in words by "
                             "deeplite_like.reports.changes.describe_change(reference, other), which compare() "
                             "and CompareReport use",
    **dict.fromkeys(("parse_metric", "make_one_model_summary_str", "make_two_models_summary_str"),
                    "reports are built from one result object: profiler.report() (a StatusReport), "
                    "profiler.display_status(), profiler.compare(other) (a CompareReport), each as text, dict, JSON, "
                    "CSV or Markdown"),
    "default_display_filter_function": "the default display shows every key in the profiler's order; "
                                       "make_display_filter_function() builds that filter",
}

__getattr__, __dir__ = _moved.lazy_exports(__name__, _LAZY, globals(), NOT_PROVIDED)
