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
    # torch
    "deeplite_like.backends.torch.activation_checkpointing": ("deeplite_like.backends.torch.training.step", False),
    "deeplite_like.backends.torch.autocast_policy": ("deeplite_like.backends.torch.training.step", False),
    "deeplite_like.backends.torch.batch_fit": ("deeplite_like.backends.torch.training.batch_fit", False),
    "deeplite_like.backends.torch.counting.describe": ("deeplite_like.backends.torch.tensors", False),
    "deeplite_like.backends.torch.counting.meta_replay": ("deeplite_like.backends.torch.counting.meta", False),
    "deeplite_like.backends.torch.counting.meta_shapes": ("deeplite_like.backends.torch.counting.meta", False),
    "deeplite_like.backends.torch.counting.meta_values": ("deeplite_like.backends.torch.counting.meta", False),
    "deeplite_like.backends.torch.counting.modules": ("deeplite_like.backends.torch.counting.registry", False),
    "deeplite_like.backends.torch.counting.nested": ("deeplite_like.backends.torch.tensors", False),
    "deeplite_like.backends.torch.counting.op_facts": ("deeplite_like.backends.torch.counting.registry", False),
    "deeplite_like.backends.torch.counting.own_complexity": ("deeplite_like.backends.torch.counting.registry", True),
    "deeplite_like.backends.torch.data": ("deeplite_like.backends.torch.inputs", False),
    "deeplite_like.backends.torch.deeplite_eval": ("deeplite_like.backends.torch.compute", False),
    "deeplite_like.backends.torch.device_kernels": ("deeplite_like.backends.torch.kernels", False),
    "deeplite_like.backends.torch.dispatch_mode": ("deeplite_like.backends.torch.counting.recorder", False),
    "deeplite_like.backends.torch.distributed.shards": ("deeplite_like.backends.torch.tensors", False),
    "deeplite_like.backends.torch.errors": ("deeplite_like.errors", False),
    "deeplite_like.backends.torch.evaluate": ("deeplite_like.backends.torch.compute", False),
    "deeplite_like.backends.torch.fastpath": ("deeplite_like.backends.torch.kernels", False),
    "deeplite_like.backends.torch.functions": ("deeplite_like.backends.torch.compute", False),
    "deeplite_like.backends.torch.input_failures": ("deeplite_like.backends.torch.inputs", False),
    "deeplite_like.backends.torch.layer_timing": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.layers": ("deeplite_like.backends.torch.params", False),
    "deeplite_like.backends.torch.placement": ("deeplite_like.backends.torch.inputs", False),
    "deeplite_like.backends.torch.profile": ("deeplite_like.backends.torch.compute", False),
    "deeplite_like.backends.torch.profiler": ("deeplite_like.backends.torch.compute", False),
    "deeplite_like.backends.torch.profiling": ("deeplite_like.backends.torch.counting", False),
    "deeplite_like.backends.torch.profiling.assemble": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.devices": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.profiling.entry_point": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.flops_profiler": ("deeplite_like.backends.torch.training_profile", False),
    "deeplite_like.backends.torch.profiling.inputs": ("deeplite_like.backends.torch.inputs", False),
    "deeplite_like.backends.torch.profiling.model_profile": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.phases": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.profiling.run": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.timers": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.run_tensors": ("deeplite_like.backends.torch.tensors", False),
    "deeplite_like.backends.torch.shapes": ("deeplite_like.backends.torch.tensors", False),
    "deeplite_like.backends.torch.sharding": ("deeplite_like.backends.torch.training.optimizers", False),
    "deeplite_like.backends.torch.timing": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.training_memory": ("deeplite_like.backends.torch.training.estimate", False),
    "deeplite_like.backends.torch.training_optimizers": ("deeplite_like.backends.torch.training.optimizers", False),
    "deeplite_like.backends.torch.training_result": ("deeplite_like.backends.torch.training.estimate", False),
    "deeplite_like.backends.torch.training_step": ("deeplite_like.backends.torch.training.step", False),
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
