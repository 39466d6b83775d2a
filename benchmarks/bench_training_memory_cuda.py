"""``estimate_training_memory`` against a real training step on a CUDA GPU, read from the caching allocator.

One Llama-shaped decoder (transformers' ``LlamaForCausalLM`` from a config, random weights), one
step as users write it (``zero_grad``, forward, loss, ``backward``, ``optimizer.step()``) after a
warm-up step, so the optimizer's states exist (our ``steady_state=True``). The GPU side reports:

* ``max_memory_allocated`` over the measured step: the figure ``peak_bytes`` predicts, plus what
  the estimate lists apart in ``allowance`` (the caching allocator's 512-byte rounding, computed;
  the cuBLAS workspaces, which torch allocates through the caching allocator);
* ``memory_stats()``: reserved bytes at the peak and the reserved-but-unallocated bytes (the caching
  allocator's segments, never in an estimate);
* the CUDA context: device memory in use after ``torch.cuda.init()`` and before any tensor, from
  ``cudaMemGetInfo`` (other processes on the card count too: run it on an idle GPU).

    python benchmarks/bench_training_memory_cuda.py                  # 1B, batch 1 x 512, bf16 autocast, AdamW
    python benchmarks/bench_training_memory_cuda.py --model 3b --precision bf16
    python benchmarks/bench_training_memory_cuda.py --model tiny --device cpu   # the estimate only (no GPU)

The shapes: ``1b`` is Llama-3.2-1B's (hidden 2048, 16 layers, 32 heads, 8 KV heads, MLP 8192,
vocabulary 128,256, tied embeddings), ``3b`` Llama-3.2-3B's (3072, 28 layers, 24 / 8 heads, 8192).
Prints one JSON object; record the card and the figures in docs/memory.rst.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SHAPES = {  # hidden, layers, heads, kv heads, intermediate, vocabulary, tied embeddings
    "tiny": (64, 2, 4, 2, 128, 256, False),
    "1b": (2048, 16, 32, 8, 8192, 128256, True),
    "3b": (3072, 28, 24, 8, 8192, 128256, True),
}


def build(name: str, device: str, dtype):  # noqa: ANN001, ANN201 - torch objects, imported late
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, layers, heads, kv_heads, inter, vocab, tied = SHAPES[name]
    config = LlamaConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, intermediate_size=inter, vocab_size=vocab,
                         tie_word_embeddings=tied, max_position_embeddings=8192, attn_implementation="sdpa")
    with torch.device(device):
        model = LlamaForCausalLM(config)
    return model.to(dtype=dtype).train()


def real_step(model, ids, precision: str) -> dict:  # noqa: ANN001 - torch objects, imported late
    """One warm-up and one measured step on CUDA; the caching allocator's figures of the measured one."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16-autocast")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()

    step()  # warm-up: the optimizer's states, cuBLAS handles and workspaces exist after it
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    began = time.perf_counter()
    step()
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    return {
        "start_allocated_bytes": start,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "reserved_unallocated_at_end": stats["reserved_bytes.all.current"] - stats["allocated_bytes.all.current"],
        "active_peak_bytes": stats["active_bytes.all.peak"],
        "inactive_split_peak_bytes": stats["inactive_split_bytes.all.peak"],
        "device_used_bytes": total - free,
        "step_s": round(time.perf_counter() - began, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(SHAPES), default="1b")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--precision", choices=["bf16-autocast", "bf16"], default="bf16-autocast",
                        help="bf16-autocast: float32 parameters under autocast; bf16: parameters in bfloat16")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = parser.parse_args()

    import torch

    from deeplite_like.backends.torch.training.estimate import estimate_training_memory

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device here: run on a GPU, or pass --device cpu for the estimate alone")
    out: dict = {"model": args.model, "batch": args.batch, "seq": args.seq, "precision": args.precision,
                 "torch": torch.__version__}
    if args.device == "cuda":
        torch.cuda.init()
        free, total = torch.cuda.mem_get_info()
        out.update(card=torch.cuda.get_device_name(), capability=".".join(map(str, torch.cuda.get_device_capability())),
                   total_bytes=total, context_bytes=total - free)

    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    model = build(args.model, "meta", dtype)
    ids = torch.randint(0, SHAPES[args.model][5], (args.batch, args.seq), device="meta")
    began = time.process_time()
    est = estimate_training_memory(model, optimizer="adamw", input_ids=ids, labels=ids,
                                   autocast="bf16" if args.precision == "bf16-autocast" else None)
    out["estimate"] = {
        "cpu_s": round(time.process_time() - began, 2), "params_bytes": est.params_bytes, "grads_bytes": est.grads_bytes,
        "optimizer_bytes": est.optimizer_bytes, "activations_bytes": est.activations_bytes,
        "peak_bytes": est.peak_bytes, "peak_phase": est.peak_phase, "peak_op": est.peak_op,
        "rounding_bytes": est.allowance.rounding_bytes, "cublas_workspace_bytes": est.allowance.cublas_workspace_bytes,
    }
    del model
    if args.device == "cuda":
        torch.manual_seed(0)
        model = build(args.model, "cuda", dtype)
        ids = torch.randint(0, SHAPES[args.model][5], (args.batch, args.seq), device="cuda")
        real = real_step(model, ids, args.precision)
        out["real"] = real
        predicted = est.peak_bytes + est.allowance.rounding_bytes
        out["peak_minus_estimate_bytes"] = real["max_memory_allocated"] - predicted
        out["peak_over_estimate"] = round(real["max_memory_allocated"] / predicted, 4)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
