"""How the figures extrapolate to N ranks, checked on 4 gloo ranks against the 2-rank tests.

Per rank, for the MLP Linear(64 -> 256 -> 64) (P = 33,088 fp32 parameters, 132,352 bytes):
* tensor parallel, 8 tokens: MACs 2*8*64*256 / N (131,072 at N=2, 65,536 at N=4) shrink as 1/N;
  the row-wise all-reduce payload stays 8*64*4 = 2,048 bytes, its bus bytes grow as 2(N-1)/N
  (2,048 at N=2, 3,072 at N=4); the job's logical FLOPs stay 528,896 and its redundant work
  (the replicated bias, added in full and divided on every rank: 512 + 64 per rank against a
  logical 512) grows with N: 529,536 - 528,896 = 640 at N=2, 4 * 576 - 512 = 1,792 at N=4.
* DDP, 8 tokens per rank: per-rank MACs stay 262,144; the all-reduce payload stays 132,352
  bytes per rank, bus bytes 2(N-1)/N x 132,352 (198,528 at N=4); logical FLOPs grow as N.
"""
from __future__ import annotations

import pytest

from .launch import run_ranks
from .models import mlp, tensor_parallel_mlp

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.slow]


def _four_rank_worker(rank: int, world: int) -> dict:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.nn.parallel import DistributedDataParallel as DDP

    from deeplite_like.backends.torch.distributed import profile_job

    torch.manual_seed(1)
    tp = profile_job(tensor_parallel_mlp(64, 256, init_device_mesh("cpu", (world,))), torch.randn(8, 64), dst=None)
    ddp = profile_job(DDP(mlp(64, 256)), torch.randn(8, 64), backward=True, dst=None)
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from deeplite_like.backends.torch import count_ops

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(mlp(64, 256), mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    for unit in (model[0], model[2], model):
        fully_shard(unit, mesh=mesh["dp"])
    counted = count_ops(model, torch.randn(8, 64))
    mesh_2d = {"macs": counted.macs, "comm": sorted([c.op, c.group.partition(":")[2], c.calls, c.payload_bytes,
                                                     c.bus_bytes] for c in counted.communication)}
    return {"tp": tp.as_dict(), "ddp": ddp.as_dict(), "mesh_2d": mesh_2d}


@pytest.fixture(scope="module")
def four_ranks() -> list[dict]:
    return run_ranks(_four_rank_worker, 4, timeout=240)


def test_four_ranks(four_ranks):
    job = four_ranks[0]
    tp, ddp = job["tp"], job["ddp"]
    assert [r["macs"] for r in tp["ranks"]] == [65_536] * 4
    assert [(r["comm_payload_bytes"], r["comm_bus_bytes"]) for r in tp["ranks"]] == [(2_048, 3_072)] * 4
    assert (tp["job"]["logical_macs"], tp["job"]["logical_flops"]) == (262_144, 528_896)
    assert tp["job"]["total_flops"] - tp["job"]["logical_flops"] == 1_792
    assert [r["params"] for r in tp["ranks"]] == [64 * 64 + 64 + 64 * 64 + 64] * 4  # (256/4)*64 + 64 + 64*64 + 64
    assert [r["phases"]["forward"][0] for r in ddp["ranks"]] == [262_144] * 4
    assert [(r["comm_payload_bytes"], r["comm_bus_bytes"]) for r in ddp["ranks"]] == [(132_352, 198_528)] * 4
    assert ddp["job"]["logical_flops"] == ddp["job"]["total_flops"] == 4 * ddp["ranks"][0]["flops"]


def test_fsdp2_and_tp_on_a_2x2_mesh(four_ranks):
    # dp = tp = 2: each rank runs the TP MLP on its own 8 tokens: 131,072 MACs. The TP all-reduce (2,048
    # bytes) runs on the tp dimension's group; FSDP2 gathers each unit's TP shard over the dp dimension:
    # unit 0 holds (128*64 + 128) * 4 = 33,280 bytes per tp rank, unit 2 (64*128 + 64) * 4 = 33,024
    for rank in four_ranks:
        got = rank["mesh_2d"]
        assert got["macs"] == 131_072
        assert got["comm"] == [["_c10d_functional.all_reduce", "mesh_tp", 1, 2_048, 2_048],
                               ["c10d._allgather_base_", "mesh_dp", 1, 33_024, 16_512],
                               ["c10d._allgather_base_", "mesh_dp", 1, 33_280, 16_640]]
