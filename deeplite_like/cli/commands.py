"""The commands that profile: ``profile``, ``compare``, ``demo`` and ``memory``.

* ``deeplite-like profile MODEL``: one model's metrics and per-layer table (with
  ``--batch-sizes`` / ``--seq-lens``, one table across a sweep: ``run_sweep``, below).
* ``deeplite-like compare MODEL_A MODEL_B [...]``: models side by side, the first the reference.
* ``deeplite-like demo``: profile and compare the bundled example models, no arguments needed.
  The groups are ``demo_groups``'s.
* ``deeplite-like memory MODEL --train``: will a training step fit? (``add_memory_parser``)

Each command has an ``add_*_parser`` (its options) and a ``run_*`` (what it does, returning the
exit code); ``deeplite-like check`` lives in ``deeplite_like.cli.check``.

**The sweep** (``profile MODEL --batch-sizes 1,8,32``, or ``--seq-lens 128,512,2048``): each point
of the sweep is profiled as ``profile`` would (a fresh profiler, the same options),
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
import contextlib
import dataclasses
import importlib.util
import sys
from collections.abc import Callable, Sequence
from typing import Any, IO

from deeplite_like.cli.exit_codes import ProfilingFailed, UsageError
from deeplite_like.cli.flags import (add_common_options, add_measure_options, add_node_time_options, add_roofline_options,
                                     layer_options_given, layer_view, positive_int, positive_number, run_options)
from deeplite_like.cli.loading import FORMS_HINT, LoadedModel, load_model, parse_model_args, require_framework
from deeplite_like.cli.model_inputs import parse_shape, resolve_inputs
from deeplite_like.cli.output import (Rendered, json_rendered, layer_title, layers_csv_path, render_compare,
                                      render_profile, render_text, require_writable_output, resolve_format,
                                      select_layers, write)
from deeplite_like.cli.progress import Progress
from deeplite_like.cli.runner import ModelResult, RunOptions, TIMING_KEYS, check_device, execute, prepare
from deeplite_like.reports import CompareReport, Report, TableReport
from deeplite_like.reports.charts import line_chart
from deeplite_like.reports.base import format_seconds, strict_json
from deeplite_like.reports.html import document, notes_html, report_section, training_memory_page
from deeplite_like.units import format_bytes, format_number, parse_bytes
from deeplite_like.zoo import ZOO


# ------------------------------------------------------------------------------ profile
def add_profile_parser(commands: argparse._SubParsersAction) -> None:
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
    add_roofline_options(parser)
    add_node_time_options(parser)
    add_common_options(parser)
    parser.set_defaults(run=run_profile)


def run_profile(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    require_writable_output(args.output)  # before any model is loaded: no work is lost to a bad path
    fmt = resolve_format(args.format, args.output)
    layers_wanted = args.metrics is None or {"layers", "layerwise_summary"} & set(args.metrics)
    if fmt == "csv" and args.output is not None and layers_wanted and not (args.batch_sizes or args.seq_lens):
        require_writable_output(layers_csv_path(args.output), "the per-layer CSV beside --output,")
    check_device(args.device, [args.model])
    shapes = [parse_shape(text) for text in args.input_shape or []]
    model_args = parse_model_args(args.model_args)
    if args.batch_sizes or args.seq_lens:
        if layer_options_given(args):
            raise UsageError("--depth, --top, --sort, --columns and --tree choose per-layer rows, and a sweep prints "
                             "no per-layer table", "drop them, or profile one batch size without the sweep")
        if args.device_model is not None or args.decode is not None or args.node_times is not None:
            raise UsageError("--device-model, --decode and --node-times are of one run, and a sweep runs several",
                             "profile one batch size or sequence length with them")
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


# ------------------------------------------------------------------------------ compare
def add_compare_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("compare", help="compare two or more models (the first is the reference)",
                                 description="Compare models side by side; the first is the reference (the "
                                 "teacher), and every change is said in words (4.80x fewer, 2.10x faster).",
                                 epilog=FORMS_HINT)
    parser.add_argument("models", metavar="MODEL", nargs="+", help="two or more models, the reference first")
    add_measure_options(parser)
    add_common_options(parser)
    parser.set_defaults(run=run_compare)


def compare_results(results: list[ModelResult]) -> CompareReport:
    """The compare report of profiled models, the first the reference (each with its own backend)."""
    return CompareReport([(r.name, r.backend, r.statuses) for r in results])


def run_compare(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if len(args.models) < 2:
        raise UsageError(f"compare needs at least two models, got {len(args.models)}",
                         "deeplite-like compare zoo:resnet_small zoo:resnet_small_student (the first is the "
                         "reference); to profile one model use: deeplite-like profile MODEL")
    require_writable_output(args.output)  # before any model is loaded: no work is lost to a bad path
    fmt = resolve_format(args.format, args.output)
    check_device(args.device, args.models)
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


# ------------------------------------------------------------------------------ demo
@dataclasses.dataclass(frozen=True)
class DemoGroup:
    """Models shown together: one is profiled; several are compared, the first the reference."""

    title: str
    specs: tuple[str, ...]
    framework: str


def demo_groups() -> list[DemoGroup]:
    """The demo's groups, in the order shown.

    The demo is a list of groups of MODEL specs: a group of one is profiled, a group of two or
    more is compared, the first spec being the reference. Groups whose framework is not installed
    are skipped with a note saying which extra to install.
    """
    groups = []
    for name, entry in ZOO.items():
        if entry.framework != "torch" or entry.teacher:
            continue
        if entry.student:
            groups.append(DemoGroup(f"{name} vs {entry.student}", (f"zoo:{name}", f"zoo:{entry.student}"), "torch"))
        else:
            groups.append(DemoGroup(name, (f"zoo:{name}",), "torch"))
    # Keras models on their own, then the same architecture in both frameworks side by side.
    # A group is skipped with a note when its framework is not installed.
    for name, entry in ZOO.items():
        if entry.framework == "keras":
            groups.append(DemoGroup(name, (f"zoo:{name}",), "keras"))
            twin = name.removesuffix("_keras")
            if twin != name and twin in ZOO:
                groups.append(DemoGroup(f"{twin}: torch vs keras", (f"zoo:{twin}", f"zoo:{name}"), "keras"))
    return groups


def add_demo_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("demo", help="profile and compare the bundled example models",
                                 description="Profile and compare the bundled example models (the zoo): each "
                                 "teacher against its student, and the models without one on their own.")
    parser.add_argument("--list", action="store_true", help="list the bundled models and exit")
    add_measure_options(parser, model_options=False)
    parser.set_defaults(batch_size=1)
    add_common_options(parser)
    parser.set_defaults(run=run_demo)


def list_models(stdout: IO[str]) -> int:
    width = max(len(name) for name in ZOO)
    for name, entry in ZOO.items():
        stdout.write(f"zoo:{name:<{width}}  {entry.framework:<6} {entry.summary}\n")
    return 0


def run_demo(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if args.list:
        return list_models(stdout)
    require_writable_output(args.output)  # before any model is loaded: no work is lost to a bad path
    fmt = resolve_format(args.format, args.output)
    if fmt == "csv":
        raise UsageError("the demo shows several tables, which one CSV file cannot hold",
                         "use --format json, markdown, html or table")
    check_device(args.device)
    groups, skipped = [], []
    for group in demo_groups():
        if importlib.util.find_spec(group.framework) is None:
            skipped.append(f"skipped {group.title}: needs {group.framework}; install it with: "
                           f"pip install 'deeplite-like[{group.framework}]'")
        else:
            groups.append(group)
    if not groups:
        raise UsageError("the demo's models need a framework that is not installed here",
                         "install one with: pip install 'deeplite-like[torch]'")
    options = run_options(args)
    prepared = []
    for group in groups:
        loaded = [load_model(spec) for spec in group.specs]
        prepared.append([prepare(model, resolve_inputs(model, None, None), options) for model in loaded])
    total = sum(p.steps for runs in prepared for p in runs)
    with Progress(total, stream=stderr, enabled=False if args.no_progress else None) as progress:
        results = [[execute(p, progress) for p in runs] for runs in prepared]
    rendered = _render_demo(list(zip(groups, results)), fmt, args, skipped, stdout)
    write(rendered, args.output, stdout, stderr)
    return 0


def _main_report(results: list[ModelResult]) -> Report:
    return results[0].status_report() if len(results) == 1 else compare_results(results)


def _render_demo(shown: list[tuple[DemoGroup, list[ModelResult]]], fmt: str, args: argparse.Namespace,
            skipped: list[str], stdout: IO[str] | None = None) -> Rendered:
    view = layer_view(args, stdout)
    with_layers = layer_options_given(args)
    if fmt == "json":
        return json_rendered("demo", {"groups": [
            {"title": group.title, "main": _main_report(results).to_dict(),
             "layers": {r.name: select_layers(r.layers, view).to_dict() for r in results if r.layers is not None}}
            for group, results in shown], "notes": skipped})
    if fmt == "html":
        sections, nav = [], []
        for index, (group, results) in enumerate(shown):
            anchor = f"group-{index + 1}"
            nav.append((anchor, group.title))
            sections.append(report_section(_main_report(results), anchor))
            for result in results:
                if result.layers is not None:
                    sections.append(report_section(select_layers(result.layers, view, layer_title(result)),
                                                   collapse_table=True))
        if skipped:
            sections.append(notes_html(skipped))
        return Rendered(document("deeplite-like demo: the bundled models", sections,
                                 subtitle="each teacher against its student", nav=nav))
    parts = []
    for group, results in shown:
        reports = [_main_report(results)]
        if with_layers:
            reports += [select_layers(r.layers, view, layer_title(r)) for r in results if r.layers is not None]
        for report in reports:
            parts.append(render_text(report, fmt, view) + ("" if fmt == "markdown" else "\n"))
    parts += [f"- {note}\n" if fmt == "markdown" else f"note: {note}\n" for note in skipped]
    return Rendered("\n".join(parts))


# ------------------------------------------------------------------------------ memory
SHARDINGS = ("ddp", "zero1", "zero2", "zero3", "fsdp")


def add_memory_parser(commands: argparse._SubParsersAction) -> None:
    """The ``memory`` command's options.

    ``deeplite-like memory MODEL --train``: will a training step fit? Bytes per rank, measured on
    meta::

        deeplite-like memory MODEL --train [--optimizer adamw] [--autocast bf16] [--checkpointing]
                             [--sharding fsdp --world-size 8 [--fsdp-mixed-precision] [--no-reshard-after-forward]
                              [--cpu-offload]]
                             [--zero-grad-at after_forward] [--keep-output] [--clip-grad-norm 1.0]
                             [--offload-activations] [--no-meta] [--fit 80GiB [--fit-axis seq]]
                             [--meta-init] [--input-shape 1,2048 --int-inputs] [--format json|html] [-o FILE]

    Without ``--train`` it measures the forward alone (``peak_activation_memory`` on meta). The
    loss is the model's own (``output.loss``) or the sum of its output: pass a factory returning
    a model that computes its loss for another one.
    """
    parser = commands.add_parser("memory", help="memory of a training step (or forward), per rank",
                                 description="Measure the memory of one training step - forward, loss, "
                                 "backward, optimizer step - on meta tensors: parameters, gradients, optimizer "
                                 "states, activations, the peak and where it happens; per rank under sharding; "
                                 "and the largest batch that fits a device.", epilog=FORMS_HINT)
    parser.add_argument("model", metavar="MODEL", help="what to measure (see below)")
    parser.add_argument("--model-args", metavar="JSON", default=None, help="arguments of a factory (JSON)")
    parser.add_argument("--weights", metavar="FILE", default=None, help="a state_dict to load into a factory's model")
    parser.add_argument("--meta-init", action="store_true",
                        help="build the model on the meta device (a model too large for this machine)")
    parser.add_argument("--input-shape", action="append", type=parse_shape, metavar="SHAPE",
                        help="input shape, batch first (repeat for several inputs)")
    parser.add_argument("--int-inputs", action="store_true", help="inputs are token ids (int64 zeros), not floats")
    parser.add_argument("--inputs", metavar="FILE", default=None, help="inputs from a file (.pt / .npz)")
    step = parser.add_argument_group("training step")
    step.add_argument("--train", action="store_true", help="measure a training step (default: the forward only)")
    step.add_argument("--optimizer", default="adamw",
                      help="adamw (default), adam, sgd, adafactor, adagrad, rmsprop; adamw8bit, adam8bit "
                           "with bitsandbytes")
    step.add_argument("--autocast", choices=("bf16", "fp16"), default=None, help="CUDA autocast's policy")
    step.add_argument("--checkpointing", action="store_true",
                      help="activation checkpointing on the repeated blocks (children of the largest ModuleList)")
    step.add_argument("--attention", choices=("cuda", "cpu", "math"), default="cuda",
                      help="scaled_dot_product_attention kernel (default cuda: flash / memory-efficient)")
    step.add_argument("--first-step", action="store_true",
                      help="measure the first step (no optimizer state yet) instead of a steady-state one")
    step.add_argument("--zero-grad-at", choices=("start", "after_forward", "end"), default="start",
                      help="where the loop calls optimizer.zero_grad() (default start: before the forward)")
    step.add_argument("--keep-output", action="store_true",
                      help="the loop keeps its output and loss alive until the next step rebinds them")
    step.add_argument("--offload-activations", action="store_true",
                      help="the forward under torch.autograd.graph.save_on_cpu: saved tensors held on the host")
    step.add_argument("--no-meta", action="store_true",
                      help="run the step on real tensors on the model's device instead of meta (what meta cannot run: "
                           "sparse gradients; or to check the meta figures); needs the memory it measures")
    step.add_argument("--clip-grad-norm", type=positive_number, default=None, metavar="MAX_NORM",
                      help="the loop clips the gradients (torch.nn.utils.clip_grad_norm_) before the optimizer step")
    step.add_argument("--sharding", choices=SHARDINGS, default=None, help="data-parallel strategy")
    step.add_argument("--fsdp-mixed-precision", action="store_true",
                      help="FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) (with --sharding fsdp)")
    step.add_argument("--cpu-offload", action="store_true",
                      help="FSDP2's CPUOffloadPolicy: the rank's shards and the optimizer step on the host")
    step.add_argument("--no-reshard-after-forward", action="store_true",
                      help="FSDP2's reshard_after_forward=False: every unit keeps its gathered parameters until backward")
    step.add_argument("--world-size", type=positive_int, default=1, metavar="N", help="ranks (with --sharding)")
    step.add_argument("--fit", type=device_size, metavar="SIZE", default=None,
                      help="find the largest batch that fits SIZE (e.g. 80GiB), allowance included")
    step.add_argument("--fit-axis", choices=("batch", "seq"), default="batch", help="search the batch or dim 1")
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=("table", "json", "html"), default=None,
                     help="table (default), json, or html (a page with the timeline chart); default: from --output")
    out.add_argument("--output", "-o", metavar="FILE", default=None, help="write the report to FILE")
    out.add_argument("--verbose", action="store_true", help="show the traceback of an error")
    parser.set_defaults(run=run_memory)


def device_size(text: str) -> str:
    """An argparse type: a device memory size > 0 (``80GiB``), checked before any model is loaded (kept as text)."""
    try:
        parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _memory_inputs(args: argparse.Namespace, loaded: Any) -> tuple[tuple, dict]:
    if args.int_inputs and args.input_shape:
        import torch

        return tuple(torch.zeros(shape, dtype=torch.long) for shape in args.input_shape), {}
    return resolve_inputs(loaded, args.input_shape, args.inputs)


def run_memory(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if args.sharding is None and args.world_size != 1:
        raise UsageError(f"--world-size {args.world_size} needs --sharding", f"one of {', '.join(SHARDINGS)}")
    if ((args.fsdp_mixed_precision or args.no_reshard_after_forward or args.cpu_offload)
            and args.sharding not in ("fsdp", "zero3")):
        raise UsageError("--fsdp-mixed-precision / --no-reshard-after-forward / --cpu-offload are options of FSDP2",
                         "add --sharding fsdp --world-size N")
    if args.no_meta and (args.meta_init or not args.train):
        raise UsageError("--no-meta runs a training step on the model's real weights",
                         "add --train, and build the model for real (without --meta-init)")
    if args.fit is not None and not args.train:
        raise UsageError("--fit searches the batch of a training step", "add --train")
    fmt = args.format or ("html" if (args.output or "").endswith((".html", ".htm")) else
                          "json" if (args.output or "").endswith(".json") else "table")
    if fmt == "html" and not args.train:
        raise UsageError("--format html draws the timeline of a training step", "add --train")
    require_writable_output(args.output)  # before any model is loaded: no work is lost to a bad path
    require_framework("torch", args.model)
    import torch

    from deeplite_like.backends.torch.training.step import _OPTIMIZERS  # the names build_optimizer knows

    if args.train and args.optimizer.lower() not in _OPTIMIZERS:
        raise UsageError(f"--optimizer {args.optimizer!r} is not a known optimizer",
                         f"use one of {', '.join(sorted(_OPTIMIZERS))}")

    with torch.device("meta") if args.meta_init else contextlib.nullcontext():
        loaded = load_model(args.model, parse_model_args(args.model_args), args.weights)
    if loaded.framework != "torch":
        raise UsageError(f"{args.model!r} is a {loaded.framework} model; memory measures PyTorch models",
                         "name a PyTorch model")
    inputs, kwargs = _memory_inputs(args, loaded)
    try:
        report = _measure(args, loaded.model, inputs, kwargs)
    except (RuntimeError, NotImplementedError, ValueError, TypeError) as error:
        hint = ("add --no-meta to measure on real tensors" if "pass meta=False" in str(error) and not args.no_meta
                else "run again with --verbose for the traceback")
        raise ProfilingFailed(f"measuring the memory of {loaded.name} failed: {error}", hint) from error
    if fmt == "json":
        text = strict_json(report)
    elif fmt == "html":
        text = training_memory_page(report, f"Training memory: {loaded.name}")
    else:
        text = report["text"]
    write(Rendered(text + "\n"), args.output, stdout, stderr)
    return 0


def _measure(args: argparse.Namespace, model: Any, inputs: tuple, kwargs: dict) -> dict[str, Any]:
    from deeplite_like.backends.torch.memory import peak_activation_memory

    if not args.train:
        stats = peak_activation_memory(model, inputs, kwargs, meta=True)
        report = dataclasses.asdict(stats)
        report["text"] = (f"forward (no grad), batch {stats.batch_size}: peak {stats.peak_bytes} B at "
                          f"{stats.peak_at}")
        return report
    from deeplite_like.backends.torch.training.batch_fit import largest_batch
    from deeplite_like.backends.torch.training.estimate import estimate_training_memory

    options = dict(optimizer=args.optimizer, autocast=args.autocast, attention=args.attention,
                   activation_checkpointing=True if args.checkpointing else None, sharding=args.sharding,
                   world_size=args.world_size, steady_state=not args.first_step, zero_grad_at=args.zero_grad_at,
                   keep_output=args.keep_output, clip_grad_norm=args.clip_grad_norm,
                   offload_activations=args.offload_activations, reshard_after_forward=not args.no_reshard_after_forward,
                   cpu_offload=args.cpu_offload, meta=not args.no_meta, **kwargs)
    if args.fsdp_mixed_precision:
        import torch

        options["mixed_precision"] = {"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32}
    result = estimate_training_memory(model, *inputs, **options)
    report = _result_dict(result)
    text = [result.summary()]
    if args.fit is not None:
        found = largest_batch(model, *inputs, fit=args.fit, axis=0 if args.fit_axis == "batch" else 1, **options)
        report["fit"] = {"axis": args.fit_axis, "size": found.size, "device_bytes": found.device_bytes,
                         "peak_bytes": found.result.peak_bytes if found.result else None,
                         "next_need_bytes": found.next_peak_bytes, "measured": found.measured}
        label = "batch" if args.fit_axis == "batch" else "sequence length"
        text.append(f"largest {label} that fits {args.fit} (allowance included): {found.size}"
                    + (f" (needs {found.measured[found.size]} B; {found.size + 1} needs {found.next_peak_bytes} B)"
                       if found.size and found.next_peak_bytes else ""))
    report["text"] = "\n".join(text)
    return report


def _result_dict(result: Any) -> dict[str, Any]:
    report = dataclasses.asdict(result)
    report["timeline"] = [list(point) for point in result.timeline]
    report["allowance"]["total_bytes"] = result.allowance.total_bytes
    report["peak_at"] = result.peak_at
    return report


# -- profile MODEL --batch-sizes / --seq-lens: one model across a sweep --------------------------------------
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
