"""Names resolved on demand: import paths that moved, and lazy module attributes (PEP 562).

**Moved paths.** An old dotted path still imports, and gives the module now at the new one.

One table, ``MOVED``: old path -> (new path, told to users). A path users were told about
(in the docs, the README or the examples) warns with a ``DeprecationWarning`` naming the new
path; other entries are silent. The old name is the same module object as the new one, so
``monkeypatch`` and ``isinstance`` through either name agree. Installed by the package root.

**Lazy attributes** (``lazy_exports``): a package's public names imported from their module on
first use, so that ``import deeplite_like`` stays light, and a peer's names deliberately not
provided raising ``NotProvidedError`` with what to use instead.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any, Callable, Mapping

from deeplite_like.errors import NotProvidedError

MOVED: dict[str, tuple[str, bool]] = {
    # framework-free
    "deeplite_like.argument_checks": ("deeplite_like.errors", False),
    "deeplite_like.byte_sizes": ("deeplite_like.units", False),
    "deeplite_like.caller": ("deeplite_like.errors", False),
    "deeplite_like.changes": ("deeplite_like.reports.changes", True),
    "deeplite_like.communication": ("deeplite_like.results", True),
    "deeplite_like.complexity_options": ("deeplite_like.functions", False),
    "deeplite_like.eval_metric": ("deeplite_like.functions", False),
    "deeplite_like.evaluation": ("deeplite_like.functions", False),
    "deeplite_like.lazy": ("deeplite_like._moved", True),
    "deeplite_like.data.splits": ("deeplite_like.data.adapters", False),
    "deeplite_like.loaders": ("deeplite_like.data.loaders", False),
    "deeplite_like.measurements": ("deeplite_like.results", False),
    "deeplite_like.metrics.eval": ("deeplite_like.metrics", False),
    "deeplite_like.observations": ("deeplite_like.functions", False),
    "deeplite_like.opcount": ("deeplite_like.results", False),
    "deeplite_like.options": ("deeplite_like.metrics.status_keys", False),
    "deeplite_like.profiling.api": ("deeplite_like.profiling.flops_profiler", False),
    "deeplite_like.profiling.arguments": ("deeplite_like.profiling.flops_profiler", False),
    "deeplite_like.profiling.backends": ("deeplite_like.profiling.flops_profiler", False),
    "deeplite_like.profiling.build": ("deeplite_like.profiling.result", False),
    "deeplite_like.profiling.formatting": ("deeplite_like.profiling.views", True),
    "deeplite_like.profiling.summary": ("deeplite_like.profiling.views", False),
    "deeplite_like.profiling.tree": ("deeplite_like.profiling.views", False),
    "deeplite_like.reports.compare": ("deeplite_like.reports.comparison", False),
    "deeplite_like.reports.fit": ("deeplite_like.reports.base", False),
    "deeplite_like.reports.formatting": ("deeplite_like.reports.base", False),
    "deeplite_like.reports.memory_timeline": ("deeplite_like.reports.html", False),
    "deeplite_like.reports.ordering": ("deeplite_like.reports.status", True),
    "deeplite_like.reports.tree_view": ("deeplite_like.reports.table", False),
    "deeplite_like.status": ("deeplite_like.metrics.status_keys", False),
    "deeplite_like.threads": ("deeplite_like.timing", True),
    "deeplite_like.timing_loop": ("deeplite_like.timing", False),
    "deeplite_like.timing_noise": ("deeplite_like.timing", True),
    "deeplite_like.timing_values": ("deeplite_like.timing", False),
    "deeplite_like.backends.onnx.counting": ("deeplite_like.backends.onnx.formulas", False),
    "deeplite_like.backends.onnx.memory": ("deeplite_like.backends.onnx.graph", False),
    "deeplite_like.backends.tflite.counting": ("deeplite_like.backends.tflite.formulas", False),
    "deeplite_like.backends.tflite.memory": ("deeplite_like.backends.tflite.graph", False),
    "deeplite_like.zoo.data": ("deeplite_like.zoo.torch_models", True),
    "deeplite_like.zoo.torch_data": ("deeplite_like.zoo.torch_models", True),
    "deeplite_like.zoo.keras_data": ("deeplite_like.zoo.keras_models", False),
    # keras (the Keras and ONNX backends)
    "deeplite_like.backends.keras.counting.errors": ("deeplite_like.errors", False),
    "deeplite_like.backends.keras.counting.graph": ("deeplite_like.backends.keras.counting.tf_ops", False),
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
    "deeplite_like.backends.torch.profile": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiler": ("deeplite_like.backends.torch.compute", False),
    "deeplite_like.backends.torch.profiling": ("deeplite_like.backends.torch", False),
    "deeplite_like.backends.torch.profiling.assemble": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.devices": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.profiling.entry_point": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.flops_profiler": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.inputs": ("deeplite_like.backends.torch.inputs", False),
    "deeplite_like.backends.torch.profiling.model_profile": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.phases": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.profiling.run": ("deeplite_like.backends.torch.model_profile", False),
    "deeplite_like.backends.torch.profiling.timers": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.run_tensors": ("deeplite_like.backends.torch.tensors", False),
    "deeplite_like.backends.torch.shapes": ("deeplite_like.backends.torch.tensors", False),
    "deeplite_like.backends.torch.sharding": ("deeplite_like.backends.torch.training.step", False),
    "deeplite_like.backends.torch.timing": ("deeplite_like.backends.torch.latency", False),
    "deeplite_like.backends.torch.training_memory": ("deeplite_like.backends.torch.training.estimate", False),
    "deeplite_like.backends.torch.training_optimizers": ("deeplite_like.backends.torch.training.step", False),
    "deeplite_like.backends.torch.training.optimizers": ("deeplite_like.backends.torch.training.step", False),
    "deeplite_like.backends.torch.training_result": ("deeplite_like.backends.torch.training.estimate", False),
    "deeplite_like.backends.torch.training_step": ("deeplite_like.backends.torch.training.step", False),
    # cli
    "deeplite_like.commands": ("deeplite_like.cli", True),
    "deeplite_like.commands.check": ("deeplite_like.cli.check", False),
    "deeplite_like.commands.compare": ("deeplite_like.cli.commands", False),
    "deeplite_like.commands.demo": ("deeplite_like.cli.commands", False),
    "deeplite_like.commands.errors": ("deeplite_like.cli.exit_codes", False),
    "deeplite_like.commands.export_archive": ("deeplite_like.cli.loading.export_archive", False),
    "deeplite_like.commands.factory_guard": ("deeplite_like.cli.loading.preflight", False),
    "deeplite_like.commands.file_kinds": ("deeplite_like.cli.loading.preflight", False),
    "deeplite_like.commands.hub_models": ("deeplite_like.cli.loading.torch_files", False),
    "deeplite_like.cli.loading.hub_models": ("deeplite_like.cli.loading.torch_files", False),
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
    "deeplite_like.commands.sweep": ("deeplite_like.cli.commands", False),
    "deeplite_like.cli.sweep": ("deeplite_like.cli.commands", False),
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
    # First in line: an old path gives the new module even where a stale copy of the old file is
    # still findable (an editable install's finder, a wheel upgraded over an older one).
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


def lazy_exports(module_name: str, exports: Mapping[str, str], namespace: dict[str, Any],
                 not_provided: Mapping[str, str] | None = None
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the module ``module_name`` whose ``namespace`` is its globals.

    ``exports`` maps a public name to the module defining it; the first access imports that
    module and caches the value in ``namespace``, so later accesses cost nothing.
    ``not_provided`` maps a peer's name that is deliberately absent to what to use instead:
    accessing it raises ``NotProvidedError`` with that advice.
    """
    not_provided = dict(not_provided or {})

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            if name in not_provided:
                raise NotProvidedError(f"{module_name}.{name} (deeplite-profiler / DeepSpeed name) is not provided: "
                                       f"{not_provided[name]} (see docs/migration.rst)", name=name)
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
