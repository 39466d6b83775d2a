"""Import paths that moved: an old dotted path still imports, and gives the module now at the new one.

One table, ``MOVED``: old path -> (new path, told to users). A path users were told about
(in the docs, the README or the examples) warns with a ``DeprecationWarning`` naming the new
path; other entries are silent. The old name is the same module object as the new one, so
``monkeypatch`` and ``isinstance`` through either name agree. Installed by the package root.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED: dict[str, tuple[str, bool]] = {
    # keras (the Keras and ONNX backends)
    "deeplite_like.backends.keras.counting.errors": ("deeplite_like.errors", False),
    "deeplite_like.backends.keras.counting.graph": ("deeplite_like.backends.keras.counting.tf_graph", False),
    "deeplite_like.backends.keras.counting.inputs": ("deeplite_like.backends.keras.tensors", False),
    "deeplite_like.backends.keras.counting.own_ops": ("deeplite_like.backends.keras.counting.engine", False),
    "deeplite_like.backends.keras.counting.pricing": ("deeplite_like.backends.keras.counting.engine", False),
    "deeplite_like.backends.keras.counting.specs": ("deeplite_like.backends.keras.counting.recorder", False),
    "deeplite_like.backends.keras.data": ("deeplite_like.backends.keras.tensors", False),
    "deeplite_like.backends.keras.deeplite_eval": ("deeplite_like.backends.keras.compute", False),
    "deeplite_like.backends.keras.evaluate": ("deeplite_like.backends.keras.compute", False),
    "deeplite_like.backends.keras.functions": ("deeplite_like.backends.keras.compute", False),
    "deeplite_like.backends.keras.layers": ("deeplite_like.backends.keras.params", False),
    "deeplite_like.backends.keras.measured_backends": ("deeplite_like.backends.keras.latency", False),
    "deeplite_like.backends.keras.messages": ("deeplite_like.backends.keras._tf", False),
    "deeplite_like.backends.keras.profile": ("deeplite_like.backends.keras.model_profile", False),
    "deeplite_like.backends.keras.profiler": ("deeplite_like.backends.keras.compute", False),
    "deeplite_like.backends.keras.profiling": ("deeplite_like.backends.keras", False),
    "deeplite_like.backends.keras.profiling.assemble": ("deeplite_like.backends.keras.model_profile", False),
    "deeplite_like.backends.keras.profiling.counters": ("deeplite_like.backends.keras.profile_session", False),
    "deeplite_like.backends.keras.profiling.flops_profiler": ("deeplite_like.backends.keras.model_profile", False),
    "deeplite_like.backends.keras.profiling.model_profile": ("deeplite_like.backends.keras.model_profile", False),
    "deeplite_like.backends.keras.profiling.phases": ("deeplite_like.backends.keras.profile_session", False),
    "deeplite_like.backends.keras.profiling.session": ("deeplite_like.backends.keras.profile_session", False),
    "deeplite_like.backends.keras.profiling.shared": ("deeplite_like.backends.keras.profile_session", False),
    "deeplite_like.backends.keras.timing": ("deeplite_like.backends.keras.latency", False),
    "deeplite_like.backends.onnx.profiler": ("deeplite_like.backends.onnx.compute", False),
}


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        new, told = MOVED[spec.name]
        if told:
            warnings.warn(f"{spec.name} moved to {new}; import it from there "
                          f"(the old path will be removed in a later release)",
                          DeprecationWarning, stacklevel=_caller_level())
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__   # import machinery writes the alias spec; put the real one back
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


def _caller_level() -> int:
    """The stack level of the importing code (``warnings`` itself skips the import machinery's frames)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                 or frame.f_code.co_filename == __file__):
        if frame.f_code.co_filename == __file__:
            level += 1
        frame = frame.f_back
    return level


def install() -> None:
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
