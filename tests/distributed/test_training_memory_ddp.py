"""estimate_training_memory(sharding="ddp") against a real DistributedDataParallel step on gloo ranks.

Each rank runs ``tests/torch/allocator_steps.allocator_step`` with the model wrapped in DDP (the
allocator read from before DDP is built) next to the estimate for ``world_size`` ranks. The MLP
Linear(64 -> 256), ReLU, Linear(256 -> 64): (64*256 + 256) + (256*64 + 64) = 33,088 fp32
parameters = 132,352 B, which is also DDP's gradient bucket (one bucket: under 25 MiB), the
estimate's ``comm_buffer_bytes``.

AdamW peaks in its foreach step, after DDP has waited for the all-reduce (with SGD the peak is
in backward while the bucket is being all-reduced, and one run showed rank 1 a bucket-sized
buffer above the estimate, not traced further). Rank 0
matches to the byte. The other ranks hold small host buffers of DDP's own bookkeeping that rank 0
does not (found from the allocator's trace with stacks): the receive buffers of
``_verify_params_across_processes`` at construction (96 B here, allgathered parameter metadata)
and of ``_rebuild_buckets`` in the first step after the first (rank 0 broadcasts the rebuilt
bucket order: 20 B here), each freed when its gloo work object is; whether they are still alive at
the peak depends on that timing. That is the 116 B the issue saw on rank 1. The estimate leaves
them out (communication-library bookkeeping, like NCCL's own buffers). Under load, gloo's
all-reduce sometimes still holds its copy of the bucket (132,352 B) and/or 24 B at the peak, on any
rank: also left out (the same bookkeeping, freed with the work object), and allowed by the test,
which runs again when gloo held more (``launch.run_ranks_checked``).
"""
from __future__ import annotations

import pytest
import torch

from .launch import run_ranks_checked
from .models import mlp

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.slow]

PARAM_BYTES = 132_352
DDP_BOOKKEEPING = 96 + 20  # bytes, on ranks other than 0 (module docstring)
GLOO_RECORD = 24  # bytes gloo's all-reduce may still hold at the peak, on any rank
# (on rank 0 too under load: seen 40 and 96 B there, 2 runs in 5 while other work ran)


def _worker(rank: int, world: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    from deeplite_like.backends.torch import estimate_training_memory
    from tests.torch.allocator_steps import allocator_step

    model, x = mlp(64, 256), torch.randn(8, 64)
    estimate = estimate_training_memory(model, x, optimizer="adamw", sharding="ddp", world_size=world)
    real = allocator_step(model, (x,), optimizer=lambda p: torch.optim.AdamW(p, foreach=True),
                          wrap=DistributedDataParallel)
    return {"unseen": real.dispatcher_peak_bytes - estimate.peak_bytes - estimate.optimizer_host_bytes,
            "comm": estimate.comm_buffer_bytes, "peak_phase": estimate.peak_phase}


def _check(ranks: list[dict]) -> None:
    assert all(r["comm"] == PARAM_BYTES and r["peak_phase"] == "optimizer" for r in ranks)
    for rank, r in enumerate(ranks):
        unseen = r["unseen"]
        # gloo's all-reduce can still hold its copy of the bucket and/or a 24 B record of its own when
        # AdamW's step peaks: freed with its work object, which depends on timing (1 run in 3 under load)
        if unseen >= PARAM_BYTES:
            unseen -= PARAM_BYTES
        # (rank 0 is exact in a quiet run; under load its gloo buffers can be alive at the peak too)
        assert 0 <= unseen <= GLOO_RECORD + DDP_BOOKKEEPING, (rank, r["unseen"])


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_step_matches_the_allocator_on_every_rank(world):
    run_ranks_checked(_worker, world, _check)
