"""deeplite-profiler's evaluation functions for Keras: ``get_accuracy``, ``get_missclass``, ``get_topk``,
``EvalLossFunction``; percentages in 0-100.

Built on ``evaluate.py`` (class scores on the last axis; integer or one-hot targets). The model
runs with ``training=False`` where it is; ``device`` is accepted for deeplite's signature and
must name a device Keras can see (TensorFlow places the computation itself).
``transform(x, y) -> (x, y)`` is applied to each ``(inputs, targets)`` batch first.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.device import Device
from deeplite_like.evaluation import EvaluationFunction, as_tuple, mean_loss, transformed_batches

from .evaluate import evaluate
from .state import preserved_model_state

keras = import_keras()

__all__ = ["EvalLossFunction", "KerasEvaluationFunction", "get_accuracy", "get_missclass", "get_topk"]


class KerasEvaluationFunction(EvaluationFunction):
    """Base of the Keras evaluation functions: parses ``device`` and applies ``transform``."""

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
