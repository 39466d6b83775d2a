"""Latency and throughput against batch size, with a chart: how a model scales with its batch.

Run it from the repository root (needs torch; no plotting library)::

    python examples/batch_size_sweep.py [--model resnet_small] [--batch-sizes 1,2,4,8,16,32,64]
                                        [--output sweep.html] [--svg throughput.svg]

For each batch size one profiler measures the forward's MACs, peak activation memory and
median latency (``torch.utils.benchmark``), the inputs being the zoo model's example resized
by repeating real samples. The table gives latency per batch and per sample and the
throughput (samples/s = batch / latency); the HTML page draws latency and throughput against
batch size as inline SVG charts, and ``--svg`` saves the throughput chart alone.

MACs are counted per batch, so they grow exactly linearly: b x the MACs of one sample (for
resnet_small 12,501,632, derived layer by layer in docs/zoo.rst); the script checks it.
Latency grows more slowly than that while the hardware still has idle lanes, so throughput
rises, then flattens once the machine is saturated.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from deeplite_like.backends.torch import ComputeComplexity, ComputeExecutionTime, ComputeMemory, TorchProfiler
from deeplite_like.cli.progress import track
from deeplite_like.reports import TableReport
from deeplite_like.reports.charts import line_chart
from deeplite_like.reports.html import document, report_section
from deeplite_like.units import format_bytes, format_number, scaled
from deeplite_like.zoo import get

COLUMNS = ["batch_size", "macs", "peak_activation_bytes", "latency_s", "per_sample_s", "throughput"]
HEADERS = {"batch_size": "Batch", "macs": "MACs", "peak_activation_bytes": "Peak activations",
           "latency_s": "Latency", "per_sample_s": "Per sample", "throughput": "Throughput (samples/s)"}


def seconds(value: float) -> str:
    number, unit = scaled(value, "seconds", "s")
    return f"{format_number(number)} {unit}"


def sweep(model_name: str, batch_sizes: list[int], min_run_time: float) -> TableReport:
    """One row per batch size: MACs, peak activation bytes, latency, per-sample latency, throughput."""
    entry = get(model_name)
    profiler = TorchProfiler(entry.build(), {"test": [entry.example_input(batch_size=1)]}, name=model_name,
                             register_defaults=False)
    for function in (ComputeComplexity(), ComputeMemory(), ComputeExecutionTime()):
        profiler.register_profiler_function(function)
    rows = []
    for batch in track(batch_sizes, f"{model_name}: batch sizes"):
        profiler.compute_network_status(batch_size=batch, min_run_time=min_run_time)
        latency = profiler.get_status("execution_time").value
        rows.append({"batch_size": batch, "macs": profiler.get_status("macs").value,
                     "peak_activation_bytes": profiler.get_status("peak_activation_memory").value,
                     "latency_s": latency, "per_sample_s": latency / batch,
                     "throughput": profiler.get_status("throughput").value})
    formatters = {"macs": lambda v: f"{v:,}", "peak_activation_bytes": format_bytes, "latency_s": seconds,
                  "per_sample_s": seconds, "throughput": lambda v: format_number(v)}
    return TableReport(f"Batch-size sweep: {model_name}", COLUMNS, rows, formatters=formatters, headers=HEADERS,
                       notes=[f"median forward latency over at least {min_run_time} s of timed runs per batch size"])


def charts(table: TableReport) -> tuple[str, str]:
    """(latency chart, throughput chart) as SVG, batch size on a log2 axis."""
    name = table.title.split(": ", 1)[1]
    latency = line_chart(f"Latency per batch: {name}", {name: [(r["batch_size"], r["latency_s"] * 1e3)
                                                               for r in table.rows]},
                         "batch size", "latency (ms)", x_log2=True, y_format=lambda v: f"{v:g}",
                         subtitle="median forward time of one batch")
    throughput = line_chart(f"Throughput: {name}", {name: [(r["batch_size"], r["throughput"]) for r in table.rows]},
                            "batch size", "samples / s", x_log2=True, y_format=lambda v: f"{v:,.0f}",
                            subtitle="batch size / latency")
    return latency, throughput


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet_small", help="a zoo model name (default resnet_small)")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32,64", help="comma-separated batch sizes")
    parser.add_argument("--min-run-time", type=float, default=0.2, help="seconds of timed runs per batch size")
    parser.add_argument("--output", default="batch_size_sweep.html", help="the HTML page (table and charts)")
    parser.add_argument("--svg", help="also save the throughput chart alone as an SVG file")
    args = parser.parse_args(argv)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]

    table = sweep(args.model, batch_sizes, args.min_run_time)
    print(table)
    per_sample = table.rows[0]["macs"] // table.rows[0]["batch_size"]
    assert all(row["macs"] == row["batch_size"] * per_sample for row in table.rows), "MACs must grow linearly"

    latency, throughput = charts(table)
    page = document(table.title, [f'<div class="charts">{latency}\n{throughput}</div>', report_section(table)],
                    subtitle=f"zoo:{args.model}")
    Path(args.output).write_text(page, encoding="utf-8")
    print(f"saved {args.output}")
    if args.svg:
        Path(args.svg).write_text('<?xml version="1.0" encoding="utf-8"?>\n' + throughput + "\n", encoding="utf-8")
        print(f"saved {args.svg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
