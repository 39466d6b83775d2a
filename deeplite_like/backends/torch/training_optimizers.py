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


def build_optimizer(optimizer: Any, params: list[torch.Tensor]) -> tuple[torch.optim.Optimizer, str]:
    """An optimizer over ``params`` from a name, an ``Optimizer`` class or a factory; and its name.

    Names: ``adamw``, ``adam``, ``sgd`` (momentum 0.9, so it keeps one state), ``adafactor``,
    ``adagrad``, ``rmsprop``. A name or a class is built with ``foreach=True`` where the class
    takes it (torch's default on CUDA). A factory is called as ``factory(params)``.
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
        return _from_class(cls, params, defaults), key
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        return _from_class(optimizer, params, {}), optimizer.__name__
    if callable(optimizer):
        built = optimizer(params)
        if not isinstance(built, torch.optim.Optimizer):
            raise TypeError(f"optimizer factory {optimizer!r} returned {type(built).__name__}, not a "
                            "torch.optim.Optimizer; it is called as factory(params)")
        return built, type(built).__name__
    raise TypeError(f"optimizer takes a name ({sorted(_OPTIMIZERS)}), an Optimizer class or a factory "
                    f"params -> optimizer, got {optimizer!r}")


def _from_class(cls: type, params: list[torch.Tensor], defaults: dict[str, Any]) -> torch.optim.Optimizer:
    kwargs = dict(defaults)
    if "foreach" in inspect.signature(cls.__init__).parameters:
        kwargs["foreach"] = True
    return cls(params, **kwargs)
