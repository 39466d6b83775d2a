"""deeplite-profiler's ``ComputeComplexity(num_bytes=4, export=False)`` options, shared by both backends.

deeplite sized every activation and weight at ``num_bytes`` bytes and could ``export`` a per-layer
report to a file. Here sizes are read from each tensor's real dtype and the per-layer report is
the ``layerwise_summary`` metric, so the options are accepted and a value that would change
deeplite's output is warned about, saying what to do instead.
"""
from __future__ import annotations

import warnings


def check_complexity_options(num_bytes: int, export: bool) -> None:
    """Validate ``num_bytes`` (bytes per element) and ``export``; warn where they have no effect here."""
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, (int, float)) or num_bytes <= 0:
        raise ValueError(f"ComputeComplexity(num_bytes=...) must be a positive number of bytes, got {num_bytes!r}")
    if not isinstance(export, bool):
        raise TypeError(f"ComputeComplexity(export=...) must be True or False, got {export!r}")
    if num_bytes != 4:
        warnings.warn(f"ComputeComplexity(num_bytes={num_bytes}): sizes and memory are read from each tensor's "
                      "real dtype, not from num_bytes; cast the model (e.g. model.half()) to profile it at another "
                      "width", UserWarning, stacklevel=3)
    if export:
        warnings.warn("ComputeComplexity(export=True) writes no file here: the per-layer report is the "
                      "'layerwise_summary' metric (ComputeLayerwiseSummary); save a report with "
                      "profiler.compute_network_status(...).save(path)", UserWarning, stacklevel=3)


class ComplexityOptions:
    """The constructor both backends' ``ComputeComplexity`` share: deeplite's options, checked and kept."""

    def __init__(self, num_bytes: int = 4, export: bool = False) -> None:
        check_complexity_options(num_bytes, export)
        self.num_bytes = num_bytes
        self.export = export
