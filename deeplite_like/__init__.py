"""deeplite_like: profile what a deep-learning model costs, and compare models.

``import deeplite_like`` imports no framework; a backend is imported when first used.
"""
from deeplite_like.backends import profiler_for
from deeplite_like.compare import compare
from deeplite_like.data import DataError, ForwardPass, Inputs
from deeplite_like.device import Device
from deeplite_like.errors import ForwardError
from deeplite_like.eval_metric import ComputeEvalMetric
from deeplite_like.lazy import lazy_exports
from deeplite_like.functions import ExternalProfilerFunction, ProfilerFunction
from deeplite_like.opcount import OpCount, OpStats
from deeplite_like.profiler import Profiler
from deeplite_like.status import Comparative, Detailed, Metric, StatusKey

__version__ = "0.1.0"

__all__ = [
    "Comparative", "ComputeEvalMetric", "DataError", "Detailed", "Device", "ExternalProfilerFunction", "ForwardError",
    "ForwardPass", "Inputs", "Metric", "OpCount", "OpStats", "Profiler", "ProfilerFunction", "StatusKey", "compare",
    "profiler_for",
]

# Profiles (deeplite_like.profiling): resolved on first use, so `import deeplite_like` stays light.
_LAZY = {"get_model_profile": "deeplite_like.profiling", "FlopsProfiler": "deeplite_like.profiling",
         "ModelProfile": "deeplite_like.profiling"}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
