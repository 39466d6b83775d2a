"""Time (wall and CPU) and peak RSS of ``estimate_training_memory`` on Llama-2-7B- and 70B-shaped decoders (meta).

Each configuration runs in a fresh process (so its peak RSS is its own), and prints one row:
the measured figures next to what ``accelerate estimate-memory`` and DeepSpeed's ZeRO
estimators would say for the same parameter count (their formulas, restated in
``docs/memory.rst``).

    python benchmarks/bench_training_memory.py                 # the table in docs/memory.rst
    python benchmarks/bench_training_memory.py --one 7b none 1  # one configuration, as JSON
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

GIB = 2**30
CONFIGS = [  # model, sharding, world size, activation checkpointing
    ("7b", "none", 1, False),
    ("7b", "none", 1, True),
    ("7b", "zero2", 8, False),
    ("7b", "fsdp", 8, False),
    ("7b", "fsdp", 8, True),
    ("70b", "fsdp", 64, False),
    ("70b", "fsdp", 64, True),
]


def accelerate_adam(params: int) -> dict[str, int]:
    """``accelerate estimate-memory``'s "Training using Adam": the largest of its stages, batch 1.

    float32 row: model 4P, gradients 4P, optimizer 8P, step 16P -> 16P. float16 row (mixed
    precision): model 4P, gradients 6P, optimizer 8P, step 8P -> 8P. Activations are not counted.
    """
    return {"float32": 16 * params, "float16": 8 * params}


def deepspeed_zero2(params: int, gpus: int) -> int:
    """``estimate_zero2_model_states_mem_needs`` per GPU, no offload: 4P + 16P / gpus."""
    return 4 * params + int(16 * params / gpus)


def deepspeed_zero3(params: int, largest_layer: int, gpus: int) -> int:
    """``estimate_zero3_model_states_mem_needs`` per GPU, no offload: 4 * largest layer + 18P / gpus."""
    return 4 * largest_layer + int(18 * params / gpus)


def one(model_name: str, sharding: str, world_size: int, checkpointing: bool) -> dict:
    import torch

    from benchmarks.llama import llama_7b, llama_70b
    from deeplite_like.backends.torch import estimate_training_memory

    start, cpu = time.perf_counter(), time.process_time()
    model = llama_7b() if model_name == "7b" else llama_70b()
    ids = torch.zeros(1, 2048, dtype=torch.long, device="meta")
    result = estimate_training_memory(model, ids, labels=ids, optimizer="adamw", autocast="bf16",
                                      sharding=None if sharding == "none" else sharding, world_size=world_size,
                                      activation_checkpointing=True if checkpointing else None)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    params = sum(p.numel() for p in model.parameters())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return {
        "model": model_name, "sharding": sharding, "world_size": world_size, "checkpointing": checkpointing,
        "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "params": params, "params_bytes": result.params_bytes, "grads_bytes": result.grads_bytes,
        "optimizer_bytes": result.optimizer_bytes, "activations_bytes": result.activations_bytes,
        "peak_bytes": result.peak_bytes, "peak_at": result.peak_at,
        "accelerate": accelerate_adam(params),
        "deepspeed_zero2": deepspeed_zero2(params, world_size),
        "deepspeed_zero3": deepspeed_zero3(params, largest, world_size),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=4, metavar=("MODEL", "SHARDING", "WORLD", "CKPT"))
    args = parser.parse_args()
    if args.one:
        name, sharding, world, ckpt = args.one
        print(json.dumps(one(name, sharding, int(world), ckpt in ("1", "true", "True"))))
        return
    from prettytable import PrettyTable

    table = PrettyTable(["model", "sharding", "ckpt", "params", "grads", "optimizer", "activations", "peak",
                         "peak at", "time s", "CPU s", "RSS MiB", "accelerate fp16 / fp32", "DS zero2", "DS zero3"])
    for name, sharding, world, ckpt in CONFIGS:
        out = subprocess.run([sys.executable, __file__, "--one", name, sharding, str(world), str(int(ckpt))],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        gib = lambda n: f"{n / GIB:.2f}"  # noqa: E731
        table.add_row([name, f"{sharding} x{world}", "yes" if ckpt else "no", gib(row["params_bytes"]),
                       gib(row["grads_bytes"]), gib(row["optimizer_bytes"]), gib(row["activations_bytes"]),
                       gib(row["peak_bytes"]), row["peak_at"], row["seconds"], row["cpu_seconds"], row["max_rss_mib"],
                       f"{gib(row['accelerate']['float16'])} / {gib(row['accelerate']['float32'])}",
                       gib(row["deepspeed_zero2"]), gib(row["deepspeed_zero3"])])
    print("figures in GiB (2**30 bytes), per rank; Llama-shaped, seq 2048, batch 1, AdamW, bf16 autocast")
    print(table)


if __name__ == "__main__":
    main()
