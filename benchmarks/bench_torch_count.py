"""Counting speed and agreement, PyTorch backend.

Runs in one process, on the same models: the plain forward, our ``count_ops`` (real tensors and
meta), ``torch.utils.flop_counter.FlopCounterMode`` (and fvcore / ptflops when installed).
Prints each tool's counts side by side and its time as a ratio to the plain forward, then
counts a 7-billion-parameter decoder configuration on the meta device (time, peak RSS).

    python benchmarks/bench_torch_count.py            # the figures in docs/benchmarks.rst
    python benchmarks/bench_torch_count.py --repeats 50
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
import warnings

import torch
from prettytable import PrettyTable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.decoder import LLAMA_7B, Decoder  # noqa: E402
from deeplite_like.backends.torch import count_ops  # noqa: E402
from deeplite_like.zoo import get  # noqa: E402


def median_time(fn, repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def flop_counter(model, x):
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as mode:
        model(x)
    return mode.get_total_flops()


def tools(model, x):
    """name -> (callable, result -> (macs or None, flops))."""
    found = {
        "forward": (lambda: model(x), None),
        "count_ops": (lambda: count_ops(model, x), lambda r: (r.macs, r.flops)),
        "count_ops meta": (lambda: count_ops(model, x, meta=True), lambda r: (r.macs, r.flops)),
        "FlopCounterMode": (lambda: flop_counter(model, x), lambda r: (None, r)),
    }
    try:
        from fvcore.nn import FlopCountAnalysis

        found["fvcore"] = (lambda: FlopCountAnalysis(model, x).unsupported_ops_warnings(False).total(),
                           lambda r: (r, None))
    except ImportError:
        pass
    try:
        from ptflops import get_model_complexity_info

        shape = tuple(x.shape[1:])
        found["ptflops"] = (lambda: get_model_complexity_info(model, shape, as_strings=False,
                                                              print_per_layer_stat=False, verbose=False)[0],
                            lambda r: (int(r), None))
    except ImportError:
        pass
    return found


def compare_models(repeats: int) -> PrettyTable:
    table = PrettyTable(["model", "batch", "tool", "MACs", "FLOPs", "time / forward"])
    table.align = "r"
    for name, batch in (("resnet_small", 1), ("mobilenet_small", 1), ("transformer_encoder", 8),
                        ("lstm_tagger", 8)):
        entry = get(name)
        model, x = entry.build(), entry.example_input(batch_size=batch)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            baseline = None
            for tool, (run, unpack) in tools(model, x).items():
                seconds = median_time(run, repeats)
                baseline = baseline or seconds
                macs, flops = unpack(run()) if unpack else (None, None)
                table.add_row([name, batch, tool, f"{macs:,}" if macs is not None else "-",
                               f"{flops:,}" if flops is not None else "-", f"{seconds / baseline:.2f}x"])
    return table


def meta_7b() -> str:
    start = time.perf_counter()
    with torch.device("meta"):
        model = Decoder(LLAMA_7B)
    ids = torch.zeros(1, 2048, dtype=torch.long, device="meta")
    counted = count_ops(model, ids)
    seconds = time.perf_counter() - start
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    params = sum(p.numel() for p in model.parameters())
    return (f"7B decoder (d=4096, 32 layers, seq 2048, batch 1) on meta: params {params:,} "
            f"(config says {LLAMA_7B.params:,}), {counted.macs / 1e12:.2f} TMACs, {counted.flops / 1e12:.2f} TFLOPs, "
            f"build + count {seconds:.2f} s, process peak RSS {peak_rss_mib:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(compare_models(args.repeats))
    print(meta_7b())


if __name__ == "__main__":
    main()
