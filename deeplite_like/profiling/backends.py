"""Where each backend's profile builder and ``FlopsProfiler`` live (imported only when used)."""
from __future__ import annotations

import importlib
from typing import Any

from deeplite_like.backends import backend_for

#: backend name -> module holding ``build_model_profile`` and ``FLOPS_PROFILER``.
_MODULES = {
    "torch": "deeplite_like.backends.torch.profile",
    "keras": "deeplite_like.backends.keras.profile",
}


def profile_module(model: Any) -> Any:
    """The profile module of the backend that handles ``model`` (a Keras model is checked first)."""
    backend = backend_for(model)
    path = _MODULES.get(backend.name)
    if path is None:
        raise TypeError(f"the {backend.name} backend has no model profile; profiles exist for "
                        f"{', '.join(_MODULES)} models")
    try:
        importlib.import_module(backend.requires)
    except ImportError as exc:
        raise ImportError(f"profiling a {backend.name} model needs {backend.requires}, which is not installed "
                          f"here; install it with: pip install 'deeplite-like[{backend.extra}]'") from exc
    return importlib.import_module(path)
