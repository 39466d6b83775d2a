"""Tensor parallel (DTensor) on 2 gloo ranks: each rank counts its local shards, and the collectives.

Hand derivation for the column-wise + row-wise MLP ``Linear(d -> h), ReLU, Linear(h -> d)`` on
``t`` tokens and ``n`` ranks (fp32, 4 bytes), per rank:
* layer 0, column-wise: weight shard (h/n, d), bias shard h/n; local ``addmm`` (t, d) @ (d, h/n):
  MACs t*d*h/n; FLOPs 2*t*d*h/n + t*h/n (bias).
* ReLU on (t, h/n): t*h/n FLOPs.
* layer 2, row-wise: weight shard (d, h/n), bias replicated: DTensor adds the bias on one share
  only, by dividing it by n on every rank (``div``: d FLOPs), then a local ``addmm``
  (t, h/n) @ (h/n, d): MACs t*h*d/n; FLOPs 2*t*h*d/n + t*d.
* communication: the row-wise layer's output hook all-reduces the partial sums, (t, d) fp32:
  payload S = 4*t*d bytes, bus bytes 2(n-1)/n * S.
The logical (unsharded) MACs are n times the per-rank MACs: 2*t*d*h.
"""
from __future__ import annotations

import pytest

from .launch import run_ranks
from .models import comm_rows, mlp, snapshot, tensor_parallel_mlp, untouched

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# (d, h, tokens): the issue's scenario first, then variations of the same class
CONFIGS = [(64, 256, 8), (32, 96, 5), (16, 64, 3)]


def _tp_worker(rank: int, world: int) -> dict:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.utils.flop_counter import FlopCounterMode

    from deeplite_like.backends.torch import count_ops
    from deeplite_like.backends.torch.params import parameter_stats

    mesh = init_device_mesh("cpu", (world,))
    out = {}
    for d, h, t in CONFIGS:
        model = tensor_parallel_mlp(d, h, mesh)
        torch.manual_seed(1)
        x = torch.randn(t, d)
        expected = model(x)
        before = snapshot(model)
        fwd = count_ops(model, x)
        bwd = count_ops(model, x, backward=True)
        x_grad = x.clone().requires_grad_(True)
        bwd_x = count_ops(model, x_grad, backward=True)
        with CommDebugMode() as comm:  # torch's own count of the collectives of one forward
            model(x)
        with FlopCounterMode(display=False) as logical:  # torch's count: the logical (global) matmuls
            model(x)
        out[f"{d},{h},{t}"] = {
            "fwd": [fwd.macs, fwd.flops], "untracked": fwd.untracked, "fwd_comm": comm_rows(fwd),
            "by_module": {k: v.macs for k, v in fwd.by_module.items()},
            "bwd_phase": bwd.phases["backward"].macs, "bwd_comm": comm_rows(bwd),
            "bwd_x_phase": bwd_x.phases["backward"].macs, "bwd_x_comm": comm_rows(bwd_x),
            "torch_comm_calls": comm.get_total_counts(),
            "same_output": bool(torch.equal(model(x), expected)), "untouched": untouched(model, before),
            "params": parameter_stats(model).total_params,
            "plain_macs": count_ops(mlp(d, h), x).macs,
            "logical": [fwd.logical_macs, fwd.logical_flops], "torch_logical_flops": logical.get_total_flops(),
            "plain_flops": count_ops(mlp(d, h), x).flops,
        }
    try:
        count_ops(tensor_parallel_mlp(16, 64, mesh), torch.randn(3, 16), meta=True)
        out["meta"] = "no error"
    except ValueError as exc:
        out["meta"] = str(exc)
    return out


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return run_ranks(_tp_worker, 2)


@pytest.mark.slow  # (about 6 s here)
@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_each_rank_counts_its_local_shards(ranks, d, h, t):
    n = 2
    macs = t * d * h // n + t * h * d // n  # (64, 256, 8): 65,536 + 65,536 = 131,072, not 262,144
    flops = (2 * t * d * h // n + t * h // n) + t * h // n + (d + 2 * t * h * d // n + t * d)
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        assert got["fwd"] == [macs, flops]
        assert got["by_module"] == {"": macs, "0": t * d * h // n, "1": 0, "2": t * h * d // n}
        assert got["untracked"] == {}
        assert got["plain_macs"] == n * macs  # the logical op: what one unsharded replica computes


def test_the_issue_scenario_numbers(ranks):
    # Linear 64->256->64, 8 tokens, 2 ranks: 8*64*128 + 8*128*64 = 131,072 MACs per rank;
    # FLOPs 132,096 (addmm + bias) + 1,024 (relu) + 64 (bias / 2) + 131,584 (addmm + bias) = 264,768
    assert [rank["64,256,8"]["fwd"] for rank in ranks] == [[131_072, 264_768]] * 2


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_the_output_all_reduce_is_communication_of_the_rowwise_layer(ranks, d, h, t):
    payload = 4 * t * d  # (64, 256, 8): 2,048 bytes; bus 2(2-1)/2 * 2,048 = 2,048
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        assert got["fwd_comm"] == [["_c10d_functional.all_reduce", "all_reduce", 2, "2", "forward", 1, payload,
                                    payload]]
        assert got["torch_comm_calls"] == 1  # CommDebugMode agrees: one collective per forward


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_backward_counts_local_gradients(ranks, d, h, t):
    n, local = 2, t * d * h // 2
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        # layer 2: grad input (t,d)@(d,h/n) and grad weight (d,t)@(t,h/n); layer 0: grad weight (h/n,t)@(t,d);
        # the input needs no grad, so layer 0's grad input is not computed: 3 local contractions
        assert got["bwd_phase"] == 3 * local
        # an input that requires grad adds layer 0's grad input (t,h/n)@(h/n,d), and its all-reduce in backward
        assert got["bwd_x_phase"] == 4 * local
        assert got["bwd_comm"] == [["_c10d_functional.all_reduce", "all_reduce", n, "2", "forward", 1, 4 * t * d,
                                    4 * t * d]]
        # the input's grad is all-reduced by the autograd node layer 0's input hook made (from_local):
        # a module's own forward pre-hooks run inside its call, so in backward it belongs to layer 0
        backward_rows = [row for row in got["bwd_x_comm"] if row[4] == "backward"]
        assert backward_rows == [["_c10d_functional.all_reduce", "all_reduce", n, "0", "backward", 1, 4 * t * d,
                                  4 * t * d]]


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_parameters_are_the_local_shards(ranks, d, h, t):
    # weight 0 (h/2, d) + bias 0 h/2 + weight 2 (d, h/2) + bias 2 (replicated) d; (64, 256): 16,576 of 33,088
    for rank in ranks:
        assert rank[f"{d},{h},{t}"]["params"] == h // 2 * d + h // 2 + d * h // 2 + d


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_counting_changes_nothing(ranks, d, h, t):
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        assert got["same_output"] and got["untouched"]


@pytest.mark.parametrize("d, h, t", CONFIGS)
def test_each_rank_has_half_of_the_logical_model(ranks, d, h, t):
    for rank in ranks:
        got = rank[f"{d},{h},{t}"]
        # the logical model is the unsharded MLP: the ranks' shares add up to it, 2 x share
        assert [2 * got["logical"][0], 2 * got["logical"][1]] == [got["plain_macs"], got["plain_flops"]]
        # torch's FlopCounterMode counts the logical matmuls on every rank (2 x MACs): the issue's 524,288
        assert got["torch_logical_flops"] == 2 * got["plain_macs"] == 4 * got["logical"][0]


def test_meta_counting_of_a_sharded_model_is_refused_with_the_way_out(ranks):
    for rank in ranks:
        assert rank["meta"].startswith("count_ops(meta=True) cannot count Sequential: it holds DTensor parameters")
        assert "count with meta=False inside each rank" in rank["meta"]
