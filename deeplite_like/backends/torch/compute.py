"""The PyTorch backend's profiler: ``TorchProfiler``, its ``Compute*`` functions and its evaluation functions.

``TorchProfiler`` is the core ``Profiler`` with every built-in metric of the backend. Each
``Compute*`` function takes its model inputs from a data split through the profiler's
``ForwardPass`` and leaves the model as it found it. Counting and memory runs use the model in
eval mode by default (``mode='train'`` to measure training-mode behaviour) so that batch-norm
statistics are never updated by profiling.

Evaluation: ``accuracy`` / ``topk_accuracy`` (``evaluate``): classification accuracy over a data
loader, in percent, the model left as found.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Protocol

import torch
from torch import nn
from torch.utils import _pytree as pytree

from deeplite_like.backends.torch.counting.engine import count_ops, observe, warn_if_untracked
from deeplite_like.backends.torch.counting.registry import CountOptions
from deeplite_like.backends.torch.inputs import checked_device, explained_failures, inference_mode_of, take_inputs
from deeplite_like.backends.torch.latency import measure_execution_time
from deeplite_like.backends.torch.params import SCRIPT_NO_LAYERS, layer_table, parameter_stats
from deeplite_like.backends.torch.state import model_device, preserved_model_state
from deeplite_like.backends.torch.tensors import batch_size_of
from deeplite_like.data import ForwardPass, as_forward_pass
from deeplite_like.data.loaders import carried_forward_pass
from deeplite_like.device import Device
from deeplite_like.errors import caller, check_profiler_options
from deeplite_like.functions import (ComplexityOptions, EvaluationFunction, ProfilerFunction, as_tuple, mean_loss,
                                     note, noted, observed, sharing, transformed_batches)
from deeplite_like.metrics import (ExecutionTime, Flops, LayerwiseSummary, Macs, MemoryFootprint, ModelSize,
                                   PeakActivationMemory, Throughput, TotalParams, TrainableParams, parse_topk_names)
from deeplite_like.metrics.status_keys import Detailed
from deeplite_like.profiler import Profiler
from deeplite_like.timing import DEFAULT_NUM_THREADS, META_NOT_TIMED, check_num_threads, not_measured, timing_values


class TorchProfiler(Profiler):
    """Profiles a ``torch.nn.Module`` on its data splits.

    Args:
        model: the module; it is never modified (mode, device, dtype, hooks, grads are restored).
        data_splits: split name -> iterable of batches (a ``DataLoader``, a list of ``(x, y)``).
        name: shown in reports.
        forward_pass: which parts of a batch are the model's inputs (default: the one carried by
            splits from ``enable_forward_pass_data_splits``, else ``x`` of ``(x, y)``).
        register_defaults: register every built-in ``Compute*`` function (default ``True``).

    A TorchScript module (``torch.jit.script``/``trace``) is profiled like any module, except
    that it has no ``layerwise_summary`` (it takes no forward hooks): that key is not
    registered, and ``limits`` says why.

    Options of ``compute_network_status``: ``batch_size`` (default 1), ``split``, ``meta``,
    ``backward``, ``loss_fn``, ``causal_half``, ``mode``, ``device``, ``min_run_time``,
    ``num_threads`` (threads while timing: default 1, the stablest; ``None`` keeps torch's count;
    ``"auto"``: see ``backends/torch/timing.py``), ``include_weights`` (default ``True``: the
    memory footprint includes the parameters and buffers).
    """

    backend_name = "torch"

    def __init__(self, model: torch.nn.Module, data_splits: Mapping[str, Any] | None = None, name: str = "model",
                 forward_pass: ForwardPass | None = None, register_defaults: bool = True) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"TorchProfiler needs a torch.nn.Module, got {type(model).__qualname__}")
        super().__init__(model, data_splits, name)
        # splits from enable_forward_pass_data_splits carry their ForwardPass (deeplite-profiler's way)
        self.forward_pass = as_forward_pass(forward_pass or carried_forward_pass(data_splits), "TorchProfiler")
        if isinstance(model, torch.jit.ScriptModule):
            self.limits["layerwise_summary"] = SCRIPT_NO_LAYERS
        if register_defaults:
            for function in DEFAULT_FUNCTIONS:
                if not all(key.NAME in self.limits for key in function().get_bounded_status_keys()):
                    self.register_default_function(function())

    def _check_options(self, kwargs: Mapping[str, Any]) -> None:
        check_profiler_options(kwargs, caller("compute_network_status"))
        if kwargs.get("device") is not None:
            checked_device(kwargs["device"])
        check_num_threads(kwargs.get("num_threads"))

    @classmethod
    def from_inputs(cls, model: torch.nn.Module, *example: Any, name: str = "model", **kwargs: Any) -> "TorchProfiler":
        """A profiler whose only split, ``'test'``, is one batch of the given example input(s)."""
        if not example:
            raise ValueError("from_inputs needs at least one example input tensor")
        batch = example[0] if len(example) == 1 else tuple(example)
        forward_pass = ForwardPass(inputs=tuple(range(len(example)))) if len(example) > 1 else ForwardPass(
            extract=lambda b: b)
        return cls(model, {"test": [batch]}, name=name, forward_pass=forward_pass, **kwargs)

    def context(self) -> dict[str, Any]:
        return {**super().context(), "forward_pass": self.forward_pass}


# -- the built-in functions (``Compute*``) --------------------------------------------------------
def _observed(model: torch.nn.Module, data_splits: Mapping[str, Any], forward_pass: ForwardPass, split: str | None,
              batch_size: int, meta: bool, mode: str, causal_half: bool = False, memory: bool = False,
              layers: bool = False) -> tuple[Any, int]:
    """``(observation, batch size)`` of one forward on the split's inputs (shared in ``shared_observations``).

    Shared, the observation has counts, memory and layer facts whoever asks first; alone, only
    what was asked for.

    One observation, many figures: MACs/FLOPs, peak memory and the per-layer table are read from
    one instrumented forward (``counting.engine.observe``) under ``torch.no_grad()``. Inside
    ``deeplite_like.functions.shared_observations()`` (the profiler enters it for each
    ``compute_network_status`` and ``compare``) the first of these functions to run makes the
    observation with everything in it, and the others, asking for the same inputs and options, read
    the same one: the default metrics run the model once instrumented, plus the timing runs
    (``benchmarks/bench_status_cost.py``).
    """

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
    (``deeplite_like.functions``). ``ComputeFlops`` is this class under deeplite's
    TensorFlow name.
    """

    def get_bounded_status_keys(self):
        return Macs, Flops

    def __call__(self, model: torch.nn.Module, data_splits: Mapping[str, Any], forward_pass: ForwardPass,
                 batch_size: int = 1, split: str | None = None, meta: bool = False, backward: bool = False,
                 loss_fn: Callable[[Any], torch.Tensor] | None = None, causal_half: bool = False,
                 mode: str = "eval") -> dict:

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

    ``num_threads`` defaults to 1 (``deeplite_like.timing.DEFAULT_NUM_THREADS``, for stability);
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

        if isinstance(model, torch.jit.ScriptModule):
            raise TypeError(f"layerwise_summary: {type(model).__name__} is a TorchScript module; {SCRIPT_NO_LAYERS}")
        seen, _ = _observed(model, data_splits, forward_pass, split, batch_size, meta, mode, layers=True)
        return layer_table(model, seen)


ComputeFlops = ComputeComplexity  # deeplite-profiler's name (its TensorFlow backend)

DEFAULT_FUNCTIONS = (ComputeComplexity, ComputeParams, ComputeSize, ComputeMemory, ComputeExecutionTime,
                     ComputeLayerwiseSummary)





# -- accuracy -------------------------------------------------------------------------------------
class EvalForwardPass(Protocol):
    """What evaluation needs from a forward-pass binding (duck-typed).

    Model inputs come from ``extract_model_inputs(batch)`` when the object has it, else from
    calling it: ``forward_pass(batch) -> (args, kwargs)``.
    """

    def targets(self, batch: Any) -> torch.Tensor: ...


def _model_inputs(binding: Any, batch: Any) -> tuple[tuple, dict]:
    if isinstance(binding, ForwardPass):  # (its extract_model_inputs has deeplite's shape; calling it gives both)
        return binding(batch)
    extract = getattr(binding, "extract_model_inputs", None)
    if extract is None:
        if not callable(binding):
            raise TypeError(
                f"forward_pass {type(binding).__name__} has neither extract_model_inputs(batch) nor "
                "__call__(batch); give it one that returns (args, kwargs)"
            )
        extract = binding
    result = extract(batch)
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], Mapping)):
        raise TypeError(
            f"forward_pass {type(binding).__name__} must return (args, kwargs) for a batch, "
            f"got {type(result).__name__}"
        )
    return tuple(result[0]), dict(result[1])


class _PairForwardPass:
    """Default binding: a batch is ``(inputs, targets)``."""

    def _check(self, batch: Any) -> Sequence:
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise TypeError(
                f"expected (inputs, targets) batches, got {type(batch).__name__}"
                + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else "")
                + "; pass forward_pass=... with extract_model_inputs(batch) and targets(batch)"
            )
        return batch

    def extract_model_inputs(self, batch: Any) -> tuple[tuple, dict]:
        return (self._check(batch)[0],), {}

    def targets(self, batch: Any) -> torch.Tensor:
        return self._check(batch)[1]


def _logits(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, Mapping) and isinstance(output.get("logits"), torch.Tensor):
        return output["logits"]
    if isinstance(getattr(output, "logits", None), torch.Tensor):
        return output.logits
    raise TypeError(
        f"cannot read class scores from a model output of type {type(output).__name__}; the model "
        "must return a tensor (or an object with .logits); wrap it to return the class-score tensor"
    )


def _correct_counts(scores: torch.Tensor, targets: torch.Tensor, ks: set[int]) -> tuple[dict[int, int], int]:
    """Numbers of samples whose target is among the ``k`` highest scores, and the sample count."""
    if scores.dim() < 2:
        raise ValueError(f"class scores must have shape (N, C, ...), got {tuple(scores.shape)}")
    if targets.shape == scores.shape and targets.is_floating_point():
        targets = targets.argmax(dim=1)  # one-hot or probability rows
    expected = scores.shape[:1] + scores.shape[2:]
    if targets.shape != expected:
        raise ValueError(
            f"targets of shape {tuple(targets.shape)} do not match class scores of shape "
            f"{tuple(scores.shape)}: expected class indices of shape {tuple(expected)} or one-hot "
            "rows shaped like the scores"
        )
    classes = scores.shape[1]
    if max(ks) > classes:
        raise ValueError(f"top-{max(ks)} accuracy needs at least {max(ks)} classes; the model scores {classes}")
    ranked = scores.topk(max(ks), dim=1).indices  # (N, kmax, ...)
    hits = ranked == targets.to(ranked.device).long().unsqueeze(1)
    counts = {k: int(hits[:, :k].any(dim=1).sum()) for k in ks}
    return counts, targets.numel()


def evaluate(
    model: nn.Module,
    data_loader: Iterable[Any],
    metrics: Iterable[str] = ("top1", "top5"),
    forward_pass: EvalForwardPass | None = None,
) -> dict[str, float]:
    """Top-k accuracies of ``model`` over ``data_loader`` in one pass, in percent (0-100).

    ``metrics`` are names ``'topK'`` (``'top1'``, ``'top5'``); the result maps each name to
    its accuracy.

    A batch is turned into model inputs and targets by a *forward pass* object with ``targets(batch)
    -> Tensor`` and either ``extract_model_inputs(batch) -> (args, kwargs)`` or ``__call__(batch) ->
    (args, kwargs)`` (``deeplite_like.data.ForwardPass`` is such an object); without one, batches
    are ``(inputs, targets)`` pairs. Outputs are class scores with the class on dimension 1 (``(N,
    C)`` or ``(N, C, ...)``, as ``nn.CrossEntropyLoss`` expects); targets are class indices
    (``(N,)`` or ``(N, ...)``) or one-hot / probability rows shaped like the output. An output
    object with a ``logits`` attribute or key (Hugging Face style) is accepted. The model runs in
    eval mode under ``torch.no_grad()`` on its own device (inputs are moved there); its mode and
    everything else is restored afterwards.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"evaluate expects a torch.nn.Module, got {type(model).__name__}")
    wanted = parse_topk_names(metrics)
    binding = forward_pass if forward_pass is not None else _PairForwardPass()
    device = model_device(model)
    ks = set(wanted.values())
    correct = dict.fromkeys(ks, 0)
    total = 0
    move = lambda x: x.to(device) if isinstance(x, torch.Tensor) else x  # noqa: E731
    with preserved_model_state(model), torch.no_grad():
        model.eval()
        for batch in data_loader:
            args, kwargs = pytree.tree_map(move, _model_inputs(binding, batch))
            scores = _logits(model(*args, **kwargs))
            targets = binding.targets(batch)
            if not isinstance(targets, torch.Tensor):
                if isinstance(targets, (tuple, list, Mapping)) and any(
                        isinstance(t, torch.Tensor) for t in pytree.tree_leaves(targets)):
                    raise TypeError(
                        f"accuracy needs one tensor of targets per batch, got a {type(targets).__name__} "
                        "of tensors; make forward_pass.targets(batch) return the class labels"
                    )
                targets = torch.as_tensor(targets)
            counts, n = _correct_counts(scores, targets, ks)
            for k in ks:
                correct[k] += counts[k]
            total += n
    if total == 0:
        raise ValueError("the data loader yielded no samples to evaluate")
    return {name: 100.0 * correct[k] / total for name, k in wanted.items()}


def topk_accuracy(model: nn.Module, data_loader: Iterable[Any], k: int = 5,
                  forward_pass: EvalForwardPass | None = None) -> float:
    """Percentage (0-100) of samples whose target is among the model's ``k`` highest scores."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    return evaluate(model, data_loader, metrics=(f"top{k}",), forward_pass=forward_pass)[f"top{k}"]


def accuracy(model: nn.Module, data_loader: Iterable[Any], forward_pass: EvalForwardPass | None = None) -> float:
    """Top-1 accuracy in percent (0-100)."""
    return topk_accuracy(model, data_loader, k=1, forward_pass=forward_pass)


# -- deeplite-profiler's evaluation functions -----------------------------------------------------
def _check_device(model: nn.Module, device: Any) -> None:
    if device is None:
        return
    wanted, actual = Device.parse(device), model_device(model)
    if wanted.kind != actual.type:
        raise ValueError(f"evaluation asked for device {wanted} but {type(model).__name__} is on {actual}; the model "
                         f"is not moved for you: call model.to('{wanted}') first, or leave device out")


class TorchEvaluationFunction(EvaluationFunction):
    """Base of the PyTorch evaluation functions: checks the device and applies ``transform``.

    deeplite-profiler's evaluation functions (``get_accuracy``, ``get_missclass``, ``get_topk``,
    ``EvalLossFunction``; percentages in 0-100) are built on ``evaluate`` and differ from deeplite's
    on purpose in two ways: accuracy is the share of *samples* (deeplite averaged per-batch means, so
    a short last batch weighed as much as a full one), and the model is left as found (deeplite moved
    it to the device and left it in eval mode). ``device`` must be where the model already is: move
    the model yourself. ``transform(x, y) -> (x, y)`` is applied to each ``(inputs, targets)`` batch
    first.
    """

    def __call__(self, model: nn.Module, data_loader: Iterable[Any], device: Any = None,
                 transform: Callable | None = None) -> Any:
        _check_device(model, device)
        return self._compute_inference(model, transformed_batches(data_loader, transform))

    def _compute_inference(self, model: nn.Module, data_loader: Iterable[Any]) -> Any:
        raise NotImplementedError


class _GetAccuracy(TorchEvaluationFunction):
    """Top-1 accuracy in percent of samples."""

    def _compute_inference(self, model: nn.Module, data_loader: Iterable[Any]) -> float:
        return evaluate(model, data_loader, metrics=("top1",))["top1"]


class _GetMissclass(TorchEvaluationFunction):
    """Misclassification rate: 100 - top-1 accuracy, in percent of samples."""

    def _compute_inference(self, model: nn.Module, data_loader: Iterable[Any]) -> float:
        return 100.0 - evaluate(model, data_loader, metrics=("top1",))["top1"]


class _GetTopk(TorchEvaluationFunction):
    """``{'top-1': %, 'top-5': %}`` for ``topk=(1, 5)`` (deeplite's key names)."""

    def __call__(self, model: nn.Module, data_loader: Iterable[Any], device: Any = None, topk: Any = (1, 5),
                 transform: Callable | None = None) -> dict[str, float]:
        ks = as_tuple(topk)
        if not ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise ValueError(f"topk must be a positive int or a tuple of them, got {topk!r}")
        _check_device(model, device)
        result = evaluate(model, transformed_batches(data_loader, transform), metrics=tuple(f"top{k}" for k in ks))
        return {f"top-{k}": result[f"top{k}"] for k in ks}


class EvalLossFunction(TorchEvaluationFunction):
    """Mean over batches of ``loss_fn(model, batch)`` (a scalar tensor, or a dict of them, summed).

    Runs in eval mode under ``torch.no_grad()``; ``loss_fn.to_device(device)`` is called first
    when the loss has it and a device is given (deeplite's ``LossFunction``).
    """

    def __init__(self, loss_fn: Callable[[nn.Module, Any], Any]) -> None:
        if not callable(loss_fn):
            raise TypeError(f"EvalLossFunction needs a callable loss_fn(model, batch), got {loss_fn!r}")
        self.loss_fn = loss_fn

    def __call__(self, model: nn.Module, data_loader: Iterable[Any], device: Any = None,
                 transform: Callable | None = None) -> float:
        _check_device(model, device)
        if device is not None and hasattr(self.loss_fn, "to_device"):
            self.loss_fn.to_device(device)
        with preserved_model_state(model), torch.no_grad():
            model.eval()
            losses = (self.loss_fn(model, transform(batch) if transform is not None else batch) for batch in data_loader)
            return mean_loss(losses, float)


get_accuracy = _GetAccuracy()
get_missclass = _GetMissclass()
get_topk = _GetTopk()
