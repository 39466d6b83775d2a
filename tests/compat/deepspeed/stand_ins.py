"""What DeepSpeed's ported profiler tests import from DeepSpeed itself and its test helpers, here.

Written for this project (not DeepSpeed's code): the ported tests change only their import
lines, and these names stand in for DeepSpeed's where DeepSpeed is not installed.

* ``deepspeed``: the real package when it is installed; otherwise an object whose
  ``initialize`` skips the calling test, with that reason (a DeepSpeed engine is needed).
* ``DistributedTest``: DeepSpeed's base launches ``world_size`` processes; the ported tests use
  ``world_size = 1``, which is this process, so a plain base class runs them the same way.
* ``SimpleModel``, ``random_dataloader``: the shapes of DeepSpeed's helpers of those names
  (one ``Linear(hidden, hidden)`` and a cross-entropy loss; random ``(x, label)`` batches).
* ``required_torch_version``, ``get_accelerator``: the torch version check, and the CPU's dtypes.
"""
from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

NEEDS_ENGINE = ("needs deepspeed.initialize (a real DeepSpeed engine runs the training steps and its own profiler); "
                "deepspeed is not installed here")


def _skip_initialize(*args, **kwargs):
    pytest.skip(NEEDS_ENGINE)


if importlib.util.find_spec("deepspeed") is not None:  # pragma: no cover (not installed in this project's env)
    import deepspeed
else:
    deepspeed = SimpleNamespace(initialize=_skip_initialize)


class DistributedTest:
    """``world_size = 1``: the test runs in this process."""

    world_size = 1


class SimpleModel(torch.nn.Module):
    def __init__(self, hidden_dim: int, empty_grad: bool = False) -> None:
        super().__init__()
        self.linears = torch.nn.ModuleList([torch.nn.Linear(hidden_dim, hidden_dim)])
        self.cross_entropy_loss = torch.nn.CrossEntropyLoss()

    def forward(self, x, y):
        return self.cross_entropy_loss(self.linears[0](x), y)


def random_dataloader(model, total_samples, hidden_dim, device, dtype=torch.float32):
    data = torch.randn(total_samples, hidden_dim, device=device, dtype=dtype)
    labels = torch.randint(0, hidden_dim, (total_samples,), device=device)
    dataset = torch.utils.data.TensorDataset(data, labels)
    return torch.utils.data.DataLoader(dataset, batch_size=model.train_micro_batch_size_per_gpu())


def required_torch_version(min_version: float | None = None, max_version: float | None = None) -> bool:
    version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    as_tuple = (lambda v: tuple(int(part) for part in str(v).split(".")[:2]))
    return ((min_version is None or version >= as_tuple(min_version))
            and (max_version is None or version <= as_tuple(max_version)))


def get_accelerator():
    """The CPU accelerator: torch runs float32, float16 and bfloat16 on it."""
    return SimpleNamespace(supported_dtypes=lambda: [torch.float32, torch.float16, torch.bfloat16])
