"""``get_model_profile`` and ``FlopsProfiler`` inside a rank: the rank's own figures and its communication.

Tensor-parallel MLP Linear(64 -> 256 -> 64) on 8 tokens, 2 gloo ranks (``test_tensor_parallel``):
each rank 131,072 MACs and 264,768 FLOPs forward, 16,576 parameters held, and one all-reduce of
the row-wise layer's (8, 64) fp32 output: 2,048 payload bytes, 2,048 bus bytes.
"""
from __future__ import annotations

import pytest

from .launch import run_ranks
from .models import tensor_parallel_mlp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _profile_worker(rank: int, world: int) -> dict:
    import torch
    from torch.distributed.device_mesh import init_device_mesh

    from deeplite_like.profiling import FlopsProfiler, get_model_profile

    model = tensor_parallel_mlp(64, 256, init_device_mesh("cpu", (world,)))
    torch.manual_seed(1)
    x = torch.randn(8, 64)
    profile = get_model_profile(model, args=(x,), print_profile=False, module_latency=False)
    profiler = FlopsProfiler(model)
    profiler.start_profile()
    model(x)
    flops, macs = profiler.get_total_flops(), profiler.get_total_macs()
    window = profiler.get_profile()
    profiler.end_profile()
    steps = {}
    for style in ("ddp", "fsdp2"):
        steps[style] = _training_step(style)
    return {"steps": steps, "profile": [profile.macs, profile.flops, profile.params],
            "comm": [[c.op, c.module, c.phase, c.calls, c.payload_bytes, c.bus_bytes] for c in profile.communication],
            "json_comm": profile.to_dict()["communication"], "text": profile.to_text(detailed=False),
            "window": [macs, flops], "window_comm": [[c.op, c.calls, c.payload_bytes] for c in window.communication]}


def _training_step(style: str) -> dict:
    """Phases and communication of one SGD training step of the MLP under ``FlopsProfiler``."""
    import torch
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    from deeplite_like.profiling import FlopsProfiler

    from .models import mlp

    model = mlp(64, 256)
    if style == "ddp":
        model = DDP(model)
    else:
        for unit in (model[0], model[2], model):
            fully_shard(unit)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(3)
    x = torch.randn(8, 64)
    profiler = FlopsProfiler(model)
    profiler.start_profile()
    model(x).sum().backward()
    optimizer.step()
    window = profiler.get_profile()
    profiler.end_profile()
    return {"phases": {k: [v.macs, v.flops] for k, v in window.phases.items() if k != "other"},
            "comm": sorted([c.kind, c.phase, c.calls, c.payload_bytes] for c in window.communication)}


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return run_ranks(_profile_worker, 2)


@pytest.mark.slow  # (about 4 s here)
def test_get_model_profile_reports_the_rank_and_its_communication(ranks):
    for rank in ranks:
        assert rank["profile"] == [131_072, 264_768, 16_576]
        assert rank["comm"] == [["_c10d_functional.all_reduce", "2", "forward", 1, 2_048, 2_048]]
        assert rank["json_comm"][0]["payload_bytes"] == 2_048 and rank["json_comm"][0]["group_size"] == 2
        assert ("_c10d_functional.all_reduce x1 in forward by 2: 2,048 / 2,048 bytes" in rank["text"])


def test_flops_profiler_window_counts_the_rank(ranks):
    for rank in ranks:
        assert rank["window"] == [131_072, 264_768]
        assert rank["window_comm"] == [["_c10d_functional.all_reduce", 1, 2_048]]


def test_a_training_step_splits_forward_backward_optimizer_per_rank(ranks):
    # SGD costs 2 FLOPs per parameter element it updates (tests/profiling/test_optim_formulas.py):
    # a DDP replica updates all P = 33,088: 66,176 FLOPs; an FSDP2 rank its half: 33,088.
    # Forward 262,144 MACs on the rank's 8 tokens; backward 3 x 65,536 x 2 = 393,216 MACs.
    for rank in ranks:
        ddp, fsdp = rank["steps"]["ddp"], rank["steps"]["fsdp2"]
        assert ddp["phases"]["forward"][0] == fsdp["phases"]["forward"][0] == 262_144
        assert ddp["phases"]["backward"][0] == fsdp["phases"]["backward"][0] == 393_216
        assert ddp["phases"]["optimizer"] == [0, 66_176]
        assert fsdp["phases"]["optimizer"] == [0, 33_088]
        assert ddp["comm"] == [["all_reduce", "backward", 1, 132_352]]
        gathered = [row for row in fsdp["comm"] if row[0] == "all_gather"]
        assert gathered == [["all_gather", "backward", 2, 132_352], ["all_gather", "forward", 1, 65_792],
                            ["all_gather", "forward", 1, 66_560]]
        # the last unit's reduce-scatter runs in FSDP2's end-of-backward callback, after FlopsProfiler's own
        # callback has closed the backward phase: it is filed under "other"; together, every gradient
        scattered = [row for row in fsdp["comm"] if row[0] == "reduce_scatter"]
        assert {row[1] for row in scattered} <= {"backward", "other"}
        assert (sum(row[2] for row in scattered), sum(row[3] for row in scattered)) == (2, 132_352)
