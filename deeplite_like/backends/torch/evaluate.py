"""Classification accuracy of a PyTorch model over a data loader (top-1, top-k), in percent.

A batch is turned into model inputs and targets by a *forward pass* object with
``targets(batch) -> Tensor`` and either ``extract_model_inputs(batch) -> (args, kwargs)`` or
``__call__(batch) -> (args, kwargs)`` (``deeplite_like.data.ForwardPass`` is such an object);
without one, batches are ``(inputs, targets)`` pairs. Outputs are class scores with the class on
dimension 1 (``(N, C)`` or ``(N, C, ...)``, as ``nn.CrossEntropyLoss`` expects); targets are
class indices (``(N,)`` or ``(N, ...)``) or one-hot / probability rows shaped like the output.
An output object with a ``logits`` attribute or key (Hugging Face style) is accepted.

The model runs in eval mode under ``torch.no_grad()`` on its own device (inputs are moved
there); its mode and everything else is restored afterwards.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import torch
from torch import nn
from torch.utils import _pytree as pytree

from deeplite_like.backends.torch.state import model_device, preserved_model_state
from deeplite_like.data import ForwardPass
from deeplite_like.metrics.eval import parse_topk_names

__all__ = ["EvalForwardPass", "accuracy", "topk_accuracy", "evaluate"]


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
    its accuracy. See the module docstring for batches, outputs and targets.
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
