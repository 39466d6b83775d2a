"""Command-line options shared by ``profile``, ``compare`` and ``demo``, and their parsing."""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import IO, Any

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.commands.output import FORMATS, LayerView
from deeplite_like.commands.run import RunOptions


def _bounded(text: str, convert: Callable[[str], float], expected: str, ok: Callable[[float], bool]) -> Any:
    """``convert(text)``, refused with ``expected`` in the message unless ``ok`` holds for it."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an int >= 1."""
    return _bounded(text, int, "a whole number >= 1", lambda value: value >= 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an int >= 0."""
    return _bounded(text, int, "a whole number >= 0", lambda value: value >= 0)


def positive_float(text: str) -> float:
    """An argparse type: a finite float > 0 (``inf`` would time forever, ``nan`` compares false)."""
    return _bounded(text, float, "a finite number of seconds > 0", lambda value: 0 < value < math.inf)


def thread_count(text: str) -> int | str:
    """An argparse type: ``'auto'`` or an int >= 1 (at most ``MAX_THREADS_PER_CPU`` per CPU)."""
    from deeplite_like.threads import AUTO, check_num_threads

    if text.strip().lower() == AUTO:
        return AUTO
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1 or 'auto', got {text!r}") from None
    try:
        return check_num_threads(value, "--num-threads")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _names(text: str, example: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected {example}")
    return names


def metric_list(text: str) -> tuple[str, ...]:
    """An argparse type: ``'macs,flops'`` -> ``('macs', 'flops')``."""
    return _names(text, "metric names separated by commas, e.g. macs,flops,params")


def column_list(text: str) -> tuple[str, ...]:
    """An argparse type: ``'module,macs'`` -> ``('module', 'macs')``."""
    return _names(text, "column names separated by commas, e.g. module,type,params,macs")


def text_width(args: argparse.Namespace, stdout: IO[str] | None = None) -> int | None:
    """Characters per line of text tables: ``--width`` (0: no limit); else, when the report goes to a
    terminal (or ``COLUMNS`` is set), the terminal's width; else no limit (files and pipes get it all)."""
    from deeplite_like.commands.progress import is_terminal
    from deeplite_like.reports.fit import terminal_width

    width = getattr(args, "width", None)
    if width is not None:
        return width or None
    if getattr(args, "output", None) is not None:
        return None
    if os.environ.get("COLUMNS", "").strip().isdigit() or is_terminal(stdout or sys.stdout):
        return terminal_width()
    return None


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """Options every command takes: output, format, progress, verbosity."""
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=FORMATS, default=None,
                     help="table (default), json, csv, markdown or html; default: from --output's extension")
    out.add_argument("--output", "-o", metavar="FILE", default=None,
                     help="write the report to FILE instead of standard output")
    out.add_argument("--depth", type=non_negative_int, metavar="N", default=None,
                     help="per-layer table: modules at most N levels deep (the model is level 0)")
    out.add_argument("--top", type=positive_int, metavar="K", default=None,
                     help="per-layer table: the K leaf modules with the most MACs (or of the --sort column)")
    out.add_argument("--sort", metavar="COLUMN", default=None,
                     help="per-layer table: rows ordered by COLUMN (macs, flops, params, latency_s, type, ...; "
                          "numbers largest first)")
    out.add_argument("--columns", type=column_list, metavar="LIST", default=None,
                     help="per-layer table: the columns shown, e.g. module,type,params,macs (keys or headers)")
    out.add_argument("--tree", action="store_true",
                     help="per-layer table: the modules as an indented tree (text and markdown)")
    out.add_argument("--width", type=non_negative_int, metavar="N", default=None,
                     help="text tables fit N characters per line, leaving out or folding columns (0: no limit; "
                          "default: the terminal's width, or COLUMNS, when printing to a terminal)")
    out.add_argument("--no-progress", action="store_true",
                     help="never draw a progress bar (it is drawn only on a terminal anyway)")
    out.add_argument("--verbose", "-v", action="store_true", help="on an error, show the full traceback")


def add_measure_options(parser: argparse.ArgumentParser, model_options: bool = True) -> None:
    """Options saying what to measure and on which inputs."""
    group = parser.add_argument_group("measurement")
    if model_options:
        group.add_argument("--input-shape", action="append", metavar="SHAPE", default=None,
                           help="input shape, batch axis first (1,3,224,224); repeat it for several inputs")
        group.add_argument("--inputs", metavar="FILE", default=None,
                           help="real inputs: a .pt file (tensor, tuple or dict of tensors) or .npy / .npz")
        group.add_argument("--model-args", metavar="JSON", default=None,
                           help='arguments of a factory: a JSON object of keywords, e.g. \'{"num_classes": 10}\'')
        group.add_argument("--weights", metavar="FILE", default=None,
                           help="a PyTorch state_dict file to load into the model a factory builds")
        group.add_argument("--seq-len", type=positive_int, metavar="N", default=None,
                           help="tokens in the example input of an hf: text model (default 128, at most the "
                                "model's maximum)")
    group.add_argument("--batch-size", type=positive_int, metavar="N", default=None,
                       help="samples per batch (inputs are resized by taking real samples); default: the inputs'")
    group.add_argument("--device", choices=("cpu", "cuda", "meta"), default="cpu",
                       help="where to run; meta counts and measures memory from shapes without running (no timing)")
    group.add_argument("--backward", action="store_true", help="count the backward pass too (a training step)")
    group.add_argument("--causal-half", action="store_true",
                       help="count causal attention as half of dense attention (default: dense, as it runs)")
    group.add_argument("--dtype", choices=("float16", "bfloat16"), default=None,
                       help="profile a copy of the model cast to this precision (PyTorch; the model as loaded is "
                            "left as it is)")
    group.add_argument("--metrics", type=metric_list, metavar="LIST", default=None,
                       help="comma-separated metrics: macs, flops, params, size, memory, time, layers or any "
                            "status key (default: all)")
    group.add_argument("--min-run-time", type=positive_float, metavar="SECONDS", default=0.2,
                       help="seconds of timed runs per model, after warm-up (default 0.2)")
    group.add_argument("--num-threads", type=thread_count, metavar="N|auto", default=None,
                       help="intra-op threads while timing: a number, or auto (all threads unless the machine is "
                            "busy or their timings spread, then 1); default 1 for PyTorch (the stablest), "
                            "TensorFlow's own count for Keras")


def run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(batch_size=args.batch_size, device=args.device, backward=args.backward,
                      metrics=args.metrics, min_run_time=args.min_run_time, causal_half=args.causal_half,
                      dtype=args.dtype, num_threads=args.num_threads)


def layer_options_given(args: argparse.Namespace) -> bool:
    """Whether an option about the per-layer table was given (a compare then shows each model's)."""
    return any(getattr(args, name) not in (None, False) for name in ("depth", "top", "sort", "columns", "tree"))


def layer_view(args: argparse.Namespace, stdout: IO[str] | None = None) -> LayerView:
    if args.tree and args.sort is not None:
        raise UsageError("--tree keeps the model's order, so it cannot be sorted by --sort",
                         "drop --tree for a sorted flat table, or drop --sort")
    return LayerView(depth=args.depth, top=args.top, sort=args.sort, columns=args.columns, tree=args.tree,
                     width=text_width(args, stdout))
