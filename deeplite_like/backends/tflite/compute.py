"""``TFLiteProfiler`` (deeplite-profiler's name) and its ``Compute*`` functions; a file is read once, never changed.

MACs and FLOPs come from ``count_ops`` at the file's stored shapes, parameters and size from the
constant tensors at their stored dtype, latency from a LiteRT ``Interpreter`` at a stated thread
count (default 1). ``ComputeEvalMetric`` is the shared one: its function receives the read model,
whose ``predict(x)`` runs the interpreter (int8 in and out (de)quantized), as Keras' ``model.predict``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

from deeplite_like.backends.tflite.formulas import UntrackedTFLiteOpWarning, count_model, untracked_message
from deeplite_like.backends.tflite.graph import TFLiteModel, feed_arrays, import_litert, interpreter, load_model
from deeplite_like.backends.tflite.graph import interpreter_arena, tensor_lifetimes
from deeplite_like.errors import caller, check_profiler_options
from deeplite_like.functions import PredictEvaluation, ProfilerFunction, complexity_values, memory_values
from deeplite_like.metrics import (ActivationArena, ExecutionTime, Flops, Macs, MemoryFootprint, ModelSize,
                                   PeakActivationMemory, Throughput, TotalParams)
from deeplite_like.metrics.status_keys import Detailed
from deeplite_like.profiler import Profiler
from deeplite_like.timing import (DEFAULT_NUM_THREADS, busy_note, check_num_threads, summarise, time_blocks,
                                  timing_values)

import_litert()

__all__ = ["ComputeComplexity", "ComputeExecutionTime", "ComputeFlops", "ComputeMemory", "ComputeParams", "ComputeSize",
           "DEFAULT_FUNCTIONS", "TFLITE_PARAMS_CONVENTION", "TFLiteProfiler", "WeightStats", "weight_stats"]

#: What ``total_params`` counts in this backend (a compare across backends states it).
TFLITE_PARAMS_CONVENTION = ("TFLite: elements of every constant tensor holding real values (float, or integer with "
                            "a quantization scale: int8 weights, int32 biases), each tensor once, except unquantized "
                            "integer index data (reshape shapes, slice bounds); the converter folds batch norm into "
                            "the conv, so the file stores fewer parameters than the live model had")


@dataclass
class WeightStats:
    """The constant tensors of a file: parameters and bytes by dtype, quantization parameters, index data."""

    params: int = 0
    bytes: int = 0
    quantization_bytes: int = 0  # per-tensor / per-channel scales (float32) and zero points (int64), as stored
    index_data_elements: int = 0
    by_dtype: dict[str, dict[str, int]] = field(default_factory=dict)


def weight_stats(model: TFLiteModel) -> WeightStats:
    """Parameters and size of ``model``'s constants (``TFLITE_PARAMS_CONVENTION``); ``bytes`` includes the
    quantization parameters (``quantization_bytes``)."""
    stats = WeightStats()
    for t in model.constants:
        if not t.numeric:
            stats.index_data_elements += t.numel
            continue
        row = stats.by_dtype.setdefault(t.dtype, {"params": 0, "bytes": 0})
        row["params"] += t.numel
        row["bytes"] += t.nbytes
        stats.params += t.numel
        stats.quantization_bytes += t.quantization_bytes
        stats.bytes += t.nbytes + t.quantization_bytes
    return stats


class ComputeComplexity(ProfilerFunction):
    """MACs and FLOPs of one run of the file at its stored shapes (``count_ops``); untracked ops in the details."""

    def get_bounded_status_keys(self):
        return Macs, Flops

    def __call__(self, tflite_model: TFLiteModel) -> dict:
        counted = count_model(tflite_model)
        if counted.untracked:
            warnings.warn(untracked_message(counted.untracked), UntrackedTFLiteOpWarning, stacklevel=2)
        details = {"batch_size": counted.batch_size, "untracked": dict(counted.untracked),
                   "input_shapes": {t.name: t.shape for t in tflite_model.inputs}}
        return complexity_values(counted, details)


ComputeFlops = ComputeComplexity  # deeplite-profiler's name


class ComputeParams(ProfilerFunction):
    """Parameters stored in the file (``TFLITE_PARAMS_CONVENTION``)."""

    def get_bounded_status_keys(self):
        return (TotalParams,)

    def __call__(self, tflite_model: TFLiteModel) -> Detailed:
        stats = weight_stats(tflite_model)
        return Detailed(stats.params, {"by_dtype": {k: v["params"] for k, v in stats.by_dtype.items()},
                                       "index_data_elements": stats.index_data_elements,
                                       "convention": TFLITE_PARAMS_CONVENTION})


class ComputeSize(ProfilerFunction):
    """Bytes of the parameters at their stored dtype (int8 1, int32 bias 4, float32 4) + their quantization
    parameters (each scale 4 bytes, each zero point 8, as the flatbuffer stores them)."""

    def get_bounded_status_keys(self):
        return (ModelSize,)

    def __call__(self, tflite_model: TFLiteModel) -> Detailed:
        stats = weight_stats(tflite_model)
        return Detailed(stats.bytes, {"by_dtype": {k: v["bytes"] for k, v in stats.by_dtype.items()},
                                      "quantization_bytes": stats.quantization_bytes,
                                      "file_bytes": len(tflite_model.content)})


def _batch(model: TFLiteModel) -> int:
    batches = {t.shape[0] for t in model.inputs if t.shape}
    return batches.pop() if len(batches) == 1 else 1


class ComputeMemory(ProfilerFunction):
    """Peak live activation bytes of one run (``graph.tensor_lifetimes``), the LiteRT interpreter's own arena
    (``graph.interpreter_arena``) beside our planner's for the same tensors, and the footprint: stored weights
    + peak."""

    def get_bounded_status_keys(self):
        return PeakActivationMemory, MemoryFootprint, ActivationArena

    def __call__(self, tflite_model: TFLiteModel, include_weights: bool = True) -> dict:
        memory = tensor_lifetimes(tflite_model)
        weights = weight_stats(tflite_model).bytes if include_weights else 0
        batch = _batch(tflite_model)
        return {**memory_values(memory, weights, batch, include_weights, "tensor lifetimes in execution order"),
                ActivationArena.NAME: _arena(tflite_model, memory, batch)}


def _arena(tflite_model: TFLiteModel, memory: Any, batch: int) -> Detailed:
    """The interpreter's own arena as the value; our planner's figure and the live peak in the details. A file
    the interpreter cannot allocate (a custom op) gets our planner's figure, and says why."""
    try:
        arena = interpreter_arena(tflite_model)
    except (RuntimeError, ValueError) as exc:
        return Detailed(memory.arena_bytes, {"batch_size": batch, "source": "planned",
                                             "peak_activations": PeakActivationMemory(memory.peak_bytes),
                                             "method": f"our planner ({memory.alignment}-byte aligned); the "
                                                       f"interpreter could not allocate the file: "
                                                       f"{str(exc).strip()[:200]}"})
    return Detailed(arena.span, {"batch_size": batch, "source": "interpreter",
                                 "planned": ActivationArena(memory.arena_bytes),
                                 "peak_activations": PeakActivationMemory(memory.peak_bytes),
                                 "kernel_scratch": ActivationArena(arena.scratch), "tensors": arena.tensors,
                                 "method": "the LiteRT interpreter's read-write arena, read from where "
                                           "allocate_tensors placed the tensors (XNNPACK off); planned: our "
                                           f"planner for the graph's tensors, {memory.alignment}-byte aligned "
                                           "(no kernel scratch)"})


def _seeded_inputs(model: TFLiteModel) -> list:
    """Arrays of the inputs' stored shapes and dtypes: normal float data, zeros for integer inputs
    (a quantized input's zero is a valid value; token ids 0 are valid ids)."""
    import numpy as np

    rng = np.random.default_rng(0)
    arrays = []
    for t in model.inputs:
        if t.is_float:
            arrays.append(rng.standard_normal(t.shape).astype(np.float32))
        else:
            arrays.append(np.zeros(t.shape, dtype=np.dtype(t.dtype.lower())))
    return arrays


class ComputeExecutionTime(ProfilerFunction):
    """Median time of one LiteRT interpreter run of one batch (CPU, XNNPACK where the build applies it) and
    the throughput it implies. ``num_threads`` (default 1) is the interpreter's thread count."""

    def get_bounded_status_keys(self):
        return ExecutionTime, Throughput

    def __call__(self, tflite_model: TFLiteModel, data_splits: Mapping[str, Any], split: str | None = None,
                 min_run_time: float = 0.2, num_threads: int | None = None) -> dict:
        import ai_edge_litert

        threads = DEFAULT_NUM_THREADS if num_threads is None else num_threads
        runner = interpreter(tflite_model, threads)
        given = _first_batch(data_splits, split)
        feed_arrays(tflite_model, _seeded_inputs(tflite_model) if given is None else given, runner)
        batch = int(runner.get_input_details()[0]["shape"][0]) if len(runner.get_input_details()[0]["shape"]) else 1
        busy = busy_note()
        blocks = time_blocks(runner.invoke, lambda: None, warmup=3, min_run_time=min_run_time, min_blocks=5)
        version = getattr(ai_edge_litert, "__version__", "?")
        reason = f"LiteRT {version} Interpreter: num_threads={threads}"
        stats = summarise(blocks, batch_size=batch, num_threads=threads, device="cpu", compiled="litert",
                          threads_reason=reason, busy=busy)
        return timing_values(stats, runtime=f"ai-edge-litert {version}", provider="Interpreter")


def _first_batch(data_splits: Mapping[str, Any], split: str | None) -> Any:
    """``x`` of the first batch of ``split`` (default: ``'test'`` if present, else the first split)."""
    if not data_splits:
        return None
    name = split or ("test" if "test" in data_splits else next(iter(data_splits)))
    if name not in data_splits:
        raise KeyError(f"no data split {name!r}; the splits are {list(data_splits)}")
    batch = next(iter(data_splits[name]))
    return batch[0] if isinstance(batch, (tuple, list)) and len(batch) == 2 else batch


DEFAULT_FUNCTIONS = (ComputeComplexity, ComputeParams, ComputeSize, ComputeMemory, ComputeExecutionTime)

#: deeplite-profiler's evaluation functions, through the interpreter (``TFLiteModel.predict``, int8 outputs
#: dequantized): top-1 accuracy and misclassification in percent, ``{'top-1': %, 'top-5': %}``
get_accuracy = PredictEvaluation()
get_missclass = PredictEvaluation(result="missclass")
get_topk = PredictEvaluation((1, 5), result="topk")


class TFLiteProfiler(Profiler):
    """Profiles a ``.tflite`` file: a path or its bytes (read once, never modified).

    Args:
        model: the file's path or bytes.
        data_splits: split name -> batches of arrays (``(x, y)`` or ``x``); the first batch feeds the timing
            (float data quantized for an int8 input); ``ComputeEvalMetric`` functions get the read model,
            whose ``predict`` runs the interpreter.
        name: shown in reports.
        register_defaults: register every built-in ``Compute*`` function (default ``True``).

    Options of ``compute_network_status``: ``split``, ``min_run_time``, ``num_threads``. MACs, FLOPs and
    memory are at the file's stored shapes (binding another batch is not in this slice).
    """

    backend_name = "tflite"

    def __init__(self, model: Any, data_splits: Mapping[str, Any] | None = None, name: str = "model",
                 register_defaults: bool = True) -> None:
        super().__init__(model, data_splits, name)
        self.tflite_model = load_model(model)
        if register_defaults:
            for function in DEFAULT_FUNCTIONS:
                self.register_default_function(function())

    def _check_options(self, kwargs: Mapping[str, Any]) -> None:
        check_profiler_options(kwargs, caller("compute_network_status"))
        if check_num_threads(kwargs.get("num_threads")) == "auto":
            raise ValueError("num_threads='auto' is not supported by the TFLite backend: pass an int (threads of the "
                             "LiteRT interpreter), or leave it out for 1")
        if kwargs.get("batch_size") is not None:
            raise ValueError("batch_size is not supported by the TFLite backend yet: it counts and times the file's "
                             f"stored input shapes ({', '.join(str(t.shape) for t in self.tflite_model.inputs)})")

    def context(self) -> dict[str, Any]:
        return {**super().context(), "model": self.tflite_model, "tflite_model": self.tflite_model}
