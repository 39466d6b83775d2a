"""``TorchProfiler``: the core ``Profiler`` with every built-in metric of the PyTorch backend."""
from __future__ import annotations

from typing import Any, Mapping

import torch

from deeplite_like.argument_checks import check_profiler_options
from deeplite_like.backends.torch import data as _torch_data  # noqa: F401  (registers the tensor adapter)
from deeplite_like.backends.torch.functions import DEFAULT_FUNCTIONS
from deeplite_like.backends.torch.layers import SCRIPT_NO_LAYERS
from deeplite_like.backends.torch.placement import checked_device
from deeplite_like.caller import caller
from deeplite_like.data import ForwardPass, as_forward_pass
from deeplite_like.loaders import carried_forward_pass
from deeplite_like.profiler import Profiler
from deeplite_like.threads import check_num_threads


class TorchProfiler(Profiler):
    """Profiles a ``torch.nn.Module`` on its data splits.

    Args:
        model: the module; it is never modified (mode, device, dtype, hooks, grads are restored).
        data_splits: split name -> iterable of batches (a ``DataLoader``, a list of ``(x, y)``).
        name: shown in reports.
        forward_pass: which parts of a batch are the model's inputs (default: the one carried by
            splits from ``enable_forward_pass_data_splits``, else ``x`` of ``(x, y)``).
        register_defaults: register every built-in ``Compute*`` function (default ``True``).

    A TorchScript module (``torch.jit.script``/``trace``) is profiled like any module, except
    that it has no ``layerwise_summary`` (it takes no forward hooks): that key is not
    registered, and ``limits`` says why.

    Options of ``compute_network_status``: ``batch_size`` (default 1), ``split``, ``meta``,
    ``backward``, ``loss_fn``, ``causal_half``, ``mode``, ``device``, ``min_run_time``,
    ``num_threads`` (threads while timing: default 1, the stablest; ``None`` keeps torch's count;
    ``"auto"``: see ``backends/torch/timing.py``), ``include_weights`` (default ``True``: the
    memory footprint includes the parameters and buffers).
    """

    backend_name = "torch"

    def __init__(self, model: torch.nn.Module, data_splits: Mapping[str, Any] | None = None, name: str = "model",
                 forward_pass: ForwardPass | None = None, register_defaults: bool = True) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"TorchProfiler needs a torch.nn.Module, got {type(model).__qualname__}")
        super().__init__(model, data_splits, name)
        # splits from enable_forward_pass_data_splits carry their ForwardPass (deeplite-profiler's way)
        self.forward_pass = as_forward_pass(forward_pass or carried_forward_pass(data_splits), "TorchProfiler")
        if isinstance(model, torch.jit.ScriptModule):
            self.limits["layerwise_summary"] = SCRIPT_NO_LAYERS
        if register_defaults:
            for function in DEFAULT_FUNCTIONS:
                if not all(key.NAME in self.limits for key in function().get_bounded_status_keys()):
                    self.register_default_function(function())

    def _check_options(self, kwargs: Mapping[str, Any]) -> None:
        check_profiler_options(kwargs, caller("compute_network_status"))
        if kwargs.get("device") is not None:
            checked_device(kwargs["device"])
        check_num_threads(kwargs.get("num_threads"))

    @classmethod
    def from_inputs(cls, model: torch.nn.Module, *example: Any, name: str = "model", **kwargs: Any) -> "TorchProfiler":
        """A profiler whose only split, ``'test'``, is one batch of the given example input(s)."""
        if not example:
            raise ValueError("from_inputs needs at least one example input tensor")
        batch = example[0] if len(example) == 1 else tuple(example)
        forward_pass = ForwardPass(inputs=tuple(range(len(example)))) if len(example) > 1 else ForwardPass(
            extract=lambda b: b)
        return cls(model, {"test": [batch]}, name=name, forward_pass=forward_pass, **kwargs)

    def context(self) -> dict[str, Any]:
        return {**super().context(), "forward_pass": self.forward_pass}
