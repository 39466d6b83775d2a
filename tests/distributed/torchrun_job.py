"""A user's script, as ``torchrun`` runs it: ``python -m torch.distributed.run --nproc-per-node 2 torchrun_job.py OUT``.

Each rank builds the tensor-parallel MLP (Linear 64 -> 256 -> 64, 8 tokens), ``profile_job``
gathers the figures to rank 0, which writes ``JobProfile.as_dict()`` and the text report to OUT.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, as the tests' conftest does

from deeplite_like.backends.torch.distributed import profile_job  # noqa: E402
from tests.distributed.launch import exit_now  # noqa: E402
from tests.distributed.models import tensor_parallel_mlp  # noqa: E402


def main(out: str) -> None:
    dist.init_process_group("gloo")  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    try:
        from torch.distributed.device_mesh import init_device_mesh

        torch.set_num_threads(1)
        model = tensor_parallel_mlp(64, 256, init_device_mesh("cpu", (dist.get_world_size(),)))
        torch.manual_seed(1)
        job = profile_job(model, torch.randn(8, 64))
        if dist.get_rank() == 0:
            Path(out).write_text(json.dumps({"job": job.as_dict(), "text": job.report().to_text()}))
        else:
            assert job is None
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    exit_now()
