"""A module's own ``compute_module_complexity(inputs, outputs)`` method, priced like a module formula.

deeplite-profiler lets a custom module describe its own cost: a method
``compute_module_complexity(self, inputs, outputs)`` called after each forward with the
forward's positional inputs (a tuple) and its output. The counting engine honours it the way it
honours ``register_module_formula``: the module is priced whole, the operators inside it are not
counted, and the cost is reported under ``module:<ClassName>``.

What the method may return:

* a ``Cost(macs, flops)``: used as is;
* deeplite's dict, ``{'flops': n, ...}``: ``n`` is the module's multiply-accumulates (deeplite's
  ``flops`` are MACs, shown as GigaMACs), so it costs ``Cost.contraction(n)`` (FLOPs = 2 x n);
  ``param_size``, ``activation_size`` and ``params`` (deeplite's bytes per element for a
  quantised module) do not change counting: sizes and memory are read from the real tensors;
* a dict with ``macs`` and ``flops`` (ours): ``Cost(macs, flops)``;
* a number: MACs, as deeplite's ``flops``.
"""
from __future__ import annotations

from collections.abc import Mapping
from numbers import Real
from typing import Any

import torch

from .registry import Cost

METHOD = "compute_module_complexity"


def _count(value: Any, what: str, module: torch.nn.Module) -> int:
    if isinstance(value, bool) or not isinstance(value, Real) or value < 0:
        raise TypeError(f"{type(module).__name__}.{METHOD} returned {what}={value!r}; expected a non-negative number")
    return int(value)


def as_cost(result: Any, module: torch.nn.Module) -> Cost:
    """The ``Cost`` a ``compute_module_complexity`` result stands for (see the module docstring)."""
    if isinstance(result, Cost):
        return result
    if isinstance(result, Mapping):
        if "macs" in result:
            macs = _count(result["macs"], "macs", module)
            return Cost(macs, _count(result.get("flops", 2 * macs), "flops", module))
        if "flops" in result:
            return Cost.contraction(_count(result["flops"], "flops", module))
        raise TypeError(f"{type(module).__name__}.{METHOD} returned a dict with keys {sorted(map(str, result))}; "
                        "it needs 'flops' (deeplite: the module's multiply-accumulates) or 'macs' and 'flops'")
    if isinstance(result, Real) and not isinstance(result, bool):
        return Cost.contraction(_count(result, "flops", module))
    raise TypeError(f"{type(module).__name__}.{METHOD} returned {type(result).__name__}; expected a Cost, a dict "
                    "{'flops': macs, ...} or a number of multiply-accumulates")


def own_complexity_formula(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> Cost:
    """Module formula calling ``module.compute_module_complexity(args, output)`` (keyword inputs too, if any)."""
    method = getattr(module, METHOD)
    result = method(tuple(args), output, **kwargs) if kwargs else method(tuple(args), output)
    return as_cost(result, module)
