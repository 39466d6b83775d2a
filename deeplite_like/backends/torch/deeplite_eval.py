"""deeplite-profiler's evaluation functions for PyTorch: ``get_accuracy``, ``get_missclass``, ``get_topk``,
``EvalLossFunction``; percentages in 0-100.

They are built on ``evaluate.py`` and differ from deeplite's on purpose in two ways: accuracy
is the share of *samples* (deeplite averaged per-batch means, so a short last batch weighed as
much as a full one), and the model is left as found (deeplite moved it to the device and left it
in eval mode). ``device`` must be where the model already is: move the model yourself.
``transform(x, y) -> (x, y)`` is applied to each ``(inputs, targets)`` batch first.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import nn

from deeplite_like.device import Device
from deeplite_like.evaluation import EvaluationFunction, as_tuple, mean_loss, transformed_batches

from .evaluate import evaluate
from .state import model_device, preserved_model_state

__all__ = ["EvalLossFunction", "TorchEvaluationFunction", "get_accuracy", "get_missclass", "get_topk"]


def _check_device(model: nn.Module, device: Any) -> None:
    if device is None:
        return
    wanted, actual = Device.parse(device), model_device(model)
    if wanted.kind != actual.type:
        raise ValueError(f"evaluation asked for device {wanted} but {type(model).__name__} is on {actual}; the model "
                         f"is not moved for you: call model.to('{wanted}') first, or leave device out")


class TorchEvaluationFunction(EvaluationFunction):
    """Base of the PyTorch evaluation functions: checks the device and applies ``transform``."""

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
