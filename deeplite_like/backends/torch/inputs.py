"""Model inputs for a profiling run: which split they come from, moved to a device; the mode the model runs in."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import torch
from torch.utils._pytree import tree_map

from deeplite_like.data import DataError
from deeplite_like.device import Device


def resolve_split(data_splits: Mapping[str, Any], split: str | None) -> str:
    """``split`` if given; else ``'test'`` when present, else the first split."""
    if split is not None:
        return split
    if not isinstance(data_splits, Mapping) or not data_splits:
        raise DataError("this profiler has no data splits to take model inputs from; pass "
                        "data_splits={'test': [batch, ...]} or use TorchProfiler.from_inputs(model, example)")
    return "test" if "test" in data_splits else next(iter(data_splits))


def moved(args: tuple, kwargs: Mapping[str, Any], device: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` with every tensor moved to ``device`` (the caller's tensors are not changed).

    ``device``: a ``torch.device`` as is, or anything ``Device.parse`` reads (``"gpu"``, ``"cuda:1"``)."""
    target = device if isinstance(device, torch.device) else torch.device(str(Device.parse(device)))
    return tree_map(lambda t: t.to(target) if isinstance(t, torch.Tensor) else t, (tuple(args), dict(kwargs)))


@contextmanager
def inference_mode_of(model: torch.nn.Module, mode: str = "eval") -> Iterator[None]:
    """Run the model in ``mode`` (``'eval'`` or ``'train'``) and restore every module's own flag after."""
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train', got {mode!r}")
    flags = [(m, m.training) for m in model.modules()]
    try:
        try:
            model.train(mode == "train")
        except NotImplementedError:  # torch.export modules have no train()/eval(): run them as exported
            pass
        yield
    finally:
        for module, training in flags:
            module.training = training
