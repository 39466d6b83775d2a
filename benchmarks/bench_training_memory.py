"""Time (wall and CPU) and peak RSS of ``estimate_training_memory`` on Llama-2-7B- and 70B-shaped decoders (meta).

Each configuration runs in a fresh process (so its peak RSS is its own), and prints one row:
the measured figures next to what DeepSpeed's ZeRO estimators say for the same parameter count.

``--peers`` runs the peers themselves for Llama-2-7B where they install: ``accelerate
estimate-memory``'s own functions (``accelerate.commands.estimate``: ``calculate_maximum_sizes`` of
the model it builds - ``AutoModel.from_config`` under ``init_empty_weights``, which for Llama is
``LlamaModel``, without the LM head - then ``estimate_training_usage``), and DeepSpeed's
``estimate_zero2_model_states_mem_needs`` / ``estimate_zero3_model_states_mem_needs``. Where
DeepSpeed does not import, its formulas are restated from its 0.19.8 source
(``deepspeed/runtime/zero/stage_1_and_2.py`` and ``stage3.py``, no offload): ZeRO-2
``2P + int(18P / gpus)``, ZeRO-3 ``4 * largest_layer + int(18P / gpus)``.

    python benchmarks/bench_training_memory.py                 # the table in docs/memory.rst
    python benchmarks/bench_training_memory.py --one 7b none 1  # one configuration, as JSON
    python benchmarks/bench_training_memory.py --peers          # accelerate / DeepSpeed on the 7B
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
CONFIGS = [  # model, sharding, world size, activation checkpointing, precision
    ("7b", "none", 1, False, "autocast"),
    ("7b", "none", 1, True, "autocast"),
    ("7b", "zero2", 8, False, "autocast"),
    ("7b", "fsdp", 8, False, "autocast"),
    ("7b", "fsdp", 8, True, "autocast"),
    ("7b", "fsdp", 8, False, "fsdp-mp"),
    ("7b", "fsdp", 8, True, "fsdp-mp"),
    ("13b", "none", 1, False, "autocast"),
    ("13b", "fsdp", 8, False, "autocast"),
    ("13b", "fsdp", 8, True, "fsdp-mp"),
    ("70b", "fsdp", 64, False, "autocast"),
    ("70b", "fsdp", 64, True, "autocast"),
    ("70b", "fsdp", 64, False, "fsdp-mp"),
    ("70b", "fsdp", 64, True, "fsdp-mp"),
    ("70b", "fsdp", 64, True, "fsdp-mp-offload"),
]
# precision: "autocast" - bf16 autocast over float32 parameters (under FSDP: torch.autocast over fully_shard);
# "fsdp-mp" - FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), no autocast; "fsdp-mp-offload" -
# that policy and FSDP2's CPUOffloadPolicy (shards and the optimizer step on the host).


def deepspeed_zero2(params: int, gpus: int) -> int:
    """``estimate_zero2_model_states_mem_needs`` per GPU, no offload (DeepSpeed 0.19.8): 2P + 18P / gpus."""
    try:
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    except ImportError:
        return 2 * params + int(18 * params / gpus)
    return estimate_zero2_model_states_mem_needs(params, num_gpus_per_node=gpus, cpu_offload=False)[1]


def deepspeed_zero3(params: int, largest_layer: int, gpus: int) -> int:
    """``estimate_zero3_model_states_mem_needs`` per GPU, no offload: 4 * largest layer + 18P / gpus."""
    try:
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    except ImportError:
        return 4 * largest_layer + int(18 * params / gpus)
    return estimate_zero3_model_states_mem_needs(params, largest_layer, num_gpus_per_node=gpus, cpu_offload=False,
                                                 cpu_offload_params=False)[1]


def accelerate_peer() -> dict | None:
    """``accelerate estimate-memory``'s "Training using Adam" for Llama-2-7B, by accelerate's own functions
    on the model it builds (``AutoModel``: no LM head); None where accelerate or transformers is missing."""
    try:
        import transformers
        from accelerate import init_empty_weights
        from accelerate.commands.estimate import estimate_training_usage
        from accelerate.utils import calculate_maximum_sizes
    except ImportError:
        return None
    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32000)
    with init_empty_weights():
        model = transformers.AutoModel.from_config(config)
    total, _ = calculate_maximum_sizes(model)
    rows = {dtype: max(estimate_training_usage(total, dtype).values()) for dtype in ("float32", "float16")}
    return {"model": type(model).__name__, "params": sum(p.numel() for p in model.parameters()), **rows}


def one(model_name: str, sharding: str, world_size: int, checkpointing: bool, precision: str = "autocast") -> dict:
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    from benchmarks.llama import llama_7b, llama_13b, llama_70b
    from deeplite_like.backends.torch import estimate_training_memory

    start, cpu = time.perf_counter(), time.process_time()
    model = {"7b": llama_7b, "13b": llama_13b, "70b": llama_70b}[model_name]()
    ids = torch.zeros(1, 2048, dtype=torch.long, device="meta")
    if precision.startswith("fsdp-mp"):
        mixed = {"mixed_precision": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
                 "cpu_offload": precision.endswith("-offload")}
    else:
        mixed = {"autocast": "bf16"}
    result = estimate_training_memory(model, ids, labels=ids, optimizer="adamw",
                                      sharding=None if sharding == "none" else sharding, world_size=world_size,
                                      activation_checkpointing=True if checkpointing else None, **mixed)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    params = sum(p.numel() for p in model.parameters())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return {
        "model": model_name, "sharding": sharding, "world_size": world_size, "checkpointing": checkpointing,
        "precision": precision, "gather_bytes": result.gather_bytes, "offloaded_bytes": result.offloaded_bytes,
        "seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2), "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "params": params, "params_bytes": result.params_bytes, "grads_bytes": result.grads_bytes,
        "optimizer_bytes": result.optimizer_bytes, "activations_bytes": result.activations_bytes,
        "peak_bytes": result.peak_bytes, "peak_at": result.peak_at,
        "deepspeed_zero2": deepspeed_zero2(params, world_size),
        "deepspeed_zero3": deepspeed_zero3(params, largest, world_size),
    }


def _fsdp_probe_rank(rank: int, world: int) -> dict:
    """One gloo rank: the estimate (``comm_backend="gloo"``) beside a real fully_shard step read from the
    allocator, per option; ``above``: real less estimate less the DeviceMesh's 2 * 8 * world B (docs/memory.rst)."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from deeplite_like.backends.torch import estimate_training_memory
    from tests.distributed.test_training_memory_fsdp import stack  # (the FSDP2 tests' model: 3 units and a root)
    from tests.torch.allocator_steps import allocator_step

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    adamw = ("adamw", lambda p: torch.optim.AdamW(p, foreach=True))
    sgd = ("sgd", lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=True))
    out = {}
    runs = (("plain", None, True, adamw, 1, None), ("policy", policy, True, adamw, 1, None),
            ("no reshard", None, False, adamw, 1, None), ("sgd", None, True, sgd, 1, None),
            # gradient accumulation over 2 micro-batches, synced each time / only the last (FSDP2's
            # set_requires_gradient_sync(False) before the first): not modelled (docs/memory.rst)
            ("2 micro-batches", None, True, adamw, 2, None),
            ("2 micro-batches, sync last", None, True, adamw, 2, lambda m, i: m.set_requires_gradient_sync(i == 1)))
    for label, mixed, reshard, (name, make), k, before in runs:
        model, x = stack(), torch.randn(8, 64)
        estimate = estimate_training_memory(model, x, optimizer=name, sharding="fsdp", world_size=world,
                                            reshard_after_forward=reshard, mixed_precision=mixed, comm_backend="gloo",
                                            accumulation_steps=k)

        def wrap(m, mixed=mixed, reshard=reshard):  # (FSDP2's defaults for the root, as users wrap)
            extra = {} if mixed is None else {"mp_policy": mixed}
            for block in m.blocks:
                fully_shard(block, reshard_after_forward=reshard, **extra)
            return fully_shard(m, **extra)
        real = allocator_step(model, (x,), optimizer=make, wrap=wrap, accumulation_steps=k, before_micro_batch=before)
        figure = estimate.peak_bytes + estimate.optimizer_host_bytes
        out[label] = {"estimate": figure, "real": real.dispatcher_peak_bytes,
                      "above": real.dispatcher_peak_bytes - 16 * world - figure}
    return out


def fsdp_probe(world: int) -> list:
    """The estimate against real FSDP2 steps on ``world`` gloo ranks (docs/memory.rst, Sharding)."""
    from tests.distributed.launch import run_ranks

    return run_ranks(_fsdp_probe_rank, world, timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs="+", metavar="MODEL SHARDING WORLD CKPT [PRECISION]",
                        help="one row: e.g. 70b fsdp 64 0 fsdp-mp (precision: autocast, the default, or fsdp-mp)")
    parser.add_argument("--peers", action="store_true")
    parser.add_argument("--fsdp-probe", type=int, metavar="RANKS", default=None,
                        help="the estimate against real FSDP2 steps on RANKS gloo CPU ranks, read from the allocator")
    args = parser.parse_args()
    if args.fsdp_probe:
        print(json.dumps(fsdp_probe(args.fsdp_probe)))
        return
    if args.peers:
        from benchmarks.llama import llama_7b

        model = llama_7b()
        params = sum(p.numel() for p in model.parameters())
        largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
        print(json.dumps({"accelerate": accelerate_peer(), "deepspeed_zero2_x8": deepspeed_zero2(params, 8),
                          "deepspeed_zero3_x8": deepspeed_zero3(params, largest, 8), "params": params}))
        return
    if args.one:
        name, sharding, world, ckpt, *precision = args.one
        print(json.dumps(one(name, sharding, int(world), ckpt in ("1", "true", "True"), *precision)))
        return
    from prettytable import PrettyTable

    table = PrettyTable(["model", "sharding", "ckpt", "precision", "params", "grads", "optimizer", "activations", "peak",
                         "peak at", "time s", "CPU s", "RSS MiB", "DS zero2", "DS zero3"])
    for name, sharding, world, ckpt, precision in CONFIGS:
        out = subprocess.run([sys.executable, __file__, "--one", name, sharding, str(world), str(int(ckpt)), precision],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        gib = lambda n: f"{n / GIB:.2f}"  # noqa: E731
        table.add_row([name, f"{sharding} x{world}", "yes" if ckpt else "no", precision, gib(row["params_bytes"]),
                       gib(row["grads_bytes"]), gib(row["optimizer_bytes"]), gib(row["activations_bytes"]),
                       gib(row["peak_bytes"]), row["peak_at"], row["seconds"], row["cpu_seconds"], row["max_rss_mib"],
                       gib(row["deepspeed_zero2"]), gib(row["deepspeed_zero3"])])
    print("figures in GiB (2**30 bytes), per rank; Llama-shaped, seq 2048, batch 1, AdamW; bf16 autocast or "
          "FSDP2's bf16 / fp32 MixedPrecisionPolicy")
    print(table)


if __name__ == "__main__":
    main()
