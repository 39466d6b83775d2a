"""``OnnxProfiler``: the core ``Profiler`` with the ONNX backend's metrics, and its ``Compute*`` functions.

The model is the file that ships (a path, bytes or ``onnx.ModelProto``); it is read once and
never changed. MACs and FLOPs come from ``count_ops`` (the formula table), parameters and size
from the initializers at their stored dtype, and latency from an ONNX Runtime
``InferenceSession`` on the CPU provider, timed with the shared timing loop (``timing_loop.py``)
at a stated thread count (intra-op threads, default 1; inter-op 1, sequential execution).

Inputs: ``inputs=`` (what ``count_ops`` accepts: arrays, shapes, a dict by input name) and
``dims=`` (symbolic dimensions by name), or else the first batch of a data split (``x`` of an
``(x, y)`` batch, arrays). Timing runs on the arrays given, or on seeded arrays of the bound
shapes and the inputs' dtypes (zeros for integer inputs: valid token ids) when only shapes are.
"""
from __future__ import annotations

import warnings
from typing import Any, Mapping

from deeplite_like.errors import caller, check_profiler_options
from deeplite_like.backends.onnx.formulas import UntrackedOnnxOpWarning, count_graph, untracked_message
from deeplite_like.backends.onnx.graph import (GraphInfo, batch_dims, import_onnx, inference_session,
                                               initializer_stats, load_model, prepare, session_inputs)
from deeplite_like.backends.onnx.graph import tensor_lifetimes
from deeplite_like.functions import ProfilerFunction, complexity_values, memory_values
from deeplite_like.metrics import (ExecutionTime, Flops, Macs, MemoryFootprint, ModelSize, PeakActivationMemory,
                                   Throughput, TotalParams)
from deeplite_like.profiler import Profiler
from deeplite_like.metrics.status_keys import Detailed
from deeplite_like.timing import (DEFAULT_NUM_THREADS, busy_note, check_num_threads, summarise, time_blocks,
                                  timing_values)

import_onnx()

__all__ = ["ComputeComplexity", "ComputeExecutionTime", "ComputeFlops", "ComputeMemory", "ComputeParams", "ComputeSize",
           "DEFAULT_FUNCTIONS", "OnnxProfiler"]

#: What ``total_params`` counts in this backend (a compare across backends states it).
ONNX_PARAMS_CONVENTION = ("ONNX: elements of every initializer, each once, at its stored dtype, except integer index "
                          "data (Reshape shapes, Gather indices); an exporter that folds batch norm into the conv "
                          "stores fewer parameters than the live model had")


def _first_batch(data_splits: Mapping[str, Any], split: str | None) -> Any:
    """``x`` of the first batch of ``split`` (default: ``'test'`` if present, else the first split)."""
    if not data_splits:
        return None
    name = split or ("test" if "test" in data_splits else next(iter(data_splits)))
    if name not in data_splits:
        raise KeyError(f"no data split {name!r}; the splits are {list(data_splits)}")
    batch = next(iter(data_splits[name]))
    return batch[0] if isinstance(batch, (tuple, list)) and len(batch) == 2 else batch


def _graph(onnx_model: Any, inputs: Any, dims: Mapping[str, int] | None, data_splits: Mapping[str, Any],
           split: str | None, batch_size: int | None = None) -> tuple[GraphInfo, Any]:
    """The inferred graph for the profiler's inputs, else the split's first batch (its first ``batch_size``
    samples); ``batch_size`` binds every symbolic first dimension (``graph.batch_dims``)."""
    given = inputs
    if given is None:
        given = _first_batch(data_splits, split)
        if batch_size is not None and hasattr(given, "shape"):
            if len(given) < batch_size:
                raise ValueError(f"batch_size={batch_size} but the split's first batch has {len(given)} samples")
            given = given[:batch_size]
    bound = dict(dims or {})
    if batch_size is not None:
        for name, value in batch_dims(onnx_model, batch_size).items():
            if bound.setdefault(name, value) != value:
                raise ValueError(f"dims binds {name!r} to {bound[name]}, but batch_size is {batch_size}")
    return prepare(onnx_model, given, bound), given


class ComputeComplexity(ProfilerFunction):
    """MACs and FLOPs of one run of the file, node by node (``count_ops``); untracked ops in the details."""

    def get_bounded_status_keys(self):
        return Macs, Flops

    def __call__(self, onnx_model: Any, data_splits: Mapping[str, Any], inputs: Any = None,
                 dims: Mapping[str, int] | None = None, split: str | None = None,
                 batch_size: int | None = None) -> dict:
        info, _ = _graph(onnx_model, inputs, dims, data_splits, split, batch_size)
        counted = count_graph(info)
        if counted.untracked:
            warnings.warn(untracked_message(counted.untracked), UntrackedOnnxOpWarning, stacklevel=2)
        details = {"batch_size": counted.batch_size, "untracked": dict(counted.untracked),
                   "input_shapes": dict(info.input_shapes)}
        return complexity_values(counted, details)


ComputeFlops = ComputeComplexity  # deeplite-profiler's name


class ComputeParams(ProfilerFunction):
    """Parameters stored in the file: initializer elements, each once (``ONNX_PARAMS_CONVENTION``)."""

    def get_bounded_status_keys(self):
        return (TotalParams,)

    def __call__(self, onnx_model: Any) -> Detailed:
        stats = initializer_stats(onnx_model)
        return Detailed(stats.params, {"by_dtype": {k: v["params"] for k, v in stats.by_dtype.items()},
                                       "initializers": stats.count, "index_data_elements": stats.index_data,
                                       "convention": ONNX_PARAMS_CONVENTION})


class ComputeSize(ProfilerFunction):
    """Bytes of the parameters at their stored dtype (int8 1, fp16 2, int4 packed two per byte)."""

    def get_bounded_status_keys(self):
        return (ModelSize,)

    def __call__(self, onnx_model: Any) -> Detailed:
        stats = initializer_stats(onnx_model)
        return Detailed(stats.bytes, {"by_dtype": {k: v["bytes"] for k, v in stats.by_dtype.items()}})


class ComputeMemory(ProfilerFunction):
    """Peak live activation bytes of one run (``graph.tensor_lifetimes``), and the footprint: stored weights + peak.

    The details give the arena a static planner lays the same tensors out in (``planned_arena``:
    offsets 64-byte aligned, greedy by size; ONNX Runtime reports no arena of its own).
    ``include_weights=False`` (deeplite-profiler's option) leaves the weights out of the footprint.
    """

    def get_bounded_status_keys(self):
        return PeakActivationMemory, MemoryFootprint

    def __call__(self, onnx_model: Any, data_splits: Mapping[str, Any], inputs: Any = None,
                 dims: Mapping[str, int] | None = None, split: str | None = None, batch_size: int | None = None,
                 include_weights: bool = True) -> dict:
        info, _ = _graph(onnx_model, inputs, dims, data_splits, split, batch_size)
        memory = tensor_lifetimes(info)
        batches = {shape[0] for shape in info.input_shapes.values() if shape}
        batch = batches.pop() if len(batches) == 1 else 1
        weights = initializer_stats(onnx_model).bytes if include_weights else 0
        return memory_values(memory, weights, batch, include_weights, "tensor lifetimes in topological order")


class ComputeExecutionTime(ProfilerFunction):
    """Median time of one ONNX Runtime run of one batch and the throughput it implies.

    ``num_threads`` (default 1) is the session's intra-op thread count; inter-op is 1 with
    sequential execution. ``device``: ``"cpu"`` (the CPU provider) or ``"cuda"`` (the CUDA provider,
    onnxruntime-gpu; each run copies the inputs to the GPU and the outputs back, as ``session.run``
    does). Details as the other backends' (``q1``, ``q3``, ``forwards``, ...).
    """

    def get_bounded_status_keys(self):
        return ExecutionTime, Throughput

    def __call__(self, onnx_model: Any, data_splits: Mapping[str, Any], inputs: Any = None,
                 dims: Mapping[str, int] | None = None, split: str | None = None, min_run_time: float = 0.2,
                 num_threads: int | None = None, batch_size: int | None = None, device: str = "cpu") -> dict:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ImportError("timing an ONNX model needs onnxruntime, which is not installed here; install it with: "
                              "pip install 'deeplite-like[onnx]'") from exc
        threads = DEFAULT_NUM_THREADS if num_threads is None else num_threads
        info, given = _graph(onnx_model, inputs, dims, data_splits, split, batch_size)
        feeds = session_inputs(info.input_shapes, info.dtypes, given)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        session = inference_session(onnx_model, options, device)
        provider = session.get_providers()[0]
        busy = busy_note()
        blocks = time_blocks(lambda: session.run(None, feeds), lambda: None, warmup=3, min_run_time=min_run_time,
                             min_blocks=5)
        batches = {shape[0] for shape in info.input_shapes.values() if shape}
        batch = batches.pop() if len(batches) == 1 else 1
        reason = (f"ONNX Runtime {ort.__version__} {provider}: {threads} intra-op thread(s), 1 inter-op, "
                  "sequential execution")
        stats = summarise(blocks, batch_size=batch, num_threads=threads, device=device, compiled="onnxruntime",
                          threads_reason=reason, busy=busy)
        return timing_values(stats, runtime=f"onnxruntime {ort.__version__}", provider=provider)


DEFAULT_FUNCTIONS = (ComputeComplexity, ComputeParams, ComputeSize, ComputeMemory, ComputeExecutionTime)


class OnnxProfiler(Profiler):
    """Profiles an ONNX file: a path, bytes or ``onnx.ModelProto`` (read once, never modified).

    Args:
        model: the model file (external data is read only from beside a model file).
        data_splits: split name -> batches of arrays (``(x, y)`` or ``x``); the first batch gives the inputs
            when ``inputs`` is not given.
        name: shown in reports.
        inputs: the inputs as ``count_ops`` takes them (arrays, shapes, a dict by input name).
        dims: symbolic dimensions by name (``{"batch": 8}``).
        register_defaults: register every built-in ``Compute*`` function (default ``True``).

    Options of ``compute_network_status``: ``batch_size`` (binds every symbolic first dimension and takes that
    many samples of a split's first batch; default: the file's or the inputs' batch), ``split``,
    ``min_run_time``, ``num_threads``.
    """

    backend_name = "onnx"

    def __init__(self, model: Any, data_splits: Mapping[str, Any] | None = None, name: str = "model",
                 inputs: Any = None, dims: Mapping[str, int] | None = None, register_defaults: bool = True) -> None:
        super().__init__(model, data_splits, name)
        self.onnx_model = load_model(model)
        self.inputs = inputs
        self.dims = dict(dims or {})
        if register_defaults:
            for function in DEFAULT_FUNCTIONS:
                self.register_default_function(function())

    def _check_options(self, kwargs: Mapping[str, Any]) -> None:
        check_profiler_options(kwargs, caller("compute_network_status"))
        if check_num_threads(kwargs.get("num_threads")) == "auto":
            raise ValueError("num_threads='auto' is not supported by the ONNX backend: pass an int (threads of the "
                             "ONNX Runtime session), or leave it out for 1")

    def context(self) -> dict[str, Any]:
        return {**super().context(), "onnx_model": self.onnx_model, "inputs": self.inputs, "dims": self.dims}
