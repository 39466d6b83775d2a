"""``profile MODEL --batch-sizes 1,8,32`` (or ``--seq-lens 128,512,2048``): one model across a sweep.

Each point of the sweep is profiled as ``profile`` would (a fresh profiler, the same options),
computing MACs, peak activation memory, latency and throughput (``--metrics`` narrows them).
The result is one table, one row per point: MACs, peak activations, the median latency and its
spread (the interquartile range of the timed runs), per-sample latency and throughput; the
HTML page adds one chart of every quantity against the sweep, relative to its first point.

Batch sizes resize the inputs by taking real samples (as ``--batch-size``). Sequence lengths
rebuild an ``hf:`` model's example at each length, and otherwise resize the token-id inputs
(integer tensors, length on axis 1) by repeating their tokens or cutting them.
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import IO, Any

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading import LoadedModel
from deeplite_like.cli.output import Rendered, json_rendered, render_text
from deeplite_like.cli.progress import Progress
from deeplite_like.cli.runner import TIMING_KEYS, ModelResult, RunOptions, execute, prepare
from deeplite_like.reports import TableReport
from deeplite_like.reports.charts import line_chart
from deeplite_like.reports.formatting import format_seconds
from deeplite_like.reports.html import document, report_section
from deeplite_like.units import format_bytes, format_number

SWEEP_METRICS = ("macs", "peak_activation_memory", "execution_time", "throughput")
AXES = {"batch_size": ("Batch", "batch size", "Batch-size sweep"),
        "seq_len": ("Tokens", "sequence length", "Sequence-length sweep")}
COLUMNS = ["macs", "peak_activation_bytes", "latency_s", "latency_iqr_s", "per_sample_s", "throughput"]
HEADERS = {"macs": "MACs", "peak_activation_bytes": "Peak activations", "latency_s": "Latency",
           "latency_iqr_s": "Spread (IQR)", "per_sample_s": "Per sample", "throughput": "Samples/s"}
DROP_ORDER = ("per_sample_s", "latency_iqr_s", "peak_activation_bytes")  # left out first when too wide


def size_list(text: str) -> tuple[int, ...]:
    """An argparse type: ``'1,8,32'`` -> ``(1, 8, 32)``: whole numbers >= 1, no repeats."""
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise argparse.ArgumentTypeError(f"expected whole numbers >= 1 separated by commas (1,8,32), got {part!r}")
        if int(part) in values:
            raise argparse.ArgumentTypeError(f"{part} is given twice")
        values.append(int(part))
    if not values:
        raise argparse.ArgumentTypeError("expected whole numbers >= 1 separated by commas, e.g. 1,8,32")
    return tuple(values)


def with_seq_len(inputs: tuple[tuple, dict], length: int) -> tuple[tuple, dict]:
    """``inputs`` with every integer tensor of 2 or more axes (token ids, masks) resized to ``length`` on axis 1.

    Longer: the tokens are repeated; shorter: cut. Raises ``UsageError`` when there is none.
    """
    import torch
    from torch.utils._pytree import tree_map

    found = []

    def resize(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and not (value.is_floating_point()
                                                                          or value.is_complex()):
            found.append(value)
            repeats = -(-length // value.shape[1])
            return value.repeat(1, repeats, *([1] * (value.dim() - 2)))[:, :length]
        return value

    resized = tree_map(resize, inputs)
    if not found:
        raise UsageError("--seq-lens resizes token ids (integer inputs shaped batch x tokens), and this model's "
                         "inputs have none", "use --seq-lens with an hf: model or token-id inputs "
                         "(--input-shape with an integer model, or --inputs ids.pt), or sweep --batch-sizes")
    return resized


def _detail(status: Any, name: str) -> float | None:
    value = (getattr(status, "details", None) or {}).get(name)
    value = getattr(value, "value", value)
    return float(value) if isinstance(value, (int, float)) else None


def sweep_row(axis: str, point: int, result: ModelResult, batch: int) -> dict[str, Any]:
    """One table row of a profiled point (raw values; ``None`` where not computed)."""
    status = result.statuses

    def value(key: str) -> Any:
        return getattr(status.get(key), "value", None)

    latency = value("execution_time")
    return {axis: point, "macs": value("macs"), "peak_activation_bytes": value("peak_activation_memory"),
            "latency_s": latency, "latency_iqr_s": _detail(status.get("execution_time"), "iqr"),
            "per_sample_s": latency / batch if latency is not None else None, "throughput": value("throughput")}


def sweep_table(name: str, axis: str, rows: list[dict[str, Any]], notes: Sequence[str] = ()) -> TableReport:
    """The sweep as a ``TableReport``: one row per point, the columns that were computed."""
    columns = [axis] + [c for c in COLUMNS if any(row.get(c) is not None for row in rows)]
    formatters: dict[str, Callable[[Any], str]] = {
        "macs": lambda v: "" if v is None else f"{v:,}", "peak_activation_bytes": lambda v: "" if v is None else
        format_bytes(v), "latency_s": format_seconds, "latency_iqr_s": format_seconds, "per_sample_s": format_seconds,
        "throughput": lambda v: "" if v is None else format_number(v)}
    notes = list(notes)
    if "latency_s" in columns:
        notes.insert(0, "Latency: median forward time of one batch; Spread: the interquartile range of the timed "
                        "runs; Samples/s: throughput")
    return TableReport(f"{AXES[axis][2]}: {name}", columns, rows,
                       formatters={c: f for c, f in formatters.items() if c in columns},
                       headers={**{c: h for c, h in HEADERS.items() if c in columns}, axis: AXES[axis][0]},
                       notes=notes)


def sweep_chart(table: TableReport) -> str:
    """One SVG line chart: each quantity against the sweep, as a multiple of its value at the first point.

    Latency points carry whiskers as long as their spread (the IQR, centred on the median).
    """
    axis = table.columns[0]
    rows = sorted(table.rows, key=lambda r: r[axis])
    first = rows[0]
    series, spreads = {}, {}
    for column in ("latency_s", "throughput", "macs", "peak_activation_bytes"):
        if column in table.columns and first.get(column):
            series[table.headers.get(column, column)] = [(r[axis], r[column] / first[column]) for r in rows
                                                         if r.get(column) is not None]
    if "latency_iqr_s" in table.columns and first.get("latency_s"):
        spreads[table.headers["latency_s"]] = [(r[axis], (r["latency_iqr_s"] or 0) / first["latency_s"])
                                               for r in rows]
    if not series:
        return ""
    xs = [r[axis] for r in rows]
    name = table.title.split(": ", 1)[-1]
    return line_chart(f"{table.title.split(':')[0]}: {name}", series, AXES[axis][1],
                      f"x the value at {AXES[axis][1]} {xs[0]}", x_log2=min(xs) > 0 and max(xs) >= 4 * min(xs),
                      subtitle="each quantity relative to the first point; whiskers: latency's spread (IQR)",
                      y_format=lambda v: f"{v:g}x", spreads=spreads)


def render_sweep(table: TableReport, spec: str, fmt: str, view) -> Rendered:
    if fmt == "json":
        return json_rendered("sweep", {"name": table.title.split(": ", 1)[-1], "model": spec,
                                       "axis": table.columns[0], "sweep": table.to_dict()})
    if fmt == "csv":
        return Rendered(table.to_csv())
    if fmt == "html":
        sections = [f'<div class="charts">{sweep_chart(table)}</div>', report_section(table, "sweep")]
        return Rendered(document(table.title, sections, subtitle=spec))
    return Rendered(render_text(table, fmt, view, DROP_ORDER) + ("" if fmt == "markdown" else "\n"))


def run_sweep(args: argparse.Namespace, load: Callable[[int | None], LoadedModel],
              inputs_of: Callable[[LoadedModel], tuple[tuple, dict]], options: RunOptions,
              stderr: IO[str]) -> tuple[TableReport, str]:
    """Profile every point of ``--batch-sizes`` or ``--seq-lens``; the sweep table and the model's spec.

    ``load(seq_len)`` loads the model (``None``: its default length); ``inputs_of`` resolves its inputs.
    """
    if args.batch_sizes and args.seq_lens:
        raise UsageError("--batch-sizes and --seq-lens sweep one axis at a time", "give one of them")
    if args.batch_size is not None and args.batch_sizes:
        raise UsageError("--batch-size and --batch-sizes both set the batch", "give one of them")
    axis = "batch_size" if args.batch_sizes else "seq_len"
    points = args.batch_sizes or args.seq_lens
    loaded = load(None)
    hub = loaded.spec.startswith("hf:")
    base_inputs = inputs_of(loaded)
    if options.metrics is None:
        refused = set(loaded.limits) | (set(TIMING_KEYS) if options.device == "meta" else set())
        options = dataclasses.replace(options, metrics=tuple(k for k in SWEEP_METRICS if k not in refused))
    rows, notes = [], []
    progress = Progress(None, stream=stderr, enabled=False if args.no_progress else None)
    with progress:
        for point in points:
            if axis == "batch_size":
                model, inputs, point_options = loaded, base_inputs, dataclasses.replace(options, batch_size=point)
            elif hub:
                model = load(point)
                model, inputs, point_options = model, inputs_of(model), options
            else:
                model, inputs, point_options = loaded, with_seq_len(base_inputs, point), options
            run = prepare(model, inputs, point_options)
            if progress.total is None:
                progress.total = run.steps * len(points)
            result = execute(run, progress)
            batch = _batch(result, point if axis == "batch_size" else None)
            rows.append(sweep_row(axis, point, result, batch))
            notes = [n for n in result.notes if n not in notes] + notes
    return sweep_table(loaded.name, axis, rows, notes), loaded.spec


def _batch(result: ModelResult, default: int | None) -> int:
    for status in result.statuses.values():
        size = (getattr(status, "details", None) or {}).get("batch_size")
        if isinstance(size, int):
            return size
    return default or 1
