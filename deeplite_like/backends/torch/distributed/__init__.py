"""Profiling under ``torch.distributed``: per-rank counting of DTensor and collectives, whole-job reports.

Importing this package imports no part of ``torch.distributed``; ``profile_job`` needs an
initialised process group. See ``docs/distributed.rst``.
"""
from __future__ import annotations

from deeplite_like._moved import lazy_exports

_EXPORTS = {
    "COLLECTIVES": "deeplite_like.backends.torch.distributed.recording",
    "JobProfile": "deeplite_like.backends.torch.distributed.job",
    "PipelineStageProfile": "deeplite_like.backends.torch.distributed.job",
    "RankProfile": "deeplite_like.backends.torch.distributed.job",
    "profile_job": "deeplite_like.backends.torch.distributed.job",
    "local_numel": "deeplite_like.backends.torch.tensors",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
