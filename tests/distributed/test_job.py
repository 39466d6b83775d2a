"""``profile_job``: per-rank rows and whole-job figures gathered to rank 0, on 2 gloo ranks and under torchrun.

Hand derivations (fp32; ``f(t) = 4*t*d*h + 2*t*h + t*d`` is the MLP's forward FLOPs on t tokens,
``P = 2*d*h + h + d`` its parameters; d, h = 64, 256: P = 33,088):
* Tensor parallel (colwise + rowwise, 8 tokens): each rank 131,072 MACs, 264,768 FLOPs
  (``test_tensor_parallel``). Logical (the unsharded model once): MACs 2*8*64*256 = 262,144,
  FLOPs f(8) = 528,896; the job executes 2 x 264,768 = 529,536, 640 more: each rank adds the
  replicated bias of layer 2 in full (8*64 = 512, vs 256 as its share) and divides it by 2 (64).
  Parameters: 33,088 unsharded; held 2 x 16,576 = 33,152 (layer 2's bias is replicated).
  Communication: one all-reduce of 2,048 bytes per rank: 4,096 payload bytes for the job.
* DDP, forward only, rank 0 with 8 tokens and rank 1 with 4: FLOPs f(8) = 528,896 and
  f(4) = 264,448; logical = total = 793,344; imbalance = max/mean = 528,896 / 396,672 = 4/3.
  Each replica holds P: 66,176 held, 33,088 unsharded.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .launch import free_port, run_ranks
from .models import mlp, tensor_parallel_mlp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

ROOT = Path(__file__).resolve().parents[2]


def _job_worker(rank: int, world: int) -> dict:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.nn.parallel import DistributedDataParallel as DDP

    from deeplite_like.backends.torch.distributed import profile_job

    torch.manual_seed(1)
    x = torch.randn(8, 64)
    tp = profile_job(tensor_parallel_mlp(64, 256, init_device_mesh("cpu", (world,))), x)
    everywhere = profile_job(DDP(mlp(64, 256)), torch.randn(8 if rank == 0 else 4, 64), dst=None,
                             peak_flops=1e9, step_time_s=0.001 * (rank + 1))
    return {"tp": None if tp is None else tp.as_dict(), "tp_text": None if tp is None else tp.report().to_text(),
            "tp_csv": None if tp is None else tp.report().to_csv(), "ddp": everywhere.as_dict()}


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return run_ranks(_job_worker, 2)


@pytest.mark.slow  # (about 4 s here)
def test_tensor_parallel_job_rows_and_totals(ranks):
    assert ranks[1]["tp"] is None  # gathered to rank 0 only
    job = ranks[0]["tp"]
    assert [(r["rank"], r["macs"], r["flops"], r["params"], r["comm_payload_bytes"]) for r in job["ranks"]] == [
        (0, 131_072, 264_768, 16_576, 2_048), (1, 131_072, 264_768, 16_576, 2_048)]
    assert [r["logical_flops"] for r in job["ranks"]] == [264_448, 264_448]  # 528,896 / 2
    assert job["job"] == {"total_macs": 262_144, "total_flops": 529_536, "logical_macs": 262_144,
                          "logical_flops": 528_896, "unsharded_params": 33_088, "held_params": 33_152,
                          "imbalance": 1.0, "comm_payload_bytes": 4_096, "comm_bus_bytes": 4_096, "mfu": None}


def test_the_report_renders_a_row_per_rank_and_the_job(ranks):
    text, csv = ranks[0]["tp_text"], ranks[0]["tp_csv"]
    assert "529,536" in text and "528,896" in text and "33,152" in text and "imbalance (max/mean FLOPs) 1.000" in text
    lines = csv.strip().splitlines()
    assert lines[0].split(",")[:3] == ["rank", "MACs", "FLOPs"]
    assert [line.split(",")[:3] for line in lines[1:]] == [["0", "131072", "264768"], ["1", "131072", "264768"],
                                                          ["job", "262144", "529536"]]


def test_data_parallel_job_every_rank_gets_it_and_imbalance(ranks):
    assert ranks[0]["ddp"] == ranks[1]["ddp"]  # dst=None: all_gather_object
    job = ranks[0]["ddp"]
    assert [r["flops"] for r in job["ranks"]] == [528_896, 264_448]
    assert job["job"]["total_flops"] == job["job"]["logical_flops"] == 793_344
    assert job["job"]["imbalance"] == pytest.approx(4 / 3, abs=1e-12)
    assert (job["job"]["held_params"], job["job"]["unsharded_params"]) == (66_176, 33_088)
    # MFU: 793,344 logical FLOPs / (slowest step 0.002 s x 2 ranks x 1e9 FLOP/s) = 0.198336
    assert job["job"]["mfu"] == pytest.approx(0.198336, rel=1e-12)


def test_profile_job_outside_a_process_group_says_what_to_do():
    import torch

    from deeplite_like.backends.torch.distributed import profile_job

    with pytest.raises(RuntimeError, match="needs an initialised process group"):
        profile_job(torch.nn.Linear(2, 2), torch.ones(1, 2))


@pytest.mark.slow  # (about 6 s here)
def test_torchrun_launcher(tmp_path):
    out = tmp_path / "job.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
                    "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
                    str(ROOT / "tests" / "distributed" / "torchrun_job.py"), str(out)],
                   check=True, timeout=180, env=env, cwd=str(tmp_path), capture_output=True)
    result = json.loads(out.read_text())
    assert [r["macs"] for r in result["job"]["ranks"]] == [131_072, 131_072]
    assert result["job"]["job"]["logical_flops"] == 528_896
    assert "job" in result["text"]
