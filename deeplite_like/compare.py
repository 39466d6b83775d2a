"""Compare two or more profiled models side by side; the first is the reference."""
from __future__ import annotations

from typing import Any, Sequence

from deeplite_like.errors import called_as
from deeplite_like.profiler import Profiler, _emit, _print_level


def compare(profilers: Sequence[Profiler], print_mode: Any = None, short_print: bool = True,
            recompute: bool = False, **kwargs: Any):
    """Compute every profiler with the same ``kwargs`` and return a ``CompareReport``.

    The first profiler is the reference (e.g. the teacher): every other column says, in words,
    how that model differs from it (``4.80x smaller``, ``2.10x faster``, ``-0.70 pts``).
    Profilers of different backends may be mixed; each receives the arguments one of its
    functions accepts, and an argument no profiler accepts is an error.
    """
    from deeplite_like.reports import CompareReport

    if isinstance(profilers, Profiler):
        raise TypeError("compare takes a list of profilers, the reference first: compare([teacher, student])"
                        + (f", got {type(print_mode).__name__} {print_mode!r} as print_mode too"
                           if isinstance(print_mode, Profiler) else ""))
    profilers = list(profilers)
    if len(profilers) < 2:
        raise ValueError(f"compare needs at least two profilers, got {len(profilers)}")
    for position, profiler in enumerate(profilers):
        if not isinstance(profiler, Profiler):
            raise TypeError(f"compare: item {position} is {type(profiler).__name__}, not a Profiler")
    level = _print_level(print_mode)
    accepted_by = [_accepted(p) for p in profilers]
    unknown = sorted(set(kwargs) - set().union(*accepted_by))
    if unknown:
        profilers[0]._check_kwargs({k: kwargs[k] for k in unknown})  # raises with hints
    with called_as("compare"):
        for profiler, accepted in zip(profilers, accepted_by):  # every option checked before any model runs
            profiler._check_options({k: v for k, v in kwargs.items() if k in accepted})
        for profiler, accepted in zip(profilers, accepted_by):
            # strict: a value cached with other options (another batch size, ...) is measured again
            profiler._compute_all({k: v for k, v in kwargs.items() if k in accepted}, recompute, strict=True)
    report = CompareReport([(p.name, p.backend_name, p._displayed_status()) for p in profilers],
                           short_print=short_print)
    _emit(report, level)
    return report


def _accepted(profiler: Profiler) -> set[str]:
    return {name for r in profiler._registrations for name in r.named_parameters} - set(profiler.context())
