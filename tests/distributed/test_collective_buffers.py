"""``profile_job``'s per-rank collective buffers: DDP's gradient buckets and FSDP2's all-gather / reduce-scatter
buffers, read from the wrapper on each gloo rank.

DDP: ``Linear(512 -> 1024), ReLU, Linear(1024 -> 512)``: (512*1024 + 1024 + 1024*512 + 512) * 4 = 4,200,448 B of
gradients. The reducer's buckets (``bucket_cap_mb``: 25 MiB; the first bucket 1 MiB, in reverse parameter order)
are [Linear 2's bias + weight: (512 + 524,288) * 4 = 2,099,200 B] (over 1 MiB: closed) and [Linear 1's:
(1024 + 524,288) * 4 = 2,101,248 B]: 4,200,448 B in all, the bytes the allocator sees DDP's constructor keep
(measured with a profiler around it: what is alive after it returns). Two more of the constructor's buffers
may still be alive when it returns, held by gloo's work objects until its thread drops them: on ranks other
than 0 the receive buffers of ``_verify_params_across_processes`` (96 B here, ``test_training_memory_ddp.py``),
and the flat copy of the parameters broadcast to sync the module states (4,200,448 B): sent from rank 0
(seen once in a run of 2 and 4 ranks at once), received on the others (seen on CI, ranks 1 and 2);
neither is a bucket. A run where gloo holds more is run again (``launch.run_ranks_checked``).

FSDP2: ``test_training_memory_fsdp.stack`` (three blocks of 132,352 B, a 16,640 B head as the root), fp32, no
padding on 2 or 4 ranks: all-gather buffers two blocks' outputs 2 * 132,352 = 264,704 B; reduce-scatter buffers
a block's input and one shard of it, 132,352 + 132,352 / n (198,528 B on 2 ranks, 165,440 B on 4). Under the
bf16 / fp32 policy the gathered blocks are bf16 (2 * 66,176 = 132,352 B) and the reduce-scatter fp32 as before.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from .launch import run_ranks, run_ranks_checked

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.slow]

GRADS = 4_200_448
VERIFY_RECEIVE = 96  # bytes, ranks other than 0 (test_training_memory_ddp.py)
GLOO_RECORD = 24  # bytes gloo may still hold, on any rank (test_training_memory_ddp.py)
SYNC_BROADCAST = 4_200_448  # bytes, any rank: the parameters, flat, sent or received (module docstring)


def _ddp_worker(rank: int, world: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile

    from deeplite_like.backends.torch.distributed import profile_job

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        ddp = DistributedDataParallel(model)
    kept = sum(e.nbytes() for e in prof.profiler.kineto_results.events()
               if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    job = profile_job(ddp, torch.randn(4, 512), dst=None)
    return {"kept": kept, "buffers": job.ranks[rank].collective_buffers, "report": job.report().to_text()}


def _check_ddp_buckets(ranks: list[dict]) -> None:
    for rank, r in enumerate(ranks):
        assert r["buffers"] == {"gradient buckets": GRADS}
        # gloo may still hold a 24 B record of its own on any rank (test_training_memory_ddp.py: GLOO_RECORD; seen
        # on rank 1 in a run under load), the flat broadcast of the parameters on any rank, and on ranks other
        # than 0 the receive buffers of the parameter check (module docstring)
        base = {0, SYNC_BROADCAST} if rank == 0 else {0, VERIFY_RECEIVE, SYNC_BROADCAST, SYNC_BROADCAST + VERIFY_RECEIVE}
        allowed = base | {b + GLOO_RECORD for b in base}
        assert r["kept"] - GRADS in allowed, (rank, r["kept"])
        assert "collective buffers (rank 0): gradient buckets 4,200,448 B" in r["report"]


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_gradient_buckets_are_what_its_constructor_keeps(world):
    run_ranks_checked(_ddp_worker, world, _check_ddp_buckets, timeout=300)


def _fsdp_worker(rank: int, world: int) -> dict:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from deeplite_like.backends.torch.distributed import profile_job

    from .test_training_memory_fsdp import stack

    out = {}
    for label, policy in (("plain", None), ("policy", MixedPrecisionPolicy(torch.bfloat16, torch.float32))):
        model = stack()
        extra = {} if policy is None else {"mp_policy": policy}
        for block in model.blocks:
            fully_shard(block, **extra)
        fully_shard(model, **extra)
        out[label] = profile_job(model, torch.randn(8, 64), dst=None).ranks[rank].collective_buffers
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_fsdp_buffers_per_rank(world):
    for r in run_ranks(_fsdp_worker, world, timeout=300):
        assert r["plain"] == {"all-gather buffers": 2 * 132_352, "reduce-scatter buffers": 132_352 + 132_352 // world}
        assert r["policy"] == {"all-gather buffers": 2 * 66_176, "reduce-scatter buffers": 132_352 + 132_352 // world}
