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
    return {"tp": tp.as_dict(), "ddp": ddp.as_dict()}


def test_four_ranks():
    job = run_ranks(_four_rank_worker, 4, timeout=240)[0]
    tp, ddp = job["tp"], job["ddp"]
    assert [r["macs"] for r in tp["ranks"]] == [65_536] * 4
    assert [(r["comm_payload_bytes"], r["comm_bus_bytes"]) for r in tp["ranks"]] == [(2_048, 3_072)] * 4
    assert (tp["job"]["logical_macs"], tp["job"]["logical_flops"]) == (262_144, 528_896)
    assert tp["job"]["total_flops"] - tp["job"]["logical_flops"] == 1_792
    assert [r["params"] for r in tp["ranks"]] == [64 * 64 + 64 + 64 * 64 + 64] * 4  # (256/4)*64 + 64 + 64*64 + 64
    assert [r["phases"]["forward"][0] for r in ddp["ranks"]] == [262_144] * 4
    assert [(r["comm_payload_bytes"], r["comm_bus_bytes"]) for r in ddp["ranks"]] == [(132_352, 198_528)] * 4
    assert ddp["job"]["logical_flops"] == ddp["job"]["total_flops"] == 4 * ddp["ranks"][0]["flops"]
