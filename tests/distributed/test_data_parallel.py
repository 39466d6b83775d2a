"""DDP and FSDP2 (``fully_shard``) on 2 gloo ranks: per-rank counts and gradient/parameter traffic.

Hand derivation for ``Linear(d -> h), ReLU, Linear(h -> d)`` on ``t`` tokens per rank, fp32,
``P = d*h + h + h*d + d`` parameters (64, 256: 33,088; 132,352 bytes):
* Each rank runs the whole model on its own batch: forward MACs 2*t*d*h; FLOPs
  4*t*d*h + t*h (bias 0) + t*h (ReLU) + t*d (bias 2). Backward of ``sum()`` (the input needs no
  grad): layer 2 grad input and grad weight, layer 0 grad weight: 3*t*d*h MACs.
* DDP: one all-reduce of every gradient bucket in backward; the buckets hold every gradient,
  so the payload is the sum of gradient bytes, 4P (132,352 bytes, bus 2(n-1)/n x 4P). DDP
  averages by dividing the reduced buckets by n: P more FLOPs than the unwrapped model's backward.
* FSDP2, each Linear a unit (and the root): forward all-gathers each unit's parameters
  (payload S = the unit's unsharded bytes, 4(h*d + h) and 4(d*h + d)); units reshard after
  forward, so backward all-gathers them again and reduce-scatters their gradients (S = 4P in
  all). fp32 gradients are averaged inside the reduce-scatter (``ReduceOp.AVG``): no division op.
  Each rank holds half of every parameter (dim-0 shards): P/2.
"""
from __future__ import annotations

import pytest

from .launch import run_ranks
from .models import comm_rows, mlp, snapshot, untouched

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CONFIGS = [(64, 256, 8), (32, 96, 6)]


def _n_params(d: int, h: int) -> int:
    return d * h + h + h * d + d


def _ddp_and_fsdp_worker(rank: int, world: int) -> dict:
    import torch
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    from deeplite_like.backends.torch import count_ops
    from deeplite_like.backends.torch.params import parameter_stats

    out = {}
    for d, h, t in CONFIGS:
        torch.manual_seed(10 + rank)  # each rank its own batch
        x = torch.randn(t, d)
        plain = count_ops(mlp(d, h), x, backward=True)

        ddp = DDP(mlp(d, h))
        before = snapshot(ddp)
        ddp_fwd = count_ops(ddp, x)
        ddp_step = count_ops(ddp, x, backward=True)
        ddp_again = count_ops(ddp, x, backward=True)  # DDP's 2nd iteration: broadcasts its rebuilt buckets
        ddp_third = count_ops(ddp, x, backward=True)  # steady state: as the 1st
        ddp_untouched = untouched(ddp, before)
        ddp(x).sum().backward()  # the model still trains as if never profiled
        twin = DDP(mlp(d, h))
        twin(x).sum().backward()
        ddp_grads_ok = all(torch.equal(a.grad, b.grad) for a, b in zip(ddp.parameters(), twin.parameters()))


        sharded = mlp(d, h)
        fully_shard(sharded[0])
        fully_shard(sharded[2])
        fully_shard(sharded)
        fsdp_before = snapshot(sharded)
        fsdp_step = count_ops(sharded, x, backward=True)  # the unit's first step
        fsdp_fwd = count_ops(sharded, x)
        fsdp_untouched = untouched(sharded, fsdp_before)
        out[f"{d},{h},{t}"] = {
            "plain": [plain.phases["forward"].macs, plain.phases["forward"].flops, plain.phases["backward"].macs,
                      plain.phases["backward"].flops],
            "ddp_fwd": [ddp_fwd.macs, ddp_fwd.flops], "ddp_fwd_comm": comm_rows(ddp_fwd),
            "ddp_step": [ddp_step.phases["backward"].macs, ddp_step.phases["backward"].flops],
            "ddp_comm": comm_rows(ddp_step), "ddp_group": [c.group for c in ddp_step.communication], "ddp_again": [ddp_again.macs == ddp_step.macs, ddp_again.flops == ddp_step.flops,
                          ddp_third.as_dict() == ddp_step.as_dict()],
            "ddp_again_comm": comm_rows(ddp_again),
            "ddp_untouched": ddp_untouched, "ddp_grads_ok": ddp_grads_ok, "ddp_untracked": ddp_step.untracked,
            "fsdp_fwd": [fsdp_fwd.macs, fsdp_fwd.flops], "fsdp_fwd_comm": comm_rows(fsdp_fwd),
            "fsdp_step": [fsdp_step.phases["backward"].macs, fsdp_step.phases["backward"].flops],
            "fsdp_comm": comm_rows(fsdp_step), "fsdp_untracked": fsdp_step.untracked,
            "fsdp_untouched": fsdp_untouched,
            "fsdp_params": parameter_stats(sharded).total_params, "ddp_params": parameter_stats(ddp).total_params,
        }
    # Buckets: Linear(256 -> 1024 -> 256) has 4 * 525,568 = 2,102,272 gradient bytes. DDP's first
    # iteration reduces them in one bucket, then rebuilds its buckets to bucket_cap_mb (0.5 MiB: each
    # 1 MiB weight alone) and, at the next forward, broadcasts the new bucket layout from rank 0.
    x = torch.randn(4, 256)
    big = DDP(mlp(256, 1024), bucket_cap_mb=0.5)
    first, second = count_ops(big, x, backward=True), count_ops(big, x, backward=True)
    out["buckets"] = [[[c.op, c.phase, c.calls, c.payload_bytes] for c in counted.communication]
                      for counted in (first, second)]
    return out


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return run_ranks(_ddp_and_fsdp_worker, 2)


@pytest.mark.slow  # (about 4 s here)
@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_ddp_each_rank_counts_a_whole_replica(ranks, d, h, t):
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        fwd_macs, fwd_flops = 2 * t * d * h, 4 * t * d * h + 2 * t * h + t * d  # (64,256,8): 262,144; 528,896
        assert got["plain"][:3] == [fwd_macs, fwd_flops, 3 * t * d * h]
        assert got["ddp_fwd"] == [fwd_macs, fwd_flops]
        assert got["ddp_fwd_comm"] == []  # no buffers: nothing to broadcast in forward
        # backward: the replica's backward, plus the averaging division of P gradient elements
        assert got["ddp_step"] == [3 * t * d * h, got["plain"][3] + _n_params(d, h)]
        assert got["ddp_untracked"] == {}


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_ddp_all_reduces_every_gradient_byte(ranks, d, h, t):
    grad_bytes = 4 * _n_params(d, h)  # (64, 256): 132,352 bytes in one bucket (under 25 MiB)
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        assert got["ddp_comm"] == [["c10d.allreduce_", "all_reduce", 2, "", "backward", 1, grad_bytes, grad_bytes]]
        assert got["ddp_group"] == ["0:default_pg"]  # the world


def test_ddp_buckets_add_up_to_the_gradient_bytes(ranks):
    grad_bytes = 4 * _n_params(256, 1024)
    assert grad_bytes == 2_102_272
    for rank in ranks:
        first, second = rank["buckets"]
        assert first == [["c10d.allreduce_", "backward", 1, grad_bytes]]
        reduced = [row for row in second if row[0] == "c10d.allreduce_"]
        assert len(reduced) == 1 and reduced[0][2] >= 2 and reduced[0][3] == grad_bytes  # more calls, same bytes
        assert [row[:2] for row in second if row[0] != "c10d.allreduce_"] == [["c10d.broadcast_", "forward"]]


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_ddp_counting_changes_nothing(ranks, d, h, t):
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        assert got["ddp_again"] == [True, True, True] and got["ddp_untouched"] and got["ddp_grads_ok"]
        # DDP's own one-time traffic at its 2nd iteration: rank 0 broadcasts the rebuilt bucket layout
        # (a handful of int32 indices); the gradient all-reduce is the same every iteration
        again = got["ddp_again_comm"]
        assert [row for row in again if row[0] == "c10d.allreduce_"] == got["ddp_comm"]
        assert {tuple(row[:5]) for row in again if row[0] != "c10d.allreduce_"} == {
            ("c10d.broadcast_", "broadcast", 2, "", "forward")}
        assert got["ddp_params"] == _n_params(d, h)  # a replica holds everything


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_fsdp2_counts_the_local_batch_and_gathers_each_unit(ranks, d, h, t):
    unit0, unit2 = 4 * (h * d + h), 4 * (d * h + d)  # (64, 256): 66,560 and 65,792 bytes
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        assert got["fsdp_fwd"] == got["plain"][:2]
        assert got["fsdp_step"] == got["plain"][2:]  # AVG inside the reduce-scatter: no extra op
        assert got["fsdp_fwd_comm"] == [["c10d._allgather_base_", "all_gather", 2, "0", "forward", 1, unit0, unit0 // 2],
                                        ["c10d._allgather_base_", "all_gather", 2, "2", "forward", 1, unit2, unit2 // 2]]
        total = unit0 + unit2  # = 4P, 132,352 bytes for (64, 256)
        # backward: unit 2's pre-backward hook gathers it again and prefetches unit 0 (both issued in unit 2's
        # backward); the post-backward hooks reduce-scatter every gradient: unit 2's from the autograd node
        # its forward pre-hook made (a module's own pre-hooks run inside its call), unit 0's, the last, from
        # the root's final callback (outside any module: root)
        assert got["fsdp_comm"] == sorted(got["fsdp_fwd_comm"] + [
            ["c10d._allgather_base_", "all_gather", 2, "2", "backward", 2, total, total // 2],
            ["c10d._reduce_scatter_base_", "reduce_scatter", 2, "", "backward", 1, unit0, unit0 // 2],
            ["c10d._reduce_scatter_base_", "reduce_scatter", 2, "2", "backward", 1, unit2, unit2 // 2]])
        assert got["fsdp_untracked"] == {}


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_fsdp2_holds_half_of_every_parameter_and_is_left_as_found(ranks, d, h, t):
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        assert got["fsdp_params"] == _n_params(d, h) // 2  # (64, 256): 16,544 of 33,088
        assert got["fsdp_untouched"]
