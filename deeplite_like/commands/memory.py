"""``deeplite-like memory MODEL --train``: will a training step fit? Bytes per rank, measured on meta.

::

    deeplite-like memory MODEL --train [--optimizer adamw] [--autocast bf16] [--checkpointing]
                         [--sharding fsdp --world-size 8 [--fsdp-mixed-precision] [--no-reshard-after-forward]
                          [--cpu-offload]]
                         [--zero-grad-at after_forward] [--keep-output] [--fit 80GiB [--fit-axis seq]]
                         [--meta-init] [--input-shape 1,2048 --int-inputs] [--format json|html] [-o FILE]

Without ``--train`` it measures the forward alone (``peak_activation_memory`` on meta). The
loss is the model's own (``output.loss``) or the sum of its output: pass a factory returning a
model that computes its loss for another one.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from typing import IO, Any

from deeplite_like.cli.exit_codes import ProfilingFailed, UsageError
from deeplite_like.commands.inputs import parse_shape, resolve_inputs
from deeplite_like.cli.loading import FORMS_HINT, load_model, parse_model_args, require_framework
from deeplite_like.commands.options import positive_int
from deeplite_like.commands.output import Rendered, require_writable_output, write
from deeplite_like.reports.formatting import strict_json

SHARDINGS = ("ddp", "zero1", "zero2", "zero3", "fsdp")


def add_parser(commands: argparse._SubParsersAction) -> None:
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
    step.add_argument("--optimizer", default="adamw", help="adamw (default), adam, sgd, adafactor, adagrad, rmsprop")
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
    parser.set_defaults(run=run)


def device_size(text: str) -> str:
    """An argparse type: a device memory size > 0 (``80GiB``), checked before any model is loaded (kept as text)."""
    from deeplite_like.byte_sizes import parse_bytes

    try:
        parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _inputs(args: argparse.Namespace, loaded: Any) -> tuple[tuple, dict]:
    if args.int_inputs and args.input_shape:
        import torch

        return tuple(torch.zeros(shape, dtype=torch.long) for shape in args.input_shape), {}
    return resolve_inputs(loaded, args.input_shape, args.inputs)


def run(args: argparse.Namespace, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if args.sharding is None and args.world_size != 1:
        raise UsageError(f"--world-size {args.world_size} needs --sharding", f"one of {', '.join(SHARDINGS)}")
    if ((args.fsdp_mixed_precision or args.no_reshard_after_forward or args.cpu_offload)
            and args.sharding not in ("fsdp", "zero3")):
        raise UsageError("--fsdp-mixed-precision / --no-reshard-after-forward / --cpu-offload are options of FSDP2",
                         "add --sharding fsdp --world-size N")
    if args.fit is not None and not args.train:
        raise UsageError("--fit searches the batch of a training step", "add --train")
    fmt = args.format or ("html" if (args.output or "").endswith((".html", ".htm")) else
                          "json" if (args.output or "").endswith(".json") else "table")
    if fmt == "html" and not args.train:
        raise UsageError("--format html draws the timeline of a training step", "add --train")
    require_writable_output(args.output)  # before any model is loaded: no work is lost to a bad path
    require_framework("torch", args.model)
    import torch

    from deeplite_like.backends.torch.training_optimizers import _OPTIMIZERS  # the names build_optimizer knows

    if args.train and args.optimizer.lower() not in _OPTIMIZERS:
        raise UsageError(f"--optimizer {args.optimizer!r} is not a known optimizer",
                         f"use one of {', '.join(sorted(_OPTIMIZERS))}")

    with torch.device("meta") if args.meta_init else contextlib.nullcontext():
        loaded = load_model(args.model, parse_model_args(args.model_args), args.weights)
    if loaded.framework != "torch":
        raise UsageError(f"{args.model!r} is a {loaded.framework} model; memory measures PyTorch models",
                         "name a PyTorch model")
    inputs, kwargs = _inputs(args, loaded)
    try:
        report = _measure(args, loaded.model, inputs, kwargs)
    except (RuntimeError, NotImplementedError, ValueError, TypeError) as error:
        raise ProfilingFailed(f"measuring the memory of {loaded.name} failed: {error}",
                              "run again with --verbose for the traceback") from error
    if fmt == "json":
        text = strict_json(report)
    elif fmt == "html":
        from deeplite_like.reports.memory_timeline import training_memory_page

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
    from deeplite_like.backends.torch.batch_fit import largest_batch
    from deeplite_like.backends.torch.training_memory import estimate_training_memory

    options = dict(optimizer=args.optimizer, autocast=args.autocast, attention=args.attention,
                   activation_checkpointing=True if args.checkpointing else None, sharding=args.sharding,
                   world_size=args.world_size, steady_state=not args.first_step, zero_grad_at=args.zero_grad_at,
                   keep_output=args.keep_output, reshard_after_forward=not args.no_reshard_after_forward,
                   cpu_offload=args.cpu_offload, **kwargs)
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
