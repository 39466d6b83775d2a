"""PyTorch backend: ``TorchProfiler``, its ``Compute*`` functions, and ``count_ops``.

Names are resolved lazily so that importing one part (e.g. the counting engine) does not
import the others. The package itself imports the counting core with its behaviour under
``torch.distributed`` registered (``distributed/recording.py``, at ``counting/recorder.py``'s hook
point), so that a count meets a DTensor prepared whichever module the caller imported first.

    compute.py          ``TorchProfiler`` and its ``Compute*`` functions, accuracy
    counting/           ``count_ops``: engine, recorder, registry + ``formulas/``, meta
    params.py           parameter counts and the per-layer table
    memory.py           peak activation memory
    latency.py          forward time, per-module time, the timed phases of profiles
    training/           training-step memory, the largest batch that fits
    model_profile.py    ``get_model_profile``'s and ``FlopsProfiler``'s torch side
    distributed/        per-rank counting, collectives, whole-job reports
    inputs.py           the inputs of a run, the tensor adapter; ``tensors.py``: facts about tensors
    kernels.py          which kernels a measured run takes; ``state.py``: the model left as found
"""
from __future__ import annotations

from deeplite_like._moved import lazy_exports

from .distributed import recording as _recording  # noqa: F401  (registers with the recorder's hook point)

_EXPORTS = {
    "count_ops": "deeplite_like.backends.torch.counting",
    "register_formula": "deeplite_like.backends.torch.counting",
    "register_free": "deeplite_like.backends.torch.counting",
    "register_module_formula": "deeplite_like.backends.torch.counting",
    "Cost": "deeplite_like.backends.torch.counting",
    "OpCall": "deeplite_like.backends.torch.counting",
    "TorchProfiler": "deeplite_like.backends.torch.compute",
    "ComputeComplexity": "deeplite_like.backends.torch.compute",
    "ComputeParams": "deeplite_like.backends.torch.compute",
    "ComputeSize": "deeplite_like.backends.torch.compute",
    "ComputeMemory": "deeplite_like.backends.torch.compute",
    "ComputeExecutionTime": "deeplite_like.backends.torch.compute",
    "ComputeLayerwiseSummary": "deeplite_like.backends.torch.compute",
    "estimate_training_memory": "deeplite_like.backends.torch.training.estimate",
    "TrainingMemory": "deeplite_like.backends.torch.training.estimate",
    "largest_batch": "deeplite_like.backends.torch.training.batch_fit",
    "accuracy": "deeplite_like.backends.torch.compute",
    "topk_accuracy": "deeplite_like.backends.torch.compute",
    # deeplite-profiler's names (code written for it runs with its import lines changed)
    "ComputeFlops": "deeplite_like.backends.torch.compute",
    "get_accuracy": "deeplite_like.backends.torch.compute",
    "get_missclass": "deeplite_like.backends.torch.compute",
    "get_topk": "deeplite_like.backends.torch.compute",
    "EvalLossFunction": "deeplite_like.backends.torch.compute",
    "EvaluationFunction": "deeplite_like.functions",
    "TorchDataLoader": "deeplite_like.backends.torch.inputs",
    "TorchForwardPass": "deeplite_like.backends.torch.inputs",
    "TorchTensorSampler": "deeplite_like.backends.torch.inputs",
    "Device": "deeplite_like.device",
    "ComputeEvalMetric": "deeplite_like.functions",
    "TorchEvaluationFunction": "deeplite_like.backends.torch.compute",
}

# deeplite-profiler's torch names deliberately not provided, and what to use instead (docs/migration.rst).
NOT_PROVIDED = {
    "cudafy": "the profilers and evaluation helpers never move a model or its inputs' owner; put tensors on the "
              "model's device with tensor.to(device)",
    "cpufy": "the profilers and evaluation helpers never move a model; use tensor.cpu()",
    "itemify": "an internal helper of deeplite's evaluation functions; use tensor.item()",
    "funcify": "an internal helper of deeplite's evaluation functions",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), NOT_PROVIDED)
