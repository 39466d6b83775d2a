"""``deeplite-like profile MODEL``: one model's metrics and per-layer table."""
from __future__ import annotations

import argparse
import sys
from typing import IO

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.commands.inputs import parse_shape, resolve_inputs
from deeplite_like.cli.loading import FORMS_HINT, load_model, parse_model_args
from deeplite_like.commands.options import (add_common_options, add_measure_options, layer_options_given, layer_view,
                                             run_options)
from deeplite_like.commands.output import (layers_csv_path, render_profile, require_writable_output, resolve_format,
                                           write)
from deeplite_like.commands.progress import Progress
from deeplite_like.commands.run import check_device, execute, prepare
from deeplite_like.commands.sweep import render_sweep, run_sweep, size_list


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("profile", help="profile one model", description="Profile one model: MACs, FLOPs, "
                                 "parameters, size, memory, latency, and where they go per layer.",
                                 epilog=FORMS_HINT)
    parser.add_argument("model", metavar="MODEL", help="what to profile (see below)")
    add_measure_options(parser)
    sweep = parser.add_argument_group("sweep (one table and chart across the values)")
    sweep.add_argument("--batch-sizes", type=size_list, metavar="LIST", default=None,
                       help="profile at each batch size, e.g. 1,8,32: latency (with its spread), throughput, MACs "
                            "and peak memory against the batch size")
    sweep.add_argument("--seq-lens", type=size_list, metavar="LIST", default=None,
                       help="profile at each sequence length, e.g. 128,512,2048 (hf: models, or token-id inputs)")
    add_common_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    require_writable_output(args.output)  # before any model is loaded: no work is lost to a bad path
    fmt = resolve_format(args.format, args.output)
    layers_wanted = args.metrics is None or {"layers", "layerwise_summary"} & set(args.metrics)
    if fmt == "csv" and args.output is not None and layers_wanted and not (args.batch_sizes or args.seq_lens):
        require_writable_output(layers_csv_path(args.output), "the per-layer CSV beside --output,")
    check_device(args.device)
    shapes = [parse_shape(text) for text in args.input_shape or []]
    model_args = parse_model_args(args.model_args)
    if args.batch_sizes or args.seq_lens:
        if layer_options_given(args):
            raise UsageError("--depth, --top, --sort, --columns and --tree choose per-layer rows, and a sweep prints "
                             "no per-layer table", "drop them, or profile one batch size without the sweep")
        if args.seq_lens and args.seq_len is not None:
            raise UsageError("--seq-len and --seq-lens both set the sequence length", "give one of them")
        table, spec = run_sweep(args, lambda seq_len: load_model(args.model, model_args, args.weights,
                                                                 seq_len if seq_len is not None else args.seq_len),
                                lambda loaded: resolve_inputs(loaded, shapes, args.inputs), run_options(args), stderr)
        write(render_sweep(table, spec, fmt, layer_view(args, stdout)), args.output, stdout, stderr)
        return 0
    loaded = load_model(args.model, model_args, args.weights, args.seq_len)
    prepared = prepare(loaded, resolve_inputs(loaded, shapes, args.inputs), run_options(args))
    with Progress(prepared.steps, stream=stderr, enabled=False if args.no_progress else None) as progress:
        result = execute(prepared, progress)
    write(render_profile(result, fmt, layer_view(args, stdout), args.output), args.output, stdout, stderr)
    return 0
