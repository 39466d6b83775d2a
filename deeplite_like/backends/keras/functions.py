"""The built-in ``ProfilerFunction``s of the Keras backend (the same keys as the PyTorch backend's).

Each function takes the model input from a data split through the profiler's ``ForwardPass``
(see ``inputs.py`` for how ``(args, kwargs)`` become Keras' one input structure) and leaves
the model as it found it. Runs use ``training=False`` by default (``mode='train'`` for
training-mode behaviour; moving statistics updated by it are restored), so batch-norm
statistics are never changed by profiling.
"""
from __future__ import annotations

from typing import Any, Mapping

from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.inputs import check_mode, model_inputs
from deeplite_like.backends.keras.measured_backends import unmeasured_reason
from deeplite_like.complexity_options import ComplexityOptions
from deeplite_like.data import ForwardPass
from deeplite_like.functions import ProfilerFunction
from deeplite_like.metrics import (ExecutionTime, Flops, LayerwiseSummary, Macs, MemoryFootprint, ModelSize,
                                   PeakActivationMemory, Throughput, TotalParams, TrainableParams)
from deeplite_like.observations import observed, sharing
from deeplite_like.status import Detailed
from deeplite_like.timing_values import META_NOT_TIMED, not_measured, timing_values

keras = import_keras()

__all__ = ["ComputeComplexity", "ComputeFlops", "ComputeExecutionTime", "ComputeLayerwiseSummary", "ComputeMemory", "ComputeParams",
           "ComputeSize", "DEFAULT_FUNCTIONS", "KerasPeakActivationMemory"]


class KerasPeakActivationMemory(PeakActivationMemory):
    """``peak_activation_memory`` as the Keras backend measures it (same key, its own description)."""

    DESCRIPTION = ("Largest total of live tensor bytes during one forward pass of one batch, inputs and outputs "
                   "included, weights excluded. On TensorFlow: a tensor-lifetime simulation of the traced "
                   "tf.function graph, which is what a graph-mode run holds (each op's outputs live from the op "
                   "to their last consumer); Grappler fusions may lower the real peak. On Keras' torch backend: "
                   "allocations of the eager forward, tracked as in the PyTorch backend.")


def _observed(model: Any, data_splits: Mapping[str, Any], forward_pass: ForwardPass, split: str | None,
              batch_size: int, training: bool, causal_half: bool = False, memory: bool = False) -> Any:
    """One recorded forward of the split's input (``counting.engine.observe``), shared in a status computation
    (``deeplite_like.observations``) by MACs/FLOPs, the layer table and, on Keras' torch backend, peak
    memory (shared, it measures memory whoever asks first); the model is left as found."""
    from deeplite_like.backends.keras.counting.engine import observe
    from deeplite_like.backends.keras.counting.inputs import prepare_inputs

    def make() -> Any:
        given = model_inputs(data_splits, forward_pass, split, batch_size, model)
        inputs, batch = prepare_inputs(model, given, None, keras)
        return observe(model, inputs, batch, training=training, causal_half=causal_half,
                       memory=(memory or sharing()) and keras.config.backend() == "torch")

    return observed(("keras", id(model), split, batch_size, bool(training), bool(causal_half)), make)


class ComputeComplexity(ComplexityOptions, ProfilerFunction):
    """MACs and FLOPs of one batch, counted per Keras layer / operation (see ``count_ops``).

    ``ComputeComplexity(num_bytes=4, export=False)``: deeplite-profiler's options are accepted
    (``deeplite_like.complexity_options``). ``ComputeFlops`` is this class under deeplite's
    TensorFlow name.
    """

    def get_bounded_status_keys(self):
        return Macs, Flops

    def __call__(self, model: keras.Model, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, method: str = "analytic", causal_half: bool = False,
                 mode: str = "eval", backward: bool = False) -> dict:
        from deeplite_like.backends.keras.counting import count_ops
        from deeplite_like.backends.keras.counting.engine import warn_if_untracked

        if backward:
            raise NotImplementedError("the Keras backend counts forward passes only; backward=True is supported by "
                                      "the PyTorch backend")
        training = check_mode(mode)
        if method == "analytic":  # one recorded forward, shared with the layer table (``_observed``)
            counted = _observed(model, data_splits, forward_pass, split, batch_size, training, causal_half).counts
            warn_if_untracked(counted, stacklevel=2)
        else:
            inputs = model_inputs(data_splits, forward_pass, split, batch_size, model)
            counted = count_ops(model, inputs, method=method, training=training, causal_half=causal_half)
        batch = counted.batch_size or 1
        details = {"batch_size": batch, "method": method, "untracked": dict(counted.untracked)}
        return {Macs.NAME: Detailed(counted.macs, {**details, "per_sample": counted.macs / batch}),
                Flops.NAME: Detailed(counted.flops, {**details, "per_sample": counted.flops / batch})}


#: What ``total_params`` counts in this backend (a compare across backends states it).
KERAS_PARAMS_CONVENTION = ("Keras: every weight, as model.count_params() and model.summary() 'Total params' "
                           "(batch-norm moving statistics included, as non-trainable)")


class ComputeParams(ProfilerFunction):
    """Total params as Keras counts them (``model.count_params()``: every weight, shared ones once,
    batch-norm moving statistics included); trainable params; the split in the details.

    Details: ``parameters`` (weights created trainable, frozen ones included: the PyTorch
    convention's figure), ``non_trainable`` (Keras' own: frozen parameters + state),
    ``frozen`` (frozen parameters), ``state`` (moving statistics and other non-trainable state).
    """

    def get_bounded_status_keys(self):
        return TotalParams, TrainableParams

    def __call__(self, model: keras.Model) -> dict:
        from deeplite_like.backends.keras.params import parameter_stats

        stats = parameter_stats(model)
        return {TotalParams.NAME: Detailed(stats.total_params + stats.buffer_count, {
                    "parameters": stats.total_params, "non_trainable": stats.keras_non_trainable,
                    "frozen": stats.non_trainable_params, "state": stats.buffer_count,
                    "convention": KERAS_PARAMS_CONVENTION}),
                TrainableParams.NAME: stats.trainable_params}


class ComputeSize(ProfilerFunction):
    """Bytes of the parameters at each weight's own dtype; state is reported apart in the details."""

    def get_bounded_status_keys(self):
        return (ModelSize,)

    def __call__(self, model: keras.Model) -> Detailed:
        from deeplite_like.backends.keras.params import parameter_stats

        stats = parameter_stats(model)
        return Detailed(stats.param_bytes, {"buffer_bytes": stats.buffer_bytes, "by_dtype": dict(stats.by_dtype)})


class ComputeMemory(ProfilerFunction):
    """Peak live activation bytes of one forward, and the footprint: parameters + state + peak.

    ``include_weights=False`` (deeplite-profiler's option) leaves parameters and state out of
    the footprint: it is then the peak activation memory alone.
    """

    def get_bounded_status_keys(self):
        return KerasPeakActivationMemory, MemoryFootprint

    def __call__(self, model: keras.Model, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, mode: str = "eval",
                 include_weights: bool = True) -> dict:
        from deeplite_like.backends.keras.memory import peak_activation_memory
        from deeplite_like.backends.keras.params import parameter_stats

        training = check_mode(mode)
        reason = unmeasured_reason("memory", keras.config.backend())
        if reason is not None:
            return {key.NAME: Detailed(None, {"not_measured": reason, "batch_size": batch_size})
                    for key in (KerasPeakActivationMemory, MemoryFootprint)}
        if keras.config.backend() == "torch":  # the recorded forward's (shared with MACs and the layer table)
            memory = _observed(model, data_splits, forward_pass, split, batch_size, training, memory=True).memory
        else:  # TensorFlow: a simulation of the traced graph, no forward to share
            memory = peak_activation_memory(model, model_inputs(data_splits, forward_pass, split, batch_size, model),
                                            training=training)
        stats = parameter_stats(model)
        peak = int(memory.peak_bytes)
        param_bytes, buffer_bytes = (stats.param_bytes, stats.buffer_bytes) if include_weights else (0, 0)
        footprint = param_bytes + buffer_bytes + peak
        return {KerasPeakActivationMemory.NAME: Detailed(peak, {
                    "batch_size": memory.batch_size, "per_sample": peak / memory.batch_size,
                    "input_bytes": memory.input_bytes, "output_bytes": memory.output_bytes,
                    "peak_at": memory.peak_at, "method": memory.method, "opaque_ops": list(memory.opaque_ops)}),
                MemoryFootprint.NAME: Detailed(footprint, {"batch_size": memory.batch_size,
                                                           "param_bytes": param_bytes,
                                                           "buffer_bytes": buffer_bytes,
                                                           "peak_activation_bytes": peak,
                                                           "include_weights": include_weights})}


class ComputeExecutionTime(ProfilerFunction):
    """Median time of one compiled forward of one batch and the throughput it implies.

    ``num_threads`` defaults to ``None``: TensorFlow's own thread count, which cannot change once
    its runtime started (``backends/keras/timing.py``); details as on PyTorch (``forwards``,
    ``q1_s``, ``q3_s``, ``threads_reason``, ``spread_warning``).
    """

    def get_bounded_status_keys(self):
        return ExecutionTime, Throughput

    def __call__(self, model: keras.Model, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, device: Any = None, min_run_time: float = 0.2,
                 num_threads: int | str | None = None) -> dict:
        from deeplite_like.backends.keras.timing import measure_execution_time
        from deeplite_like.device import Device

        if device is not None and Device.parse(device).kind == "meta":
            return not_measured(META_NOT_TIMED, batch_size=batch_size, device="meta")
        reason = unmeasured_reason("execution time", keras.config.backend())
        if reason is not None:
            return not_measured(reason, batch_size=batch_size)
        inputs = model_inputs(data_splits, forward_pass, split, batch_size, model)
        timing = measure_execution_time(model, inputs, device=device, min_run_time=min_run_time,
                                        num_threads=num_threads)
        return timing_values(timing, compiled=timing.compiled)


class ComputeLayerwiseSummary(ProfilerFunction):
    """One row per layer: type, input and output shapes, params, MACs, FLOPs, output bytes, share."""

    def get_bounded_status_keys(self):
        return (LayerwiseSummary,)

    def __call__(self, model: keras.Model, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, causal_half: bool = False, mode: str = "eval"):
        from deeplite_like.backends.keras.layers import layer_table

        return layer_table(model, _observed(model, data_splits, forward_pass, split, batch_size, check_mode(mode),
                                            causal_half))


ComputeFlops = ComputeComplexity  # deeplite-profiler's name (its TensorFlow backend)

DEFAULT_FUNCTIONS = (ComputeComplexity, ComputeParams, ComputeSize, ComputeMemory, ComputeExecutionTime,
                     ComputeLayerwiseSummary)
