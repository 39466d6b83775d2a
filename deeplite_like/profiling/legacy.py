"""DeepSpeed's older profiler API (``deepspeed.profiler.pytorch_profiler``, the design's seed ``001``):
``get_model_profile`` returning ``(macs, params)`` and ``add_profile_methods(model)``.

Both run on today's engine (``deeplite_like.profiling``), so the figures are ours: MACs of
contractions only, FLOPs = 2 x MACs + the rest, each shared parameter once. What differs from
that API, on purpose:

* ``compute_total_flops()`` returns FLOPs. The old profiler returned multiply-accumulates under
  that name (it printed them as ``KMac``); ``compute_total_macs()`` returns those.
* the profile covers the forward pass (the old API's scope): ``compute_total_flops`` and
  ``compute_total_duration`` read the forward phase even when a backward ran before reading.
* ``stop_profile()`` (and ``end_profile()``) remove every method ``add_profile_methods`` added,
  leaving the model as it was: read the figures before stopping, as the seed's example does.

Figures are raw (ints, seconds); ``as_strings=True`` and the ``*_to_string`` helpers write them
with SI prefixes (``429.25 kMACs``).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import deeplite_like.profiling.views as views
from deeplite_like.profiling.flops_profiler import FlopsProfiler
from deeplite_like.profiling.flops_profiler import get_model_profile as _get_model_profile

__all__ = ["add_profile_methods", "duration_to_string", "flops_to_string", "get_model_profile", "macs_to_string",
           "params_to_string", "remove_profile_methods"]


def flops_to_string(flops: int | float) -> str:
    """``'22.36 GFLOPs'``."""
    return views.count(flops, "FLOPs")


def macs_to_string(macs: int | float) -> str:
    """``'429.25 kMACs'``."""
    return views.count(macs, "MACs")


def params_to_string(params: int | float) -> str:
    """``'61.71 k'``."""
    return views.count(params)


def duration_to_string(seconds: float | None) -> str:
    """``'1.2 ms'`` from seconds."""
    return views.seconds(seconds)


def get_model_profile(model: Any, input_res: Sequence[int], input_constructor: Callable[[Any], Any] | None = None,
                      print_profile: bool = True, print_aggregated_profile: bool = True, depth: int = -1,
                      top_num: int = 3, warm_up: int = 10, as_strings: bool = True,
                      ignore_modules: Iterable[Any] | None = None) -> tuple[Any, Any]:
    """``(macs, params)`` of one forward of ``model`` on one sample (seed ``001``'s API).

    Args:
        input_res: the shape of one sample without the batch axis (``(3, 224, 224)``): the model
            gets a float tensor of shape ``(1, *input_res)``.
        input_constructor: ``input_constructor(input_res)`` builds the input instead; a dict is
            passed as keyword arguments, anything else as the one positional argument.
        print_profile: print the module tree with each module's figures.
        print_aggregated_profile: print the top ``top_num`` module types per depth.
        depth: deepest depth printed (-1: all).
        warm_up: untimed forwards before the timed one.
        as_strings: return ``'429.25 kMACs'``-style strings instead of the raw ints.
        ignore_modules: module types whose cost is left out of the totals.
    """
    if not isinstance(input_res, (tuple, list)) or not all(isinstance(d, int) and d > 0 for d in input_res):
        raise ValueError(f"input_res must be the shape of one sample without the batch axis, such as (3, 224, 224); "
                         f"got {input_res!r}")
    if input_constructor is not None:
        built = input_constructor(input_res)
        call = {"kwargs": built} if isinstance(built, dict) else {"args": (built,)}
    else:
        call = {"input_shape": (1, *input_res)}
    profile = _get_model_profile(model, **call, print_profile=False, warm_up=warm_up, ignore_modules=ignore_modules)
    if print_profile:
        print(profile.tree_text(depth, as_strings))
    if print_aggregated_profile:
        print(profile.aggregated_table(depth, top_num, as_strings).to_text())
    if as_strings:
        return macs_to_string(profile.macs), params_to_string(profile.params)
    return profile.macs, profile.params


_MARK = "__deeplite_like_profile_methods__"


def add_profile_methods(model: Any) -> Any:
    """Add seed ``001``'s profiling methods to ``model`` and return it.

    Added: ``start_profile``, ``stop_profile``, ``end_profile``, ``compute_total_flops``,
    ``compute_total_macs``, ``compute_total_duration`` (forward seconds), ``compute_total_params``,
    ``print_model_profile``, ``print_model_aggregated_profile(depth=-1, top_num=3)``, and the seed
    example's spellings ``get_total_flops``, ``get_total_macs``, ``get_total_duration``,
    ``get_total_params``. ``stop_profile()`` / ``end_profile()`` remove them all again (and put
    back any attribute of the same name the instance had).
    """
    if _MARK in vars(model):
        return model
    profiler = FlopsProfiler(model)

    def start_profile(ignore_list: Iterable[Any] | None = None) -> None:
        profiler.start_profile(ignore_list)

    def stop_profile() -> None:
        try:
            if profiler.started:
                profiler.stop_profile()
            profiler.end_profile()
        finally:
            remove_profile_methods(model)

    def compute_total_flops() -> int:
        return profiler.get_total_flops(phase="forward")

    def compute_total_macs() -> int:
        return profiler.get_total_macs(phase="forward")

    def compute_total_duration() -> float | None:
        return profiler.get_total_duration(phase="forward")

    def compute_total_params() -> int:
        return profiler.get_total_params()

    def print_model_profile() -> None:
        print(profiler.get_profile().tree_text())

    def print_model_aggregated_profile(depth: int = -1, top_num: int = 3) -> None:
        print(profiler.get_profile().aggregated_table(depth, top_num).to_text())

    methods = {
        "start_profile": start_profile, "stop_profile": stop_profile, "end_profile": stop_profile,
        "compute_total_flops": compute_total_flops, "compute_total_macs": compute_total_macs,
        "compute_total_duration": compute_total_duration, "compute_total_params": compute_total_params,
        "get_total_flops": compute_total_flops, "get_total_macs": compute_total_macs,
        "get_total_duration": compute_total_duration, "get_total_params": compute_total_params,
        "print_model_profile": print_model_profile, "print_model_aggregated_profile": print_model_aggregated_profile,
    }
    own = vars(model)
    saved = {name: own[name] for name in methods if name in own}
    for name, method in methods.items():
        object.__setattr__(model, name, method)
    object.__setattr__(model, _MARK, (tuple(methods), saved))
    return model


def remove_profile_methods(model: Any) -> Any:
    """Remove what ``add_profile_methods`` added (a model without them is returned unchanged)."""
    own = vars(model)
    if _MARK not in own:
        return model
    names, saved = own.pop(_MARK)
    for name in names:
        own.pop(name, None)
    own.update(saved)
    return model
