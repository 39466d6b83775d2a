"""A ``TorchDispatchMode`` base that does not load TorchDynamo unless compiled code may run.

torch wraps every mode's ``__torch_dispatch__`` in ``torch._dynamo.disable`` unless the mode's
``_should_skip_dynamo()`` says ``False``. The wrapper costs about 1 us per operator, and its
first call imports ``torch._dynamo`` (over a second, several on a loaded machine). It only
matters when an eval-frame callback is set, i.e. ``torch.compile`` code is running, which needs
``torch._dynamo`` loaded. So a ``LightDispatchMode`` skips the wrapper; ``make`` builds the
wrapped (``dynamo_safe``) subclass when ``torch._dynamo`` is already loaded, and a running mode
switches to it (``switch_if_dynamo_loaded``) once something loads it.

Every dispatch mode of the torch backend (counting, memory tracking) derives from it.
"""
from __future__ import annotations

import sys
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["LightDispatchMode", "dynamo_safe", "make"]

M = TypeVar("M", bound="LightDispatchMode")
_DYNAMO_SAFE: dict[type, type] = {}


class LightDispatchMode(TorchDispatchMode):
    """Base of our dispatch modes: no TorchDynamo wrapper (nor import) unless TorchDynamo is loaded."""

    _dynamo_safe = False  # True in the ``dynamo_safe(cls)`` subclasses

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def switch_if_dynamo_loaded(self) -> None:
        """Become the ``dynamo_safe`` subclass if ``torch._dynamo`` was loaded since (compiled code may run)."""
        if not self._dynamo_safe and "torch._dynamo" in sys.modules:
            self.__class__ = dynamo_safe(type(self))


def dynamo_safe(cls: type) -> type:
    """A subclass of ``cls`` whose ``__torch_dispatch__`` runs with TorchDynamo disabled (torch's default)."""
    safe = _DYNAMO_SAFE.get(cls)
    if safe is None:
        safe = _DYNAMO_SAFE[cls] = type(cls.__name__, (cls,), {
            "__torch_dispatch__": torch._disable_dynamo(cls.__torch_dispatch__, recursive=True),
            "_dynamo_safe": True, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
        })
    return safe


def make(cls: type[M], *args: Any, **kwargs: Any) -> M:
    """``cls(*args, **kwargs)``, as its ``dynamo_safe`` subclass when ``torch._dynamo`` is loaded."""
    return (dynamo_safe(cls) if "torch._dynamo" in sys.modules else cls)(*args, **kwargs)
