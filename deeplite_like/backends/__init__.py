"""Backend registry: one ``Backend`` record per framework, the only table of backend modules.

A record says which models the backend handles, where its profiler class lives, where its model
profile lives (``get_model_profile``, ``FlopsProfiler``), which tensor types its ``TensorAdapter``
handles and the module that registers that adapter, and which framework and pip extra it needs.
Backends are matched by the names of the model's (or tensor's) classes, so no framework is
imported to choose one; the chosen backend module is imported only then.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Backend:
    """A backend: a name, a test on the model's type, where its profiler, profile and tensor adapter live."""

    name: str
    matches: Callable[[Any], bool]
    profiler_path: str  # "package.module:ClassName"
    extra: str
    requires: str  # the framework's import name, for the error message
    profile_module: str | None = None  # holds ``build_model_profile`` and ``FLOPS_PROFILER``
    tensor_types: tuple[tuple[str, str], ...] = ()  # (module, qualname) of the tensors its adapter handles
    adapter_module: str | None = None  # registers its ``TensorAdapter`` when imported

    def load(self) -> type:
        module_name, _, class_name = self.profiler_path.partition(":")
        try:
            importlib.import_module(self.requires)
        except ImportError as exc:
            raise ImportError(f"the {self.name} backend needs {self.requires}, which is not installed here; "
                              f"install it with: pip install 'deeplite-like[{self.extra}]'") from exc
        return getattr(importlib.import_module(module_name), class_name)

    def load_profile(self) -> Any:
        """The module holding this backend's model profile (``build_model_profile``, ``FLOPS_PROFILER``)."""
        if self.profile_module is None:
            profiled = [b.name for b in _BACKENDS.values() if b.profile_module is not None]
            raise TypeError(f"the {self.name} backend has no model profile; profiles exist for "
                            f"{', '.join(profiled)} models")
        try:
            importlib.import_module(self.requires)
        except ImportError as exc:
            raise ImportError(f"profiling a {self.name} model needs {self.requires}, which is not installed "
                              f"here; install it with: pip install 'deeplite-like[{self.extra}]'") from exc
        return importlib.import_module(self.profile_module)

    def load_adapter(self) -> None:
        """Import the module that registers this backend's tensor adapter (its framework is already loaded)."""
        if self.adapter_module is not None:
            importlib.import_module(self.adapter_module)


def _mro_names(model: Any) -> list[str]:
    return [f"{c.__module__}.{c.__qualname__}" for c in type(model).__mro__]


def _is_keras(model: Any) -> bool:
    return any(n.startswith(("keras.", "tf_keras.")) and n.endswith((".Layer", ".Model", ".Operation"))
               for n in _mro_names(model))


def _is_torch(model: Any) -> bool:
    return "torch.nn.modules.module.Module" in _mro_names(model)


def _is_onnx(model: Any) -> bool:
    """An ``onnx.ModelProto``, or a path to a ``.onnx`` file (bytes are not guessed: use ``OnnxProfiler``)."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model).lower().endswith(".onnx")
    return any(n.startswith("onnx.") and n.endswith(".ModelProto") for n in _mro_names(model))


def _is_tflite(model: Any) -> bool:
    """A path to a ``.tflite`` file, a flatbuffer's bytes (file identifier ``TFL3`` at bytes 4-8), or a read model."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model).lower().endswith(".tflite")
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model[4:8]) == b"TFL3"
    return "deeplite_like.backends.tflite.graph.TFLiteModel" in _mro_names(model)


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> None:
    """Add a backend; backends are tried in registration order."""
    _BACKENDS[backend.name] = backend


# Keras first: under Keras' torch backend a Keras model is also a torch.nn.Module.
register_backend(Backend("keras", _is_keras, "deeplite_like.backends.keras:KerasProfiler", "keras", "keras",
                         profile_module="deeplite_like.backends.keras.model_profile",
                         tensor_types=(("tensorflow.python.framework.ops", "EagerTensor"),),
                         adapter_module="deeplite_like.backends.keras.tensors"))
register_backend(Backend("torch", _is_torch, "deeplite_like.backends.torch:TorchProfiler", "torch", "torch",
                         profile_module="deeplite_like.backends.torch.model_profile",
                         tensor_types=(("torch", "Tensor"),), adapter_module="deeplite_like.backends.torch.inputs"))
register_backend(Backend("onnx", _is_onnx, "deeplite_like.backends.onnx:OnnxProfiler", "onnx", "onnx"))
register_backend(Backend("tflite", _is_tflite, "deeplite_like.backends.tflite:TFLiteProfiler", "tflite", "ai_edge_litert"))


def available_backends() -> tuple[str, ...]:
    return tuple(_BACKENDS)


def get_backend(name: str) -> type:
    """The profiler class of the backend ``name`` (``'torch'``, ``'keras'``)."""
    try:
        return _BACKENDS[name.lower()].load()
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(_BACKENDS)}") from None


def all_backends() -> tuple[Backend, ...]:
    """Every registered backend, in the order they are tried."""
    return tuple(_BACKENDS.values())


def backend_for(model: Any) -> Backend:
    for backend in _BACKENDS.values():
        if backend.matches(model):
            return backend
    raise TypeError(f"no backend handles a model of type {type(model).__module__}.{type(model).__qualname__}; "
                    f"supported: {', '.join(_BACKENDS)} models")


def profiler_for(model: Any, data_splits: Mapping[str, Any] | None = None, **kwargs: Any):
    """A profiler of the right backend for ``model`` (a Keras model is checked first)."""
    return backend_for(model).load()(model, data_splits, **kwargs)
