"""The optimizer of a measured training step: from a name, an ``Optimizer`` class or a factory."""
from __future__ import annotations

import inspect
from typing import Any

import torch

__all__ = ["build_optimizer"]

_OPTIMIZERS: dict[str, tuple[str, dict[str, Any]]] = {
    "adamw": ("AdamW", {}),
    "adam": ("Adam", {}),
    "sgd": ("SGD", {"lr": 1e-3, "momentum": 0.9}),
    "adafactor": ("Adafactor", {}),
    "adagrad": ("Adagrad", {}),
    "rmsprop": ("RMSprop", {}),
}


def build_optimizer(optimizer: Any, params: list[torch.Tensor], foreach: bool = True,
                    fused: bool = False) -> tuple[torch.optim.Optimizer, str, str]:
    """An optimizer over ``params`` from a name, an ``Optimizer`` class or a factory; its name and implementation.

    Names: ``adamw``, ``adam``, ``sgd`` (momentum 0.9, so it keeps one state), ``adafactor``,
    ``adagrad``, ``rmsprop``. A name or a class is built with ``foreach=True`` where the class
    takes it (torch's default on CUDA), ``foreach=False`` (the per-tensor loop, torch's default on
    CPU) or ``fused=True`` (which overrides ``foreach``). A factory is called as ``factory(params)`` and used as built.
    The implementation is ``"foreach"``, ``"for-loop"``, ``"fused"`` or, for a factory, what it
    chose (``"default"`` when it passed neither: torch then picks by device).
    """
    if isinstance(optimizer, str):
        key = optimizer.lower()
        if key not in _OPTIMIZERS:
            raise ValueError(f"optimizer={optimizer!r} is not a known name; use one of {sorted(_OPTIMIZERS)}, "
                             "an optimizer class, or a factory params -> optimizer")
        class_name, defaults = _OPTIMIZERS[key]
        cls = getattr(torch.optim, class_name, None)
        if cls is None:
            raise ValueError(f"optimizer={optimizer!r}: torch {torch.__version__} has no torch.optim.{class_name}")
        built = _from_class(cls, params, defaults, foreach, fused)
        return built, key, _implementation(built.defaults)
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        built = _from_class(optimizer, params, {}, foreach, fused)
        return built, optimizer.__name__, _implementation(built.defaults)
    if callable(optimizer):
        if fused or not foreach:  # (not silently ignored)
            raise ValueError("foreach= / fused= choose the implementation of an optimizer given by name or class; "
                             f"the factory {optimizer!r} builds its own: pass foreach=/fused= to the optimizer there")
        built = optimizer(params)
        if not isinstance(built, torch.optim.Optimizer):
            raise TypeError(f"optimizer factory {optimizer!r} returned {type(built).__name__}, not a "
                            "torch.optim.Optimizer; it is called as factory(params)")
        return built, type(built).__name__, _implementation(built.defaults)
    raise TypeError(f"optimizer takes a name ({sorted(_OPTIMIZERS)}), an Optimizer class or a factory "
                    f"params -> optimizer, got {optimizer!r}")


def _from_class(cls: type, params: list[torch.Tensor], defaults: dict[str, Any], foreach: bool,
                fused: bool) -> torch.optim.Optimizer:
    kwargs = dict(defaults)
    takes = inspect.signature(cls.__init__).parameters
    if fused:
        if "fused" not in takes:
            raise ValueError(f"fused=True: torch.optim.{cls.__name__} has no fused implementation (its __init__ takes "
                             "no 'fused'); use foreach=True or foreach=False")
        kwargs["fused"] = True
    if "foreach" in takes:
        kwargs["foreach"] = foreach and not fused
    elif not foreach and not fused:
        raise ValueError(f"foreach=False: torch.optim.{cls.__name__} takes no 'foreach' (it has one implementation); "
                         "leave foreach at its default")
    return cls(params, **kwargs)


def _implementation(defaults: dict[str, Any]) -> str:
    """Which step an optimizer runs, from its defaults: fused, foreach, for-loop, or torch's default."""
    if defaults.get("fused"):
        return "fused"
    if defaults.get("foreach") is None:
        return "default" if "foreach" in defaults else "single"
    return "foreach" if defaults["foreach"] else "for-loop"
