"""Classification accuracy of a Keras model over a data split (top-1, top-k), in percent.

Batches are turned into the model input and targets by a forward-pass object (``ForwardPass``:
``forward_pass(batch) -> (args, kwargs)`` and ``forward_pass.targets(batch)``); without one,
batches are ``(inputs, targets)`` pairs, as Keras' ``fit`` takes them. Outputs are class
scores with the class on the **last** axis (``(N, C)`` or ``(N, ..., C)``, the Keras
convention of ``sparse_categorical_accuracy``); targets are class indices shaped like the
scores without that axis (a trailing axis of size 1, ``(N, 1)``, is accepted too), or one-hot /
probability rows (their argmax is the class, as in Keras' ``categorical_accuracy``). A batch that
is one sample without its batch axis (an ``(8, 8, 3)`` image for a model of input
``(None, 8, 8, 3)``) gets one, as deeplite-profiler's TensorFlow helpers did; so do its targets.

The model runs with ``training=False``; scores and targets are compared in NumPy.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.inputs import add_batch_axis, as_model_input, call_model, to_backend
from deeplite_like.backends.keras.state import preserved_model_state
from deeplite_like.metrics.eval import parse_topk_names

keras = import_keras()

__all__ = ["accuracy", "evaluate", "topk_accuracy"]



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
    """Top-k accuracies of ``model`` over ``data_loader`` in one pass, in percent (0-100)."""
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
