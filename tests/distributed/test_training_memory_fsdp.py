"""estimate_training_memory(sharding="fsdp") against a real FSDP2 (``fully_shard``) step on gloo ranks.

Each rank runs ``tests/torch/allocator_steps.allocator_step`` with the model wrapped as users wrap it
(``fully_shard`` on each block, then on the root, FSDP2's defaults) next to the estimate for
``world_size`` ranks with ``comm_backend="gloo"``. The model (``stack``): three blocks of
Linear(64 -> 256), ReLU, Linear(256 -> 64) and a Linear(64 -> 64) head; AdamW (foreach), batch 8.
Unit sizes: a block (64*256 + 256 + 256*64 + 64) * 4 = 132,352 B; the root (the head) 4,160 * 4 = 16,640 B;
all parameters 3 * 132,352 + 16,640 = 413,696 B.

What the estimate leaves out, each found in the allocator's event tree (``experimental_event_tree``):
* the ``DeviceMesh`` that ``fully_shard`` makes holds ``arange(world_size)`` int64 twice (2 * 8 *
  world_size B: 32 B on 2 ranks, 64 B on 4): host bookkeeping, a CPU tensor on a GPU run too.
* gloo's work objects keep a finished all-gather's output and a reduce-scatter's clone of its input (a
  block's 132,352 B, the root's 16,640 B) until gloo's thread drops them: alive at the peak or not by
  timing, on any rank, the way DDP's test allows gloo's held bucket. Seen here: 0, 1 or 2 blocks' outputs
  at the estimate's peak (16,640 B once), and once (under load) 55,936 B above it, a held clone making
  the real peak elsewhere (at the end of the backward); on CI once three blocks and that 55,936 B. The
  estimate models FSDP2's own buffers; the test allows up to two blocks and the root held, and runs
  again when gloo held more (``launch.run_ranks_checked``: held blocks only ever add to the reading).
* under the bf16 / fp32 ``MixedPrecisionPolicy``: 128 B more on every rank, every run, not traced further.
The estimate is then exact: 1,272,000 B per rank on 2 ranks, 928,640 B on 4 (host counters included),
at the backward's prefetch of ``blocks.0`` during ``blocks.1``'s pre-backward (gloo's all-gather buffer);
and so are the variants, each against its own real step: the policy, ``reshard_after_forward=False``
(the blocks keep their gathered parameters from forward to backward). (SGD with momentum, run by
``benchmarks/bench_training_memory.py --fsdp-probe``, is exact on quiet ranks too; run as a fourth step
in one process here, its reference on rank 0 lost the copy's 413,696 B of parameters, not traced.)
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from .launch import run_ranks_checked

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.slow]


def stack() -> nn.Module:
    torch.manual_seed(0)

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
                                        for _ in range(3))
            self.head = nn.Linear(64, 64)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x)
    return Stack()


VARIANTS = ("plain", "policy", "no reshard")


def _worker(rank: int, world: int) -> dict:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from deeplite_like.backends.torch import estimate_training_memory
    from tests.torch.allocator_steps import allocator_step

    out = {}
    for variant in VARIANTS:
        mixed = MixedPrecisionPolicy(torch.bfloat16, torch.float32) if variant == "policy" else None
        reshard = variant != "no reshard"

        def wrap(model: nn.Module) -> nn.Module:  # as users wrap: each block, then the root (FSDP2's defaults)
            extra = {} if mixed is None else {"mp_policy": mixed}
            for block in model.blocks:
                fully_shard(block, reshard_after_forward=reshard, **extra)
            return fully_shard(model, **extra)

        model, x = stack(), torch.randn(8, 64)
        estimate = estimate_training_memory(model, x, optimizer="adamw", sharding="fsdp", world_size=world,
                                            reshard_after_forward=reshard, mixed_precision=mixed, comm_backend="gloo")
        real = allocator_step(model, (x,), optimizer=lambda p: torch.optim.AdamW(p, foreach=True), wrap=wrap)
        out[variant] = {"estimate": estimate.peak_bytes + estimate.optimizer_host_bytes,
                        "real": real.dispatcher_peak_bytes, "at": estimate.peak_at}
    return out


BLOCK, ROOT = 132_352, 16_640
GLOO_HELD = 2 * BLOCK + ROOT  # the most gloo's work objects were seen holding (module docstring)
POLICY_UNTRACED = 128  # bytes every rank holds above the estimate under the bf16 / fp32 policy (not traced)


@pytest.mark.parametrize("world, expected", [(2, 1_272_000), (4, 928_640)])
def test_fsdp_step_matches_the_allocator_on_every_rank(world, expected):
    def check(ranks: list[dict]) -> None:
        for rank, r in enumerate(ranks):
            assert r["plain"]["estimate"] == expected, (rank, r)
            assert r["plain"]["at"].startswith("backward: FSDP2 hooks before")
            for variant in VARIANTS:
                unseen = r[variant]["real"] - 2 * 8 * world - r[variant]["estimate"]
                unseen -= POLICY_UNTRACED if variant == "policy" else 0
                assert 0 <= unseen <= GLOO_HELD, (rank, variant, r[variant], unseen)
    run_ranks_checked(_worker, world, check, timeout=300)
