"""Wall-clock execution time of a model's forward pass, measured with ``torch.utils.benchmark``.

``torch.utils.benchmark.Timer`` is used rather than a hand-written loop because it already
does what a careful loop must: it synchronises the accelerator around each timed block,
sizes the blocks so that timer overhead is negligible, and pins the thread count while it
measures.

Device rule: the model is never moved. If ``device`` is the model's own device (the default),
the model itself is timed; if another device is asked for, a deep copy of the model is moved
there and timed (costs one copy of the model on that device). Inputs on another device are
copied to the timed device; the caller's tensors are never changed.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
import torch.utils.benchmark as benchmark
from torch import nn
from torch.utils import _pytree as pytree

from deeplite_like.backends.torch.placement import checked_device
from deeplite_like.backends.torch.state import model_device, preserved_model_state
from deeplite_like.measurements import TimingStats
from deeplite_like.threads import check_num_threads

__all__ = ["TimingStats", "measure_execution_time"]


def _infer_batch_size(args: tuple, kwargs: Mapping[str, Any]) -> int:
    for leaf in pytree.tree_leaves((args, dict(kwargs))):
        if isinstance(leaf, torch.Tensor) and leaf.dim() >= 1:
            return int(leaf.size(0))  # (size(0): a nested tensor has no .shape)
    raise ValueError(
        "cannot infer the batch size: no input tensor has a leading dimension; "
        "pass batch_size=... explicitly"
    )


def _normalise(device: torch.device) -> torch.device:
    """``cuda`` without an index means the current CUDA device; give it that index."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def measure_execution_time(
    model: nn.Module,
    args: Any,
    kwargs: Mapping[str, Any] | None = None,
    device: str | torch.device | None = None,
    warmup: int = 3,
    min_run_time: float = 0.5,
    num_threads: int | None = None,
    batch_size: int | None = None,
    train: bool | None = None,
    min_measurements: int = 7,
) -> TimingStats:
    """Time ``model(*args, **kwargs)`` under ``torch.no_grad()``, in seconds per batch.

    ``args`` is a tuple of positional inputs (a single tensor is accepted as one input).
    ``warmup`` untimed forwards run first, then ``Timer.blocked_autorange`` measures for at
    least ``min_run_time`` seconds, and more blocks are timed until there are at least
    ``min_measurements`` of them, so the median and spread rest on several blocks. ``num_threads`` (default: the current
    ``torch.get_num_threads()``) is the intra-op thread count used while timing; the previous
    value is restored afterwards. ``train=True`` / ``False`` sets the module mode for the timed
    forwards; ``None`` (default) leaves every module's mode as found. Mode, buffer values
    written by the forwards (in any mode), the random generators and everything else are
    restored (``state.preserved_model_state``). ``device`` defaults to the
    model's device; see the module docstring for what happens when another one is asked for.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"measure_execution_time expects a torch.nn.Module, got {type(model).__name__}")
    num_threads = check_num_threads(num_threads)
    requested = None if device is None else checked_device(device)
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if min_measurements < 1:
        raise ValueError(f"min_measurements must be >= 1, got {min_measurements}")
    if min_run_time <= 0:
        raise ValueError(f"min_run_time must be > 0 seconds, got {min_run_time}")
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = dict(kwargs or {})
    if batch_size is None:
        batch_size = _infer_batch_size(args, kwargs)
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    previous_threads = torch.get_num_threads()
    threads = previous_threads if num_threads is None else num_threads

    home = model_device(model)
    if home.type == "meta":
        raise ValueError(
            f"{type(model).__name__} is on the meta device and cannot be timed; "
            "load real weights (e.g. model.to_empty(device='cpu')) first"
        )
    if requested is not None and requested.type == "meta":
        raise ValueError("device='meta': the meta device runs no arithmetic, so nothing can be timed; pass "
                         "device='cpu' or 'cuda', or leave device out to time the model where it is")
    target = home if requested is None else _normalise(requested)
    runner = model if target == home else copy.deepcopy(model).to(target)
    args, kwargs = pytree.tree_map(lambda x: x.to(target) if isinstance(x, torch.Tensor) else x, (args, kwargs))

    def forward() -> None:
        runner(*args, **kwargs)

    with preserved_model_state(model):
        if train is not None:
            runner.train(train)
        try:
            torch.set_num_threads(threads)
            with torch.no_grad():
                for _ in range(warmup):
                    forward()
                timer = benchmark.Timer(stmt="forward()", globals={"forward": forward}, num_threads=threads)
                measurement = timer.blocked_autorange(min_run_time=min_run_time)
                # A median needs several blocks: a slow model can fill min_run_time with one.
                blocks = [measurement]
                while sum(len(m.times) for m in blocks) < min_measurements:
                    blocks.append(timer.timeit(measurement.number_per_run))
                measurement = benchmark.Measurement.merge(blocks)[0]
        finally:
            torch.set_num_threads(previous_threads)

    median = float(measurement.median)
    return TimingStats(
        median_s=median,
        iqr_s=float(measurement.iqr),
        mean_s=float(measurement.mean),
        min_s=float(min(measurement.times)),
        times=len(measurement.times),
        number_per_run=int(measurement.number_per_run),
        batch_size=batch_size,
        per_sample_s=median / batch_size,
        throughput=batch_size / median,
        num_threads=threads,
        device=str(target),
        raw_s=tuple(float(t) for t in measurement.times),
    )
