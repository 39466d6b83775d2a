"""Peak activation memory inside a rank: what this rank's shards hold, not the logical model's tensors.

Column-wise + row-wise MLP Linear(64 -> 256), ReLU, Linear(256 -> 64) on 8 tokens, fp32, 2 ranks.
Per rank the hidden layer holds 256 / 2 = 128 features:
    input x                    8 * 64 * 4  = 2,048 B
    column-wise addmm output   8 * 128 * 4 = 4,096 B
    ReLU output (not in place) 8 * 128 * 4 = 4,096 B, while the addmm output is still alive
    peak = 2,048 + 4,096 + 4,096 = 10,240 B, at aten.relu
    output (the all-reduced row-wise result, replicated) 8 * 64 * 4 = 2,048 B
The same MLP on one process (unsharded): 2,048 + 2 * 8 * 256 * 4 = 18,432 B.
"""
from __future__ import annotations

import pytest
import torch

from deeplite_like.backends.torch.memory import peak_activation_memory

from .launch import run_ranks
from .models import mlp, tensor_parallel_mlp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _worker(rank: int, world: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh

    from deeplite_like.backends.torch.memory import peak_activation_memory as peak

    model = tensor_parallel_mlp(64, 256, init_device_mesh("cpu", (world,)))
    stats = peak(model, (torch.randn(8, 64),))
    return {"peak": stats.peak_bytes, "input": stats.input_bytes, "output": stats.output_bytes,
            "at": stats.peak_op}


@pytest.mark.slow  # (about 4 s here)
def test_each_rank_reports_the_peak_of_its_own_shards():
    for rank in run_ranks(_worker, 2):
        assert rank == {"peak": 10_240, "input": 2_048, "output": 2_048, "at": "aten.relu.default"}
    unsharded = peak_activation_memory(mlp(64, 256), (torch.randn(8, 64),))
    assert unsharded.peak_bytes == 18_432
