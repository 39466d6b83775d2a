"""FSDP2 + tensor parallel on a 2-D mesh ((1, 2) and (2, 1) of 2 gloo ranks), and a sequence-parallel block.

MLP ``Linear(64 -> 256), ReLU, Linear(256 -> 64)``, 8 tokens per data-parallel rank, fp32, P = 33,088:
* mesh (dp=1, tp=2): the tensor-parallel figures (``test_tensor_parallel``): 131,072 MACs forward,
  3 x 65,536 backward; the only collective is the row-wise all-reduce of (8, 64): 2,048 bytes.
  FSDP2 on a 1-rank group gathers nothing. Each rank holds 16,576 parameters.
* mesh (dp=2, tp=1): the FSDP2 figures (``test_data_parallel``): 262,144 MACs forward, 393,216
  backward; all-gathers of 66,560 + 65,792 bytes in forward, again in backward, and reduce-scatters
  of 132,352 bytes. Each rank holds P/2 = 16,544.
* Block ``x + mlp(norm(x))`` with SequenceParallel(norm), ColwiseParallel(input Shard(1)),
  RowwiseParallel(output Shard(1)), on a (1, 8, 64) sequence split 4 + 4: the norm and the residual
  run on the rank's 4 tokens; the column-wise layer all-gathers the normalised sequence (1, 8, 64):
  S = 2,048 bytes, bus 1,024; the row-wise layer reduce-scatters its (1, 8, 64) partial output:
  S = 2,048, bus 1,024. The MLP between them is the tensor-parallel MLP on 8 tokens: 131,072 MACs.
"""
from __future__ import annotations

import pytest

from .launch import run_ranks
from .models import comm_rows, mlp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _block(torch, nn):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.norm = nn.LayerNorm(64)
            self.mlp = mlp(64, 256)

        def forward(self, x):
            return x + self.mlp(self.norm(x))

    return Block()


def _mesh_worker(rank: int, world: int) -> dict:
    import torch
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    from deeplite_like.backends.torch import count_ops
    from deeplite_like.backends.torch.params import parameter_stats

    out = {}
    for shape in ((1, 2), (2, 1)):
        mesh = init_device_mesh("cpu", shape, mesh_dim_names=("dp", "tp"))
        model = parallelize_module(mlp(64, 256), mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
        for unit in (model[0], model[2], model):
            fully_shard(unit, mesh=mesh["dp"])
        torch.manual_seed(rank)
        counted = count_ops(model, torch.randn(8, 64), backward=True)
        out[str(shape)] = {"phases": {k: v.macs for k, v in counted.phases.items()}, "untracked": counted.untracked,
                           "groups": sorted([c.kind, c.group.partition(":")[2]] for c in counted.communication),
                           "comm": [[row[0], row[4], row[5], row[6], row[7]] for row in comm_rows(counted)],
                           "params": parameter_stats(model).total_params}
    mesh = init_device_mesh("cpu", (world,))
    block = parallelize_module(_block(torch, nn), mesh, {
        "norm": SequenceParallel(), "mlp.0": ColwiseParallel(input_layouts=Shard(1)),
        "mlp.2": RowwiseParallel(output_layouts=Shard(1))})
    torch.manual_seed(2)
    x = torch.randn(1, 8, 64).chunk(world, dim=1)[rank]
    counted = count_ops(block, x)
    out["block"] = {"macs": counted.macs, "flops": counted.flops, "comm": comm_rows(counted),
                    "untracked": counted.untracked,
                    "norm": count_ops(nn.LayerNorm(64), torch.randn(1, 4, 64)).flops,
                    "by_module": {k: v.macs for k, v in counted.by_module.items()}}
    return out


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return run_ranks(_mesh_worker, 2)


@pytest.mark.slow  # (about 4 s here)
def test_fsdp2_and_tp_on_a_1x2_mesh_is_tensor_parallel(ranks):
    for rank in ranks:
        got = rank["(1, 2)"]
        assert got["phases"] == {"forward": 131_072, "loss": 0, "backward": 196_608}
        assert got["comm"] == [["_c10d_functional.all_reduce", "forward", 1, 2_048, 2_048]]
        assert got["params"] == 16_576 and got["untracked"] == {}
        # the communicating mesh dimension spans both ranks: DeviceMesh reuses the world's group for it
        assert got["groups"] == [["all_reduce", "default_pg"]]


def test_fsdp2_and_tp_on_a_2x1_mesh_is_fully_sharded_data_parallel(ranks):
    for rank in ranks:
        got = rank["(2, 1)"]
        assert got["phases"] == {"forward": 262_144, "loss": 0, "backward": 393_216}
        by_kind = {}
        for op, phase, calls, payload, bus in got["comm"]:
            total = by_kind.setdefault((op, phase), [0, 0, 0])
            total[0] += calls
            total[1] += payload
            total[2] += bus
        assert by_kind == {("c10d._allgather_base_", "forward"): [2, 132_352, 66_176],
                           ("c10d._allgather_base_", "backward"): [2, 132_352, 66_176],
                           ("c10d._reduce_scatter_base_", "backward"): [2, 132_352, 66_176]}
        assert got["params"] == 16_544 and got["untracked"] == {}
        assert {kind for kind, _ in got["groups"]} == {"all_gather", "reduce_scatter"}
        assert {group for _, group in got["groups"]} == {"default_pg"}


def test_sequence_parallel_block(ranks):
    for rank in ranks:
        got = rank["block"]
        assert got["macs"] == 131_072 and got["by_module"]["mlp"] == 131_072 and got["by_module"]["norm"] == 0
        # norm on 4 local tokens + the tensor-parallel MLP on 8 tokens (264,768) + residual add on 4*64
        assert got["flops"] == got["norm"] + 264_768 + 256
        assert got["comm"] == [
            ["_c10d_functional.all_gather_into_tensor", "all_gather", 2, "mlp.0", "forward", 1, 2_048, 1_024],
            ["_c10d_functional.reduce_scatter_tensor", "reduce_scatter", 2, "mlp.2", "forward", 1, 2_048, 1_024]]
        assert got["untracked"] == {}
