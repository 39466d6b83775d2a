"""``deeplite-like compare MODEL_A MODEL_B [...]``: models side by side, the first the reference."""
from __future__ import annotations

import argparse
import sys
from typing import IO

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.commands.inputs import parse_shape, resolve_inputs
from deeplite_like.cli.loading import FORMS_HINT, load_model, parse_model_args
from deeplite_like.commands.options import (add_common_options, add_measure_options, layer_options_given, layer_view,
                                             run_options)
from deeplite_like.commands.output import (layers_csv_path, render_compare, require_writable_output, resolve_format,
                                           write)
from deeplite_like.commands.progress import Progress
from deeplite_like.commands.run import ModelResult, check_device, execute, prepare
from deeplite_like.reports import CompareReport


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("compare", help="compare two or more models (the first is the reference)",
                                 description="Compare models side by side; the first is the reference (the "
                                 "teacher), and every change is said in words (4.80x fewer, 2.10x faster).",
                                 epilog=FORMS_HINT)
    parser.add_argument("models", metavar="MODEL", nargs="+", help="two or more models, the reference first")
    add_measure_options(parser)
    add_common_options(parser)
    parser.set_defaults(run=run)


def compare_results(results: list[ModelResult]) -> CompareReport:
    """The compare report of profiled models, the first the reference (each with its own backend)."""
    return CompareReport([(r.name, r.backend, r.statuses) for r in results])


def run(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if len(args.models) < 2:
        raise UsageError(f"compare needs at least two models, got {len(args.models)}",
                         "deeplite-like compare zoo:resnet_small zoo:resnet_small_student (the first is the "
                         "reference); to profile one model use: deeplite-like profile MODEL")
    require_writable_output(args.output)  # before any model is loaded: no work is lost to a bad path
    fmt = resolve_format(args.format, args.output)
    check_device(args.device)
    shapes = [parse_shape(text) for text in args.input_shape or []]
    model_args = parse_model_args(args.model_args)
    # Every model is loaded before any is profiled: a bad spec fails at once, not after minutes.
    loaded = [load_model(spec, model_args, args.weights, args.seq_len) for spec in args.models]
    if fmt == "csv" and args.output is not None:  # each model's per-layer CSV, before any is profiled
        for model in loaded:
            require_writable_output(layers_csv_path(args.output, model.name), "the per-layer CSV beside --output,")
    options = run_options(args)
    prepared = [prepare(model, resolve_inputs(model, shapes, args.inputs), options) for model in loaded]
    with Progress(sum(p.steps for p in prepared), stream=stderr,
                  enabled=False if args.no_progress else None) as progress:
        results = [execute(p, progress) for p in prepared]
    with_layers = fmt in ("json", "html", "csv") or layer_options_given(args)
    rendered = render_compare(compare_results(results), results, fmt, layer_view(args, stdout), args.output,
                              with_layers)
    write(rendered, args.output, stdout, stderr)
    return 0
