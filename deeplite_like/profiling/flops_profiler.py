"""``FlopsProfiler``: profile a real training step (forward, backward, optimizer step) - no framework.

This class holds what both backends share: the start/stop/end life cycle, the DeepSpeed-style
getters and ``print_model_profile``. ``FlopsProfiler(model)`` returns the profiler of the
model's backend (``TorchFlopsProfiler``, ``KerasFlopsProfiler``: subclasses of this one). A
backend implements ``_start``, ``_stop``, ``_discard`` and ``_build``.

Differences from DeepSpeed's ``FlopsProfiler``, on purpose:

* everything that runs between ``start_profile()`` and ``stop_profile()`` is counted, phase by
  phase (``forward``, ``backward``, ``optimizer``, ``other``): the backward pass is measured,
  not estimated as 2x the forward. ``get_total_flops()`` is the sum of every phase;
  ``get_total_flops(phase="forward")`` is DeepSpeed's figure.
* ``get_total_duration()`` is the wall time between start and stop (``phase=`` for one phase).
* nothing is stored on the model: ``stop_profile()`` removes every hook, ``end_profile()``
  drops the figures, and ``start_profile()`` can be called again for a later step.
"""
from __future__ import annotations

import os
from typing import Any, Iterable

from deeplite_like.profiling import formatting as fmt
from deeplite_like.profiling.arguments import check_view_options
from deeplite_like.profiling.backends import profile_module
from deeplite_like.profiling.result import PHASES, ModelProfile

_IDLE, _RUNNING, _STOPPED = "idle", "running", "stopped"


class FlopsProfiler:
    """Count and time what runs between ``start_profile()`` and ``stop_profile()``.

    Args:
        model: a ``torch.nn.Module`` or a Keras model; ``FlopsProfiler(model)`` picks the backend.
        model_parallel_size: how many devices one copy of the model is split over (tensor or
            pipeline parallel). Figures are per device; the whole model's params and FLOPs are
            multiplied by it. ``None``: read from ``process_group`` if given, else 1.
        process_group: a ``torch.distributed`` model-parallel group (torch only).
        module_latency: time each module's forward (on CUDA: synchronising around each one,
            which slows the step); the forward, backward and optimizer latencies are always timed.
        ignore_modules: module types whose cost is excluded from the totals (listed as excluded).
    """

    def __new__(cls, model: Any, *args: Any, **kwargs: Any) -> "FlopsProfiler":
        if cls is FlopsProfiler:
            cls = profile_module(model).FLOPS_PROFILER
        return super().__new__(cls)

    def __init__(self, model: Any, *, model_parallel_size: int | None = None, process_group: Any = None,
                 module_latency: bool = True, ignore_modules: Iterable[Any] | None = None) -> None:
        if model_parallel_size is not None and (not isinstance(model_parallel_size, int) or model_parallel_size < 1):
            raise ValueError(f"model_parallel_size must be a positive int, got {model_parallel_size!r}")
        self.model = model
        self.model_parallel_size = model_parallel_size
        self.process_group = process_group
        self.module_latency = bool(module_latency)
        self.ignore_modules = list(ignore_modules or ())
        self._state = _IDLE
        self._cached: dict[Any, ModelProfile] = {}

    # -- backend hooks ----------------------------------------------------------------------
    def _start(self, ignore: list[Any]) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def _discard(self) -> None:
        raise NotImplementedError

    def _build(self, step: int | None) -> ModelProfile:
        raise NotImplementedError

    # -- life cycle -------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """True between ``start_profile()`` and ``stop_profile()``."""
        return self._state == _RUNNING

    def start_profile(self, ignore_list: Iterable[Any] | None = None) -> None:
        """Start counting; everything that runs until ``stop_profile()`` is profiled.

        ``ignore_list`` (DeepSpeed's name) adds module types to exclude for this profile.
        Figures of a previous profile are dropped.
        """
        if self._state == _RUNNING:
            raise RuntimeError(f"{type(self).__name__}.start_profile(): already profiling; call stop_profile() first")
        self._discard()
        self._cached.clear()
        self._start(self.ignore_modules + list(ignore_list or ()))
        self._state = _RUNNING

    def stop_profile(self) -> None:
        """Stop counting and remove every hook; the figures stay readable until ``end_profile()``."""
        if self._state != _RUNNING:
            raise RuntimeError(f"{type(self).__name__}.stop_profile(): not profiling; call start_profile() first")
        self._stop()  # raises, leaving the profile running, when it cannot stop cleanly
        self._state = _STOPPED

    def end_profile(self) -> None:
        """Stop if needed and drop the figures; nothing of the profiler stays attached to the model."""
        if self._state == _RUNNING:
            self.stop_profile()
        self._discard()
        self._cached.clear()
        self._state = _IDLE

    def __enter__(self) -> "FlopsProfiler":
        self.start_profile()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._state == _RUNNING:
            self.stop_profile()

    # -- results ----------------------------------------------------------------------------
    def get_profile(self, profile_step: int | None = None) -> ModelProfile:
        """The ``ModelProfile`` of what ran since ``start_profile()`` (so far, while still running)."""
        if self._state == _IDLE:
            raise RuntimeError(f"{type(self).__name__}: nothing profiled; call start_profile() before the step "
                               "(and read the figures before end_profile())")
        if self._state == _RUNNING:
            return self._build(profile_step)
        if profile_step not in self._cached:
            self._cached[profile_step] = self._build(profile_step)
        return self._cached[profile_step]

    def _total(self, phase: str | None, whole: str, part: str) -> Any:
        """The profile's ``whole`` figure, or ``part`` of the totals of ``phase``."""
        if phase is not None and phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; phases are {', '.join(PHASES)}")
        profile = self.get_profile()
        return getattr(profile, whole) if phase is None else getattr(profile.phase(phase), part)

    def get_total_flops(self, as_string: bool = False, phase: str | None = None) -> int | str:
        """FLOPs per device of every phase (or of ``phase``: ``forward``, ``backward``, ``optimizer``, ``other``)."""
        value = self._total(phase, "flops", "flops")
        return fmt.count(value, "FLOPs") if as_string else value

    def get_total_macs(self, as_string: bool = False, phase: str | None = None) -> int | str:
        """MACs per device of every phase (or of ``phase``)."""
        value = self._total(phase, "macs", "macs")
        return fmt.count(value, "MACs") if as_string else value

    def get_total_params(self, as_string: bool = False) -> int | str:
        """Parameters per device (elements; each shared tensor once)."""
        value = self.get_profile().params
        return fmt.count(value) if as_string else value

    def get_total_duration(self, as_string: bool = False, phase: str | None = None) -> float | str | None:
        """Seconds between start and stop (or the latency of ``phase``); None when not timed."""
        value = self._total(phase, "duration_s", "latency_s")
        return fmt.seconds(value) if as_string else value

    def print_model_profile(self, profile_step: int | None = 1, module_depth: int = -1, top_modules: int = 1,
                            detailed: bool = True, output_file: str | os.PathLike | None = None,
                            as_string: bool = True) -> None:
        """Print the report (summary, aggregated top-k per depth, tree), or write it to ``output_file``."""
        check_view_options(module_depth, top_modules)
        profile = self.get_profile(profile_step)
        if output_file is not None:
            profile.save(output_file, module_depth, top_modules, detailed, as_string)
        else:
            print(profile.to_text(module_depth, top_modules, detailed, as_string))
