"""Small models for the distributed tests, and how each rank parallelises them (built inside a rank)."""
from __future__ import annotations

import torch
from torch import nn


def mlp(d: int, h: int, seed: int = 0) -> nn.Sequential:
    """Linear(d -> h), ReLU, Linear(h -> d), the same weights on every rank."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, d))


def tensor_parallel_mlp(d: int, h: int, mesh) -> nn.Sequential:
    """``mlp`` with its first layer column-wise and its second row-wise parallel on ``mesh``."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    return parallelize_module(mlp(d, h), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


def comm_rows(count) -> list[list]:
    """``[op, kind, group_size, module, phase, calls, payload_bytes, bus_bytes]`` of each collective, sorted."""
    return sorted([c.op, c.kind, c.group_size, c.module, c.phase, c.calls, c.payload_bytes, c.bus_bytes]
                  for c in count.communication)


def untouched(model: nn.Module, before: dict) -> bool:
    """Whether the model's state (local shards included) equals ``before`` (``snapshot(model)``) and no
    trace of counting is left (no wrapped forward, no dispatch mode)."""
    now = snapshot(model)
    same = now.keys() == before.keys() and all(torch.equal(now[k], before[k]) for k in now)
    clean = all("forward" not in m.__dict__ for m in model.modules()) and not torch.nn.modules.module._has_any_global_hook()
    return same and clean and torch._C._len_torch_dispatch_stack() == 0


def snapshot(model: nn.Module) -> dict:
    from deeplite_like.backends.torch.tensors import local_tensor

    state = {f"p:{k}": local_tensor(v).detach().clone() for k, v in model.named_parameters()}
    state.update({f"g:{k}": local_tensor(v.grad).clone() for k, v in model.named_parameters() if v.grad is not None})
    return state


def pipeline_stage(stage: int, stages: int = 2, seed: int = 0) -> nn.Sequential:
    """Stage ``stage`` of Linear(16 -> 64), ReLU, Linear(64 -> 32), ReLU, Linear(32 -> 64), ReLU, Linear(64 -> 8)
    (``test_pipeline``): of 2 stages split after the second Linear, of 4 after each Linear's ReLU."""
    torch.manual_seed(seed)
    full = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 64), nn.ReLU(),
                         nn.Linear(64, 8))
    if stages == 2:
        return full[:3] if stage == 0 else full[3:]
    return full[2 * stage:2 * stage + 2]
