"""``KerasProfiler`` and its built-in ``ProfilerFunction``s (the same keys as the PyTorch backend's),
and the evaluation of a Keras classifier (``accuracy``, ``topk_accuracy``, deeplite's ``get_*``).

Each function takes the model input from a data split through the profiler's ``ForwardPass``
(see ``inputs.py`` for how ``(args, kwargs)`` become Keras' one input structure) and leaves
the model as it found it. Runs use ``training=False`` by default (``mode='train'`` for
training-mode behaviour; moving statistics updated by it are restored), so batch-norm
statistics are never changed by profiling. Accuracies are percentages (0-100) of class scores
read from the model's output (``evaluate`` says how).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Callable

import numpy as np

from deeplite_like.errors import caller, check_profiler_options
from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.counting.engine import count_ops, observe, warn_if_untracked
from deeplite_like.backends.keras.inputs import add_batch_axis, as_model_input, call_model, check_mode, model_inputs
from deeplite_like.backends.keras.latency import measure_execution_time, tensorflow_device, unmeasured_reason
from deeplite_like.backends.keras.memory import peak_activation_memory
from deeplite_like.backends.keras.params import layer_table, parameter_stats
from deeplite_like.backends.keras.state import preserved_model_state
from deeplite_like.backends.keras.tensors import normalise_splits, prepare_inputs, to_backend
from deeplite_like.functions import (ComplexityOptions, EvaluationFunction, ProfilerFunction, as_tuple, complexity_values,
                                     mean_loss, observed, sharing, transformed_batches)
from deeplite_like.data import ForwardPass, Inputs, as_forward_pass
from deeplite_like.device import Device
from deeplite_like.data.loaders import carried_forward_pass
from deeplite_like.metrics import (ExecutionTime, Flops, LayerwiseSummary, Macs, MemoryFootprint, ModelSize,
                                   PeakActivationMemory, Throughput, TotalParams, TrainableParams, parse_topk_names)
from deeplite_like.profiler import Profiler
from deeplite_like.metrics.status_keys import Detailed
from deeplite_like.timing import META_NOT_TIMED, check_num_threads, not_measured, timing_values

keras = import_keras()

__all__ = ["ComputeComplexity", "ComputeExecutionTime", "ComputeFlops", "ComputeLayerwiseSummary", "ComputeMemory",
           "ComputeParams", "ComputeSize", "DEFAULT_FUNCTIONS", "EvalLossFunction", "KerasEvaluationFunction",
           "KerasPeakActivationMemory", "KerasProfiler", "TFProfiler", "accuracy", "evaluate", "get_accuracy",
           "get_missclass", "get_topk", "topk_accuracy"]


class KerasProfiler(Profiler):
    """Profiles a Keras 3 model (TensorFlow or torch backend, read from ``keras.config.backend()``).

    Args:
        model: a ``keras.Model`` (or layer); it is never modified (trainable flags, weights and
            compiled state are left as found).
        data_splits: split name -> batches: a batched ``tf.data.Dataset``, a
            ``keras.utils.PyDataset``, a list of ``(x, y)`` batches, a generator function, or
            whole arrays as a tuple ``(x, y)`` / a single array (served in batches of
            ``array_batch_size``; see ``tensors.normalise_splits``).
        name: shown in reports.
        forward_pass: which parts of a batch are the model's inputs (default: the one carried by
            splits from ``enable_forward_pass_data_splits``, else ``x`` of ``(x, y)``).
        register_defaults: register every built-in ``Compute*`` function (default ``True``).
        array_batch_size: batch size of whole-array splits (default 32, as Keras' ``fit``).

    Options of ``compute_network_status`` (the PyTorch backend's names): ``batch_size``
    (default 1), ``split``, ``mode`` (``'eval'``: ``training=False``), ``method`` (counting
    method of ``count_ops``), ``causal_half``, ``device``, ``min_run_time``, ``num_threads``,
    ``include_weights`` (default ``True``: the memory footprint includes the weights and state).
    """

    backend_name = "keras"

    def __init__(self, model: Any, data_splits: Mapping[str, Any] | None = None, name: str = "model",
                 forward_pass: ForwardPass | None = None, register_defaults: bool = True,
                 array_batch_size: int = 32) -> None:
        if not isinstance(model, keras.layers.Layer):
            raise TypeError(f"KerasProfiler needs a Keras 3 model (keras.Model or keras.layers.Layer), got "
                            f"{type(model).__module__}.{type(model).__qualname__}; for a torch.nn.Module use "
                            "TorchProfiler, or deeplite_like.profiler_for(model, ...) to pick the backend")
        super().__init__(model, normalise_splits(data_splits, array_batch_size), name)
        self.array_batch_size = array_batch_size
        # splits from enable_forward_pass_data_splits carry their ForwardPass (deeplite-profiler's way)
        self.forward_pass = as_forward_pass(forward_pass or carried_forward_pass(data_splits), "KerasProfiler")
        self.keras_backend = keras.config.backend()
        if register_defaults:
            for function in DEFAULT_FUNCTIONS:
                self.register_default_function(function())

    @classmethod
    def from_inputs(cls, model: Any, *example: Any, name: str = "model", **kwargs: Any) -> "KerasProfiler":
        """A profiler whose only split, ``'test'``, is one batch of the given example input(s).

        Several example inputs are the model's several inputs (``model([a, b])``); one dict is
        the model's named inputs, passed as one structure (``model({"a": x, "b": y})``).
        """
        if not example:
            raise ValueError("from_inputs needs at least one example input (an array or tensor)")
        batch = example[0] if len(example) == 1 else tuple(example)
        if len(example) > 1:
            forward_pass = ForwardPass(inputs=tuple(range(len(example))))
        elif isinstance(batch, Mapping):
            forward_pass = ForwardPass(extract=lambda b: Inputs(args=(b,)))  # the dict is the one input
        else:
            forward_pass = ForwardPass(extract=lambda b: b)
        return cls(model, {"test": [batch]}, name=name, forward_pass=forward_pass, **kwargs)

    def _post_clone(self, original: "KerasProfiler") -> None:
        """A clone given new whole-array splits serves them in batches too."""
        self.data_splits = normalise_splits(self.data_splits, self.array_batch_size)

    def _check_options(self, kwargs: Mapping[str, Any]) -> None:
        check_profiler_options(kwargs, caller("compute_network_status"))
        check_num_threads(kwargs.get("num_threads"))
        if kwargs.get("device") is None:
            return
        if self.keras_backend == "torch":
            from deeplite_like.backends.torch.inputs import checked_device

            checked_device(kwargs["device"])
        elif self.keras_backend == "tensorflow":
            tensorflow_device(kwargs["device"])

    def context(self) -> dict[str, Any]:
        return {**super().context(), "forward_pass": self.forward_pass}


TFProfiler = KerasProfiler  # deeplite-profiler's name for its TensorFlow Keras profiler


# -- the built-in functions ----------------------------------------------------------------------
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
    (``deeplite_like.functions``) by MACs/FLOPs, the layer table and, on Keras' torch backend, peak
    memory (shared, it measures memory whoever asks first); the model is left as found."""
    def make() -> Any:
        given = model_inputs(data_splits, forward_pass, split, batch_size, model)
        inputs, batch = prepare_inputs(model, given, None, keras)
        return observe(model, inputs, batch, training=training, causal_half=causal_half,
                       memory=(memory or sharing()) and keras.config.backend() == "torch")

    return observed(("keras", id(model), split, batch_size, bool(training), bool(causal_half)), make)


class ComputeComplexity(ComplexityOptions, ProfilerFunction):
    """MACs and FLOPs of one batch, counted per Keras layer / operation (see ``count_ops``).

    ``ComputeComplexity(num_bytes=4, export=False)``: deeplite-profiler's options are accepted
    (``deeplite_like.functions``). ``ComputeFlops`` is this class under deeplite's
    TensorFlow name.
    """

    def get_bounded_status_keys(self):
        return Macs, Flops

    def __call__(self, model: keras.Model, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, method: str = "analytic", causal_half: bool = False,
                 mode: str = "eval", backward: bool = False) -> dict:
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
        details = {"batch_size": counted.batch_size or 1, "method": method, "untracked": dict(counted.untracked)}
        return complexity_values(counted, details)


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
                    "peak_at": memory.peak_at, "method": memory.method, "opaque_ops": list(memory.opaque_ops),
                    **({"program_bytes": dict(memory.program_bytes)} if memory.program_bytes else {})}),
                MemoryFootprint.NAME: Detailed(footprint, {"batch_size": memory.batch_size,
                                                           "param_bytes": param_bytes,
                                                           "buffer_bytes": buffer_bytes,
                                                           "peak_activation_bytes": peak,
                                                           "include_weights": include_weights})}


class ComputeExecutionTime(ProfilerFunction):
    """Median time of one compiled forward of one batch and the throughput it implies.

    ``num_threads`` defaults to ``None``: TensorFlow's own thread count, which cannot change once
    its runtime started (``backends/keras/latency.py``); details as on PyTorch (``forwards``,
    ``q1_s``, ``q3_s``, ``threads_reason``, ``spread_warning``).
    """

    def get_bounded_status_keys(self):
        return ExecutionTime, Throughput

    def __call__(self, model: keras.Model, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, device: Any = None, min_run_time: float = 0.2,
                 num_threads: int | str | None = None) -> dict:
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
        return layer_table(model, _observed(model, data_splits, forward_pass, split, batch_size, check_mode(mode),
                                            causal_half))


ComputeFlops = ComputeComplexity  # deeplite-profiler's name (its TensorFlow backend)

DEFAULT_FUNCTIONS = (ComputeComplexity, ComputeParams, ComputeSize, ComputeMemory, ComputeExecutionTime,
                     ComputeLayerwiseSummary)


# -- accuracy of a classifier --------------------------------------------------------------------
class _PairForwardPass:
    """Default binding: a batch is ``(inputs, targets)`` (or ``(inputs, targets, sample_weights)``)."""

    def _check(self, batch: Any) -> tuple:
        if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
            raise TypeError(
                f"expected (inputs, targets) batches, got {type(batch).__name__}"
                + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else "")
                + "; pass forward_pass=ForwardPass(inputs=..., targets=...)")
        return tuple(batch)

    def __call__(self, batch: Any) -> tuple[tuple, dict]:
        return (self._check(batch)[0],), {}

    def targets(self, batch: Any) -> Any:
        return self._check(batch)[1]


def _numpy(x: Any) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(x))


def _scores(output: Any) -> np.ndarray:
    if isinstance(output, Mapping) and "logits" in output:
        output = output["logits"]
    if isinstance(output, (tuple, list, Mapping)):
        raise TypeError(f"cannot read class scores from a model output of type {type(output).__name__}; the model "
                        "must return one tensor of class scores (or a dict with 'logits')")
    return _numpy(output)


def correct_counts(scores: np.ndarray, targets: np.ndarray, ks: set[int]) -> tuple[dict[int, int], int]:
    """Numbers of samples whose target is among the ``k`` highest scores (class axis last), and the count."""
    if scores.ndim < 2:
        raise ValueError(f"class scores must have shape (N, ..., C), got {scores.shape}")
    if (np.issubdtype(targets.dtype, np.floating) and targets.ndim == scores.ndim
            and targets.shape[:-1] == scores.shape[:-1] and targets.shape[-1] > 1):
        # one-hot or probability rows: their argmax is the class, whatever their width (Keras'
        # categorical_accuracy compares the two argmaxes the same way)
        targets = targets.argmax(axis=-1)
    expected = scores.shape[:-1]
    if targets.shape == (*expected, 1):
        targets = targets[..., 0]
    if targets.shape != expected:
        raise ValueError(f"targets of shape {targets.shape} do not match class scores of shape {scores.shape}: "
                         f"expected class indices of shape {expected} (or {(*expected, 1)}) or one-hot rows "
                         "shaped like the scores")
    classes = scores.shape[-1]
    kmax = max(ks)
    if kmax > classes:
        raise ValueError(f"top-{kmax} accuracy needs at least {kmax} classes; the model scores {classes}")
    # Highest first; a stable sort keeps the lower class index first among equal scores.
    ranked = np.argsort(-scores, axis=-1, kind="stable")[..., :kmax]
    hits = ranked == targets.astype(np.int64)[..., None]
    counts = {k: int(hits[..., :k].any(axis=-1).sum()) for k in ks}
    return counts, int(targets.size)


def evaluate(model: keras.layers.Layer, data_loader: Iterable[Any], metrics: Iterable[str] = ("top1", "top5"),
             forward_pass: Any = None) -> dict[str, float]:
    """Top-k accuracies of ``model`` over ``data_loader`` in one pass, in percent (0-100).

    Batches are turned into the model input and targets by a forward-pass object
    (``ForwardPass``: ``forward_pass(batch) -> (args, kwargs)`` and
    ``forward_pass.targets(batch)``); without one, batches are ``(inputs, targets)`` pairs, as
    Keras' ``fit`` takes them. Outputs are class scores with the class on the **last** axis
    (``(N, C)`` or ``(N, ..., C)``, the Keras convention of ``sparse_categorical_accuracy``);
    targets are class indices shaped like the scores without that axis (a trailing axis of size
    1, ``(N, 1)``, is accepted too), or one-hot / probability rows (their argmax is the class,
    as in Keras' ``categorical_accuracy``). A batch that is one sample without its batch axis
    (an ``(8, 8, 3)`` image for a model of input ``(None, 8, 8, 3)``) gets one, as
    deeplite-profiler's TensorFlow helpers did; so do its targets. The model runs with
    ``training=False``; scores and targets are compared in NumPy.
    """
    if not isinstance(model, keras.layers.Layer):
        raise TypeError(f"evaluate expects a Keras model, got {type(model).__name__}")
    wanted = parse_topk_names(metrics)
    binding = forward_pass if forward_pass is not None else _PairForwardPass()
    ks = set(wanted.values())
    correct = dict.fromkeys(ks, 0)
    total = 0
    with preserved_model_state(model):
        for batch in data_loader:
            args, kwargs, unbatched = add_batch_axis(model, *binding(batch))
            scores = _scores(call_model(model, to_backend(as_model_input(args, kwargs))))
            targets = _numpy(binding.targets(batch))
            if unbatched and targets.ndim == scores.ndim - 1:  # (one sample's targets: their batch axis too)
                targets = targets[None]
            counts, n = correct_counts(scores, targets, ks)
            for k in ks:
                correct[k] += counts[k]
            total += n
    if total == 0:
        raise ValueError("the data loader yielded no samples to evaluate")
    return {name: 100.0 * correct[k] / total for name, k in wanted.items()}


def topk_accuracy(model: keras.layers.Layer, data_loader: Iterable[Any], k: int = 5,
                  forward_pass: Any = None) -> float:
    """Percentage (0-100) of samples whose target is among the model's ``k`` highest scores."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    return evaluate(model, data_loader, metrics=(f"top{k}",), forward_pass=forward_pass)[f"top{k}"]


def accuracy(model: keras.layers.Layer, data_loader: Iterable[Any], forward_pass: Any = None) -> float:
    """Top-1 accuracy in percent (0-100)."""
    return topk_accuracy(model, data_loader, k=1, forward_pass=forward_pass)


# -- deeplite-profiler's evaluation functions ----------------------------------------------------
class KerasEvaluationFunction(EvaluationFunction):
    """Base of deeplite-profiler's Keras evaluation functions: parses ``device`` and applies ``transform``.

    ``get_accuracy``, ``get_missclass``, ``get_topk`` and ``EvalLossFunction`` are built on
    ``evaluate``. ``device`` is accepted for deeplite's signature and must name a device Keras
    can see (TensorFlow places the computation itself); ``transform(x, y) -> (x, y)`` is applied
    to each ``(inputs, targets)`` batch first.
    """

    def __call__(self, model: Any, data_loader: Iterable[Any], device: Any = None,
                 transform: Callable | None = None) -> Any:
        Device.parse(device)  # an unknown name fails here, with the names that work
        return self._compute_inference(model, transformed_batches(data_loader, transform))

    def _compute_inference(self, model: Any, data_loader: Iterable[Any]) -> Any:
        raise NotImplementedError


class _GetAccuracy(KerasEvaluationFunction):
    """Top-1 accuracy in percent of samples."""

    def _compute_inference(self, model: Any, data_loader: Iterable[Any]) -> float:
        return evaluate(model, data_loader, metrics=("top1",))["top1"]


class _GetMissclass(KerasEvaluationFunction):
    """Misclassification rate: 100 - top-1 accuracy, in percent of samples."""

    def _compute_inference(self, model: Any, data_loader: Iterable[Any]) -> float:
        return 100.0 - evaluate(model, data_loader, metrics=("top1",))["top1"]


class _GetTopk(KerasEvaluationFunction):
    """``{'top-1': %, 'top-5': %}`` for ``topk=(1, 5)`` (deeplite's key names)."""

    def __call__(self, model: Any, data_loader: Iterable[Any], device: Any = None, topk: Any = (1, 5),
                 transform: Callable | None = None) -> dict[str, float]:
        ks = as_tuple(topk)
        if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise ValueError(f"topk must be a positive int or a tuple of them, got {topk!r}")
        Device.parse(device)
        result = evaluate(model, transformed_batches(data_loader, transform), metrics=tuple(f"top{k}" for k in ks))
        return {f"top-{k}": result[f"top{k}"] for k in ks}


class EvalLossFunction(KerasEvaluationFunction):
    """Mean over batches of ``loss_fn(model, batch)`` (a scalar, or a dict of them, summed)."""

    def __init__(self, loss_fn: Callable[[Any, Any], Any]) -> None:
        if not callable(loss_fn):
            raise TypeError(f"EvalLossFunction needs a callable loss_fn(model, batch), got {loss_fn!r}")
        self.loss_fn = loss_fn

    def __call__(self, model: Any, data_loader: Iterable[Any], device: Any = None,
                 transform: Callable | None = None) -> float:
        Device.parse(device)
        with preserved_model_state(model):
            losses = (self.loss_fn(model, transform(batch) if transform is not None else batch) for batch in data_loader)
            return mean_loss(losses, lambda loss: float(np.asarray(keras.ops.convert_to_numpy(loss))))


get_accuracy = _GetAccuracy()
get_missclass = _GetMissclass()
get_topk = _GetTopk()
