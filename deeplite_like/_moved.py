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
    # cli
    "deeplite_like.commands": ("deeplite_like.cli", True),
    "deeplite_like.commands.check": ("deeplite_like.cli.check", False),
    "deeplite_like.commands.compare": ("deeplite_like.cli.commands", False),
    "deeplite_like.commands.demo": ("deeplite_like.cli.commands", False),
    "deeplite_like.commands.errors": ("deeplite_like.cli.exit_codes", False),
    "deeplite_like.commands.export_archive": ("deeplite_like.cli.loading.export_archive", False),
    "deeplite_like.commands.factory_guard": ("deeplite_like.cli.loading.preflight", False),
    "deeplite_like.commands.file_kinds": ("deeplite_like.cli.loading.preflight", False),
    "deeplite_like.commands.hub_models": ("deeplite_like.cli.loading.hub_models", False),
    "deeplite_like.commands.input_memory": ("deeplite_like.cli.loading.preflight", False),
    "deeplite_like.commands.inputs": ("deeplite_like.cli.model_inputs", False),
    "deeplite_like.commands.keras_files": ("deeplite_like.cli.loading.keras_files", False),
    "deeplite_like.commands.loading": ("deeplite_like.cli.loading", True),
    "deeplite_like.commands.memory": ("deeplite_like.cli.commands", False),
    "deeplite_like.commands.onnx_files": ("deeplite_like.cli.loading.onnx_files", False),
    "deeplite_like.commands.options": ("deeplite_like.cli.flags", False),
    "deeplite_like.commands.output": ("deeplite_like.cli.output", False),
    "deeplite_like.commands.precision": ("deeplite_like.cli.model_inputs", False),
    "deeplite_like.commands.profile": ("deeplite_like.cli.commands", False),
    "deeplite_like.commands.progress": ("deeplite_like.cli.progress", True),
    "deeplite_like.commands.quantities": ("deeplite_like.cli.flags", False),
    "deeplite_like.commands.run": ("deeplite_like.cli.runner", False),
    "deeplite_like.commands.schema": ("deeplite_like.cli.output", False),
    "deeplite_like.commands.sweep": ("deeplite_like.cli.sweep", False),
    "deeplite_like.commands.torch_files": ("deeplite_like.cli.loading.torch_files", False),
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
        # First, before the path finder: an old package aliased to a new one has the new package's
        # __path__, where the path finder would load `old.pkg.sub` a second time from `new/sub.py`.
        sys.meta_path.insert(0, _MovedFinder())
