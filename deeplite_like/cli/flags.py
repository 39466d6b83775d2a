"""The command line's flags: the option groups the commands share, the argparse types that
parse their values, and what the parsed flags become (``RunOptions``, ``LayerView``).

Values are parsed strictly, each type raising ``argparse.ArgumentTypeError`` with what was
wrong and how to write it. Quantities (check's ``2G`` MACs, ``25M`` params, ``100MiB``,
``5ms``, ``2%``) come back in base units (a count, bytes, seconds, a fraction), and nothing is
guessed: a size or a time without its unit, ``m`` (milli) where ``M`` (millions) was surely
meant, and a tolerance without ``%`` are refused.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from typing import IO, Any

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.output import FORMATS, LayerView
from deeplite_like.cli.progress import is_terminal
from deeplite_like.cli.runner import RunOptions
from deeplite_like.reports.base import terminal_width
from deeplite_like.timing import AUTO, check_num_threads


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


def positive_number(text: str) -> float:
    """An argparse type: a float > 0 (``inf`` allowed: a max norm that never clips)."""
    return _bounded(text, float, "a number > 0", lambda value: value > 0)


def thread_count(text: str) -> int | str:
    """An argparse type: ``'auto'`` or an int >= 1 (at most ``MAX_THREADS_PER_CPU`` per CPU)."""
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


# ------------------------------------------------------------------------------ quantities: 2G, 100MiB, 5ms, 2%
_NUMBER = r"(?P<number>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
COUNT_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
BYTE_UNITS = {"B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
              "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
SECOND_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    match = re.fullmatch(_NUMBER + r"\s*(?P<unit>[A-Za-z\u00b5%/]*)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as {what}; write it like {example}")
    value = float(match.group("number"))
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; write it like {example}")
    return value, match.group("unit")


def parse_count(text: str, unit: str = "") -> int:
    """``'2G'`` -> 2_000_000_000; ``'1.5M'``, ``'25M'``, ``'2e9'``, ``'2GMACs'`` (``unit`` after the prefix).

    Prefixes are SI (10**3 steps): k (or K), M, G, T.
    """
    example = f"2G{unit}, 25M, 1.5k or 2000000"
    value, suffix = _split(text, "a count", example)
    if unit and suffix.endswith(unit):
        suffix = suffix[:-len(unit)]
    if suffix == "m":
        raise argparse.ArgumentTypeError(f"{text!r}: 'm' is milli; write M for millions (e.g. {value:g}M)")
    if suffix not in COUNT_PREFIXES:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown suffix {suffix!r}; use k, M, G or T "
                                         f"(e.g. {example})")
    return round(value * COUNT_PREFIXES[suffix])


def parse_bytes(text: str) -> int:
    """``'100MiB'`` -> 104_857_600; ``'25MB'`` -> 25_000_000 (MB is 10**6, MiB 2**20); the unit is required."""
    example = "100MiB, 25MB or 512KiB"
    value, suffix = _split(text, "a size", example)
    if suffix == "":
        raise argparse.ArgumentTypeError(f"{text!r}: a size needs its unit (B, KiB, MiB, GiB, kB, MB, GB), "
                                         f"e.g. {example}")
    if suffix not in BYTE_UNITS:
        close = {unit.lower(): unit for unit in BYTE_UNITS}.get(suffix.lower())
        raise argparse.ArgumentTypeError(f"{text!r}: unknown size unit {suffix!r}"
                                         + (f" (did you mean {close!r}?)" if close else "")
                                         + f"; use one of {', '.join(BYTE_UNITS)}")
    return round(value * BYTE_UNITS[suffix])


def parse_seconds(text: str) -> float:
    """``'5ms'`` -> 0.005; ``'200us'``, ``'1.5s'``; the unit is required."""
    example = "5ms, 200us or 1.5s"
    value, suffix = _split(text, "a time", example)
    if suffix == "":
        raise argparse.ArgumentTypeError(f"{text!r}: a time needs its unit (s, ms, us, ns), e.g. {example}")
    if suffix not in SECOND_UNITS:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown time unit {suffix!r}; use s, ms, us or ns")
    return value * SECOND_UNITS[suffix]


def parse_percent(text: str) -> float:
    """``'2%'`` -> 0.02; the ``%`` is required (is ``2`` two percent or two hundred?)."""
    value, suffix = _split(text, "a percentage", "2% or 0.5%")
    if suffix != "%":
        raise argparse.ArgumentTypeError(f"{text!r}: write the tolerance as a percentage, e.g. 2% or 0.5%")
    return value / 100.0


def positive(parse, what: str):
    """An argparse type: ``parse``, and the value must be > 0."""
    def parse_positive(text: str):
        value = parse(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be more than 0")
        return value

    parse_positive.__name__ = parse.__name__
    return parse_positive


def text_width(args: argparse.Namespace, stdout: IO[str] | None = None) -> int | None:
    """Characters per line of text tables: ``--width`` (0: no limit); else, when the report goes to a
    terminal (or ``COLUMNS`` is set), the terminal's width; else no limit (files and pipes get it all)."""
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


def add_roofline_options(parser: argparse.ArgumentParser) -> None:
    """Options asking how fast the model would run on a device (``deeplite_like.roofline``)."""
    group = parser.add_argument_group("predicted time (roofline; PyTorch models, .onnx and .tflite files)")
    group.add_argument("--device-model", metavar="NAME", default=None,
                       help="predict the time per operator on a device of the registry (h100, a100-80gb, l4, t4, "
                            "rtx4090, orin, rpi5, m2, ...; 'this' calibrates this machine): max(FLOPs / peak, "
                            "bytes moved / bandwidth) per operator, the top operators and their bound")
    group.add_argument("--fused", action="store_true",
                       help="with --device-model: a chain of elementwise operators between two contractions moves "
                            "only its ends, as a compiler would fuse it (default: every operator reads and writes "
                            "memory, as in eager mode)")
    group.add_argument("--decode", type=positive_int, metavar="CONTEXT", default=None,
                       help="a causal language model (hf:): also count the prefill of --seq-len tokens and one "
                            "decode step at CONTEXT tokens of KV cache, on meta; with --device-model, the time to "
                            "the first token and tokens per second")


def add_node_time_options(parser: argparse.ArgumentParser) -> None:
    """``--node-times``: ONNX Runtime's per-node times joined to an ``.onnx`` file's per-node counts."""
    group = parser.add_argument_group("per-node time (.onnx files)")
    group.add_argument("--node-times", nargs="?", const="all", default=None, metavar="LEVEL",
                       help="time every node with ONNX Runtime's profiler and add an ORT time column to the "
                            "per-layer table (and the nodes to the JSON); LEVEL is ORT's graph optimization: all "
                            "(the default, as it ships: fused nodes are listed apart), extended, layout, basic, or "
                            "disabled (every node runs as stored: a 1:1 join)")


def run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(batch_size=args.batch_size, device=args.device, backward=args.backward,
                      metrics=args.metrics, min_run_time=args.min_run_time, causal_half=args.causal_half,
                      dtype=args.dtype, num_threads=args.num_threads,
                      device_model=getattr(args, "device_model", None), fused=getattr(args, "fused", False),
                      decode=getattr(args, "decode", None), node_times=getattr(args, "node_times", None))


def layer_options_given(args: argparse.Namespace) -> bool:
    """Whether an option about the per-layer table was given (a compare then shows each model's)."""
    return any(getattr(args, name) not in (None, False) for name in ("depth", "top", "sort", "columns", "tree"))


def layer_view(args: argparse.Namespace, stdout: IO[str] | None = None) -> LayerView:
    if args.tree and args.sort is not None:
        raise UsageError("--tree keeps the model's order, so it cannot be sorted by --sort",
                         "drop --tree for a sorted flat table, or drop --sort")
    return LayerView(depth=args.depth, top=args.top, sort=args.sort, columns=args.columns, tree=args.tree,
                     width=text_width(args, stdout))
