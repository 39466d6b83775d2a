"""The built-in ``ProfilerFunction``s of the PyTorch backend.

Each function takes its model inputs from a data split through the profiler's ``ForwardPass``
and leaves the model as it found it. Counting and memory runs use the model in eval mode by
default (``mode='train'`` to measure training-mode behaviour) so that batch-norm statistics
are never updated by profiling.

One observation, many figures: MACs/FLOPs, peak memory and the per-layer table are read from
one instrumented forward (``counting.engine.observe``) under ``torch.no_grad()``. Inside
``deeplite_like.observations.shared_observations()`` (the profiler enters it for each
``compute_network_status`` and ``compare``) the first of these functions to run makes the
observation with everything in it,
and the others, asking for the same inputs and options, read the same one: the default metrics
run the model once instrumented, plus the timing runs (``benchmarks/bench_status_cost.py``).
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Mapping

import torch

from deeplite_like.backends.torch.input_failures import explained_failures, take_inputs
from deeplite_like.backends.torch.inputs import inference_mode_of
from deeplite_like.backends.torch.run_tensors import batch_size_of
from deeplite_like.complexity_options import ComplexityOptions
from deeplite_like.data import ForwardPass
from deeplite_like.functions import ProfilerFunction
from deeplite_like.metrics import (ExecutionTime, Flops, LayerwiseSummary, Macs, MemoryFootprint, ModelSize,
                                   PeakActivationMemory, Throughput, TotalParams, TrainableParams)
from deeplite_like.observations import note, noted, observed, sharing
from deeplite_like.status import Detailed
from deeplite_like.timing_values import META_NOT_TIMED, not_measured, timing_values
from deeplite_like.threads import DEFAULT_NUM_THREADS


def _observed(model: torch.nn.Module, data_splits: Mapping[str, Any], forward_pass: ForwardPass, split: str | None,
              batch_size: int, meta: bool, mode: str, causal_half: bool = False, memory: bool = False,
              layers: bool = False) -> tuple[Any, int]:
    """``(observation, batch size)`` of one forward on the split's inputs (shared in ``shared_observations``).

    Shared, the observation has counts, memory and layer facts whoever asks first; alone, only
    what was asked for.
    """
    from deeplite_like.backends.torch.counting.engine import observe
    from deeplite_like.backends.torch.counting.registry import CountOptions
    from deeplite_like.backends.torch.state import model_device

    def make() -> tuple[Any, int]:
        everything = sharing()  # shared: whoever asks first records what the others need
        taken = take_inputs(data_splits, forward_pass, split, batch_size, device=model_device(model))
        with inference_mode_of(model, mode), explained_failures(model, taken):
            seen = observe(model, taken.args, taken.kwargs, meta=meta, options=CountOptions(causal_half=causal_half),
                           memory=memory or everything, layers=layers or everything, grad=False)
        if not meta and mode == "eval":  # it ran these inputs' kernels for real
            note(("torch warm", id(model), split, batch_size))
        return seen, batch_size_of(taken.args, taken.kwargs) or 1

    return observed(("torch", id(model), split, batch_size, bool(meta), mode, bool(causal_half)), make)


class ComputeComplexity(ComplexityOptions, ProfilerFunction):
    """MACs and FLOPs of one batch, counted at the operator level (see ``count_ops``).

    ``ComputeComplexity(num_bytes=4, export=False)``: deeplite-profiler's options are accepted
    (``deeplite_like.complexity_options``). ``ComputeFlops`` is this class under deeplite's
    TensorFlow name.
    """

    def get_bounded_status_keys(self):
        return Macs, Flops

    def __call__(self, model: torch.nn.Module, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, meta: bool = False, backward: bool = False,
                 loss_fn: Callable[[Any], torch.Tensor] | None = None, causal_half: bool = False,
                 mode: str = "eval") -> dict:
        from deeplite_like.backends.torch.counting import count_ops
        from deeplite_like.backends.torch.counting.engine import warn_if_untracked

        if backward:
            taken = take_inputs(data_splits, forward_pass, split, batch_size)
            args, kwargs = taken.args, taken.kwargs
            with inference_mode_of(model, mode), explained_failures(model, taken):
                counted = count_ops(model, args=args, kwargs=kwargs, backward=backward, meta=meta, loss_fn=loss_fn,
                                    causal_half=causal_half)
            batch = batch_size_of(args, kwargs) or 1
        else:  # the forward's cost: read from the observation (under no_grad, as inference runs)
            seen, batch = _observed(model, data_splits, forward_pass, split, batch_size, meta, mode, causal_half)
            counted = seen.counts
            warn_if_untracked(counted.untracked, stacklevel=2)
        details = {"batch_size": batch, "backward": backward}
        if counted.untracked:  # operator -> calls: ran with no formula, counted as 0 (reports mark the count)
            details["untracked"] = dict(counted.untracked)
        if backward:
            details.update({f"{phase} MACs": Macs(stats.macs) for phase, stats in counted.phases.items()})
        return {Macs.NAME: Detailed(counted.macs, {**details, "per_sample": Macs(counted.macs // batch)}),
                Flops.NAME: Detailed(counted.flops, {**details, "per_sample": Flops(counted.flops // batch)})}


#: What ``total_params`` counts in this backend (a compare across backends states it).
TORCH_PARAMS_CONVENTION = ("PyTorch: parameters only (model.parameters()); buffers such as batch-norm running "
                           "statistics apart")


class ComputeParams(ProfilerFunction):
    """Total and trainable parameters; a parameter shared by several modules counts once."""

    def get_bounded_status_keys(self):
        return TotalParams, TrainableParams

    def __call__(self, model: torch.nn.Module) -> dict:
        from deeplite_like.backends.torch.params import parameter_stats

        stats = parameter_stats(model)
        return {TotalParams.NAME: Detailed(stats.total_params, {"non_trainable": stats.non_trainable_params,
                                                                "buffers": stats.buffer_count,
                                                                "convention": TORCH_PARAMS_CONVENTION}),
                TrainableParams.NAME: stats.trainable_params}


class ComputeSize(ProfilerFunction):
    """Bytes of the parameters at their real dtypes; buffers are reported apart in the details."""

    def get_bounded_status_keys(self):
        return (ModelSize,)

    def __call__(self, model: torch.nn.Module) -> Detailed:
        from deeplite_like.backends.torch.params import parameter_stats

        stats = parameter_stats(model)
        return Detailed(stats.param_bytes, {"buffers": ModelSize(stats.buffer_bytes),
                                            **{f"{dtype} params": ModelSize(n) for dtype, n in stats.by_dtype.items()}})


class ComputeMemory(ProfilerFunction):
    """Peak live activation bytes of one forward, and the footprint: parameters + buffers + peak.

    ``include_weights=False`` (deeplite-profiler's option) leaves parameters and buffers out of
    the footprint: it is then the peak activation memory alone.
    """

    def get_bounded_status_keys(self):
        return PeakActivationMemory, MemoryFootprint

    def __call__(self, model: torch.nn.Module, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, meta: bool = False, mode: str = "eval",
                 include_weights: bool = True) -> dict:
        from deeplite_like.backends.torch.params import parameter_stats

        seen, batch = _observed(model, data_splits, forward_pass, split, batch_size, meta, mode, memory=True)
        memory = seen.memory
        stats = parameter_stats(model)
        peak = int(memory.peak_bytes)
        param_bytes, buffer_bytes = (stats.param_bytes, stats.buffer_bytes) if include_weights else (0, 0)
        footprint = param_bytes + buffer_bytes + peak
        return {PeakActivationMemory.NAME: Detailed(peak, {"batch_size": batch,
                                                           "per_sample": PeakActivationMemory(peak // batch),
                                                           "inputs": PeakActivationMemory(memory.input_bytes),
                                                           "outputs": PeakActivationMemory(memory.output_bytes),
                                                           "peak_at": memory.peak_at}),
                MemoryFootprint.NAME: Detailed(footprint, {"batch_size": batch,
                                                           "params": ModelSize(param_bytes),
                                                           "buffers": ModelSize(buffer_bytes),
                                                           "peak_activations": PeakActivationMemory(peak),
                                                           "include_weights": include_weights})}


def compiled_code_possible() -> bool:
    """Whether ``torch.compile`` code may run (TorchDynamo is loaded): then a first call may compile."""
    return "torch._dynamo" in sys.modules


class ComputeExecutionTime(ProfilerFunction):
    """Median forward time of one batch and the throughput it implies (``backends/torch/timing.py``).

    ``num_threads`` defaults to 1 (``deeplite_like.threads.DEFAULT_NUM_THREADS``, for stability);
    ``None`` keeps torch's thread count, ``"auto"`` lets the timing pick. Warm-up: none when the
    model has just run the same inputs for real, in eval mode, in this status computation (the
    observation that MACs and memory read: its kernels, caches and allocations are those the
    timed forwards use), on its own device, and no compiled code can be running
    (``torch._dynamo`` not loaded: a compiled function's first plain call would compile);
    otherwise ``measure_execution_time``'s warm-up. Details: the spread
    (``iqr``, ``q1``, ``q3``), ``forwards`` (every forward run, ``warmup_forwards`` of them
    untimed), ``num_threads`` and ``threads_reason``, and ``spread_warning`` (``''``, or why the
    time may be noise and what to do).
    """

    def get_bounded_status_keys(self):
        return ExecutionTime, Throughput

    def __call__(self, model: torch.nn.Module, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, device: Any = None,
                 min_run_time: float = 0.2, num_threads: int | str | None = DEFAULT_NUM_THREADS) -> dict:
        from deeplite_like.backends.torch.state import model_device
        from deeplite_like.backends.torch.timing import measure_execution_time
        from deeplite_like.device import Device

        if model_device(model).type == "meta" or (device is not None and Device.parse(device).kind == "meta"):
            return not_measured(META_NOT_TIMED, batch_size=batch_size, device="meta")
        taken = take_inputs(data_splits, forward_pass, split, batch_size, device=model_device(model))
        warm = (noted(("torch warm", id(model), split, batch_size)) and not compiled_code_possible()
                and (device is None or Device.parse(device) == Device.parse(str(model_device(model)))))
        with inference_mode_of(model, "eval"), explained_failures(model, taken):
            timing = measure_execution_time(model, taken.args, taken.kwargs, device=device, min_run_time=min_run_time,
                                            num_threads=num_threads, **({"warmup": 0} if warm else {}))
        return timing_values(timing)


class ComputeLayerwiseSummary(ProfilerFunction):
    """One row per module: type, input and output shapes, params, MACs, FLOPs, activation bytes, share."""

    def get_bounded_status_keys(self):
        return (LayerwiseSummary,)

    def __call__(self, model: torch.nn.Module, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, meta: bool = False, mode: str = "eval"):
        from deeplite_like.backends.torch.layers import SCRIPT_NO_LAYERS, layer_table

        if isinstance(model, torch.jit.ScriptModule):
            raise TypeError(f"layerwise_summary: {type(model).__name__} is a TorchScript module; {SCRIPT_NO_LAYERS}")
        seen, _ = _observed(model, data_splits, forward_pass, split, batch_size, meta, mode, layers=True)
        return layer_table(model, seen)


ComputeFlops = ComputeComplexity  # deeplite-profiler's name (its TensorFlow backend)

DEFAULT_FUNCTIONS = (ComputeComplexity, ComputeParams, ComputeSize, ComputeMemory, ComputeExecutionTime,
                     ComputeLayerwiseSummary)
