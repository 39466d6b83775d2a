"""Profiling one loaded model for the command line: pick the metrics, run them with progress.

``prepare`` places the model (``--device``), casts a copy for ``--dtype`` and builds its
profiler with only the asked-for functions; ``execute`` computes them, one progress step each,
and adds the per-layer forward times of a torch model.

The result is the same objects the Python API returns: the profiler's status keys (for a
``StatusReport`` or a ``CompareReport``) and its per-layer ``TableReport``.
"""
from __future__ import annotations

import difflib
import inspect
import warnings
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any

from deeplite_like.errors import called_as
from deeplite_like.cli.exit_codes import ProfilingFailed, UsageError
from deeplite_like.cli.loading import LoadedModel
from deeplite_like.cli.loading.onnx_files import onnx_profiler_inputs, with_batch
from deeplite_like.cli.loading.tflite_files import tflite_at
from deeplite_like.cli.loading.preflight import check_input_bytes, sample_bytes
from deeplite_like.cli.model_inputs import cast_copy
from deeplite_like.cli.progress import Progress
from deeplite_like.reports import StatusReport, TableReport
from deeplite_like.reports.base import format_seconds
from deeplite_like.metrics.status_keys import Metric, StatusKey
from deeplite_like.timing import DEFAULT_NUM_THREADS, NoisyTimingWarning
from deeplite_like.units import format_bytes

LAYERS_KEY = "layerwise_summary"
LATENCY_COLUMN = "latency_s"
TIMING_KEYS = ("execution_time", "throughput")

#: Short names accepted by ``--metrics`` besides the status keys themselves.
ALIASES = {
    "params": ("total_params", "trainable_params"),
    "size": ("model_size",),
    "memory": ("peak_activation_memory", "memory_footprint", "activation_arena"),
    "time": ("execution_time", "throughput"),
    "latency": ("execution_time",),
    "layers": (LAYERS_KEY,),
}


@dataclass(frozen=True)
class RunOptions:
    """What to measure and how (the command-line options, parsed).

    Attributes:
        batch_size: samples per batch (``None``: the inputs' own batch size).
        device: ``'cpu'``, ``'cuda'`` or ``'meta'`` (count without running: no timing).
        backward: count the backward pass too (MACs and FLOPs of a training step).
        metrics: status keys or aliases to compute (``None``: every metric the backend has).
        min_run_time: seconds of timed runs per model, after warm-up.
        causal_half: count causal attention as half of dense attention.
        dtype: profile a copy of the model cast to ``'float16'`` or ``'bfloat16'`` (``None``: as loaded).
        num_threads: threads while timing, an int or ``'auto'`` (``None``: the backend's default,
            1 thread for PyTorch, TensorFlow's own count for Keras).
        device_model: a device of ``deeplite_like.roofline``'s registry to predict the time on
            (``'this'``: calibrate this machine); ``fused``: predict with fused bytes.
        decode: a causal LM's decode step at this context (``count_serving``), and its prefill.
        node_times: an ``.onnx`` file's per-node times from ONNX Runtime's profiler at this graph optimization
            level (``backends.onnx.compute.node_times``), as the per-layer table's ``ORT time`` column.
    """

    batch_size: int | None = None
    device: str = "cpu"
    backward: bool = False
    metrics: tuple[str, ...] | None = None
    min_run_time: float = 0.2
    causal_half: bool = False
    dtype: str | None = None
    num_threads: int | str | None = None
    device_model: str | None = None
    fused: bool = False
    decode: int | None = None
    node_times: str | None = None


@dataclass
class ModelResult:
    """One profiled model: its computed status keys, its per-layer table, and notes; with
    ``--device-model`` its ``roofline.Prediction``, with ``--decode`` its serving cost (a
    ``ServingCost``, or a ``ServingPrediction`` with a device); with ``--node-times`` an ONNX file's
    ``NodeTimes``."""

    name: str
    spec: str
    backend: str
    statuses: dict[str, StatusKey]
    layers: TableReport | None = None
    notes: list[str] = field(default_factory=list)
    roofline: Any = None
    serving: Any = None
    node_times: Any = None

    def status_report(self, short_print: bool = True) -> StatusReport:
        return StatusReport(self.name, self.backend, self.statuses, short_print=short_print)


def expand_metrics(names: tuple[str, ...], known: tuple[str, ...]) -> list[str]:
    """Status keys named by ``--metrics`` (aliases expanded, order kept, repeats dropped)."""
    keys: list[str] = []
    for name in names:
        expanded = ALIASES.get(name, (name,))
        if name in ALIASES:  # an alias names what the backend has of it (an ONNX file has no trainable_params)
            expanded = tuple(key for key in expanded if key in known)
            if not expanded:
                raise UsageError(f"--metrics {name}: this model's backend computes none of "
                                 f"{', '.join(ALIASES[name])}", f"its metrics: {', '.join(known)}")
        for key in expanded:
            if key not in known:
                choices = sorted(set(known) | set(ALIASES))
                close = difflib.get_close_matches(name, choices, n=1)
                raise UsageError(f"--metrics: unknown metric {name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""),
                                 f"known metrics: {', '.join(choices)}")
            if key not in keys:
                keys.append(key)
    return keys


@dataclass
class PreparedRun:
    """A model's profiler with only the asked-for functions registered, and its arguments."""

    loaded: LoadedModel
    profiler: Any
    wanted: list[str]
    call_kwargs: dict[str, Any]
    inputs: tuple[tuple, dict]
    layer_times: bool = False
    options: RunOptions = field(default_factory=RunOptions)

    @property
    def steps(self) -> int:
        """Progress steps: one per registered profiler function, one for the per-layer times, one
        for the predicted time and one for the serving cost when asked."""
        return (len(self.profiler.functions) + int(self.layer_times) + int(self.options.device_model is not None)
                + int(self.options.decode is not None) + int(self.options.node_times is not None))


def prepare(loaded: LoadedModel, inputs: tuple[tuple, dict], options: RunOptions) -> PreparedRun:
    """Place the model, build its profiler and keep the functions computing what ``options`` asks."""
    if options.batch_size is not None:
        _check_batch(inputs, options.batch_size)
    _check_roofline(loaded, options)
    _check_node_times(loaded, options)
    if options.dtype is not None:
        loaded, inputs = cast_copy(loaded, inputs, options.dtype)
    if loaded.framework == "onnx" and options.batch_size is not None:
        inputs = with_batch(inputs, options.batch_size)
    if loaded.framework == "tflite":  # the file read at the given shapes / batch (tflite_files.tflite_at)
        loaded = tflite_at(loaded, inputs, options.batch_size)
    args, kwargs = _place(loaded, inputs, options.device)
    profiler = _profiler(loaded, args, kwargs)
    wanted = _select(profiler, loaded, options)
    call_kwargs = {"batch_size": options.batch_size if loaded.framework != "tflite" else None,  # (tflite_at did it)
                   "backward": options.backward,
                   "meta": options.device == "meta", "min_run_time": options.min_run_time,
                   "causal_half": options.causal_half}
    if options.num_threads is not None:  # else each backend's own default (see RunOptions)
        if _fixed_threads(loaded, options.num_threads):
            loaded.notes.append(f"--num-threads {options.num_threads} does not apply to this Keras model: "
                                "TensorFlow fixes its threads when it starts (the time says how many it used)")
        else:
            call_kwargs["num_threads"] = options.num_threads
    if loaded.framework == "onnx" and options.device != "meta":
        call_kwargs["device"] = options.device  # the ONNX Runtime provider that times it
    accepted = {name for function in profiler.functions for name in inspect.signature(function).parameters}
    call_kwargs = {k: v for k, v in call_kwargs.items() if k in accepted}
    # Per-layer forward times: for a torch model's per-layer table, when latency is asked for.
    layer_times = (loaded.framework == "torch" and LAYERS_KEY in wanted and "execution_time" in wanted
                   and options.device != "meta")
    return PreparedRun(loaded, profiler, wanted, call_kwargs, (args, kwargs), layer_times, options)


def _check_roofline(loaded: LoadedModel, options: RunOptions) -> None:
    """Refuse ``--device-model`` / ``--decode`` where they cannot run, before any work."""
    if options.device_model is None and options.decode is None:
        if options.fused:
            raise UsageError("--fused chooses the bytes of a predicted time", "add --device-model NAME")
        return
    if options.decode is not None and loaded.framework != "torch":
        raise UsageError(f"--decode counts a PyTorch causal language model's decode step (this is a "
                         f"{loaded.framework} model)", "profile the transformers model (hf:...)")
    if loaded.framework not in ("torch", "onnx", "tflite"):
        raise UsageError(f"--device-model needs the bytes each operator moves, which PyTorch models, ONNX and "
                         f"TFLite files count so far (this is a {loaded.framework} model)",
                         "export it to a .tflite or .onnx file and profile that, or profile it in PyTorch")
    if options.device_model is not None:
        from deeplite_like.roofline import device_model, is_this_machine

        try:
            if not is_this_machine(options.device_model):
                device_model(options.device_model)  # (this machine is calibrated when the time is predicted)
        except (KeyError, ValueError) as exc:
            raise UsageError(f"--device-model {options.device_model}: {exc.args[0] if exc.args else exc}",
                             "--device-model this calibrates this machine") from None
    if options.decode is not None and not hasattr(loaded.model, "generate"):
        raise UsageError(f"--decode counts a causal language model's decode step; {loaded.name} is a "
                         f"{type(loaded.model).__name__}, which has no generate()",
                         "profile an hf: causal language model (hf:gpt2, hf:meta-llama/...)")


def _check_node_times(loaded: LoadedModel, options: RunOptions) -> None:
    """Refuse ``--node-times`` where it cannot run, before any work: ONNX files only, a known level, a device."""
    if options.node_times is None:
        return
    if loaded.framework != "onnx":
        raise UsageError(f"--node-times reads ONNX Runtime's per-node profile of an .onnx file (this is a "
                         f"{loaded.framework} model)", "export it to .onnx and profile that file")
    from deeplite_like.backends.onnx.compute import OPTIMIZATION_LEVELS

    if options.node_times not in OPTIMIZATION_LEVELS:
        raise UsageError(f"--node-times {options.node_times}: not a graph optimization level",
                         f"one of: {', '.join(OPTIMIZATION_LEVELS)} (alone, --node-times is 'all')")
    if options.device == "meta":
        raise UsageError("--node-times runs the model, and the meta device runs nothing", "use --device cpu")
    if options.num_threads == "auto":
        raise UsageError("--node-times needs a thread count", "give --num-threads N, or leave it out for 1")


def _fixed_threads(loaded: LoadedModel, num_threads: int | str) -> bool:
    """Whether ``num_threads`` is a count this model's framework cannot switch to (Keras on TensorFlow)."""
    if loaded.framework != "keras" or not isinstance(num_threads, int):
        return False
    from deeplite_like.backends.keras._tf import import_keras

    return import_keras().config.backend() == "tensorflow"


def execute(run: PreparedRun, progress: Progress | None = None) -> ModelResult:
    """Compute every registered function of ``run`` (one progress step each) and collect the result."""
    loaded, profiler = run.loaded, run.profiler
    progress = progress if progress is not None else Progress(None, enabled=False)
    for function in profiler.functions:
        keys = [key.NAME for key in function.get_bounded_status_keys()]
        what = ", ".join(_friendly(profiler, k) for k in keys)
        progress.start(f"{loaded.name}: {what}")
        try:
            with called_as("the command line"), warnings.catch_warnings():
                # the report carries a noisy timing's warning as a note (spread_warning): not raw on stderr too
                warnings.simplefilter("ignore", NoisyTimingWarning)
                profiler.compute_status(keys[0], **run.call_kwargs)
        except Exception as exc:
            raise _failed(run, f"computing {what}", exc) from exc
        progress.advance()
    statuses = {key: profiler.get_status(key) for key in run.wanted}
    layers = statuses.pop(LAYERS_KEY, None)
    table = layers.value if layers is not None else None
    if table is not None and run.layer_times:
        progress.start(f"{loaded.name}: time per layer")
        try:
            timing = statuses.get("execution_time")
            threads = (getattr(timing, "details", None) or {}).get("num_threads")
            table = with_layer_times(table, loaded.model, *run.inputs, num_threads=threads)
        except Exception as exc:
            raise _failed(run, "timing each layer", exc) from exc
        progress.advance()
    prediction, serving = _roofline(run, progress)
    times = None
    if run.options.node_times is not None:
        progress.start(f"{loaded.name}: ONNX Runtime's time per node")
        try:
            times = _node_times(run)
        except Exception as exc:
            raise _failed(run, "timing each node", exc) from exc
        table = times.layer_table(f"Per-layer summary: {loaded.name}")
        progress.advance()
    by_reason: dict[str, list[str]] = {}
    if prediction is not None:
        loaded.notes.extend(_utilisation(prediction, statuses.get("execution_time"), run.options))
        if table is not None and loaded.framework == "torch":
            table = with_predicted_times(table, prediction)
    for key, reason in loaded.limits.items():
        by_reason.setdefault(reason, []).append(key)
    notes = list(loaded.notes) + [f"not computed ({', '.join(keys)}): {reason}" for reason, keys in by_reason.items()]
    if run.call_kwargs.get("causal_half"):
        notes.append("--causal-half: causal attention is counted as half of dense attention")
    if run.call_kwargs.get("backward") and table is not None:
        notes.append("--backward: MACs and FLOPs are of a training step (forward + backward); the per-layer table "
                     "counts the forward pass")
    return ModelResult(loaded.name, loaded.spec, profiler.backend_name, statuses, table, notes, prediction, serving,
                       times)


def _node_times(run: PreparedRun) -> Any:
    """The ``NodeTimes`` of ``run``'s ONNX file, at the run's inputs, batch, threads and device."""
    from deeplite_like.backends.onnx.compute import node_times
    from deeplite_like.backends.onnx.graph import batch_dims

    options = run.options
    inputs = onnx_profiler_inputs(run.inputs)
    dims = batch_dims(run.loaded.model, options.batch_size) if options.batch_size is not None and inputs is None else None
    threads = options.num_threads if isinstance(options.num_threads, int) else DEFAULT_NUM_THREADS
    return node_times(run.loaded.model, inputs, dims, num_threads=threads, optimization=options.node_times,
                      device=options.device)


def _utilisation(prediction: Any, timing: Any, options: RunOptions) -> list[str]:
    """MFU and bandwidth utilisation of the measured forward, when it ran on the predicted device."""
    from deeplite_like.roofline import is_this_machine

    seconds = getattr(timing, "value", None)
    here = is_this_machine(prediction.device) and options.device == "cpu"
    if not seconds or options.backward or not (here or options.device == "cuda"):
        return []
    if options.device == "cuda":  # the card the run used is the one named: the user says so with --device-model
        where = f"measured on this GPU, predicted for {prediction.device.name}"
    else:
        where = "measured and predicted on this machine"
    return [f"predicted {format_seconds(prediction.time_s)} against the measured {format_seconds(seconds)} ({where}): "
            f"MFU {100 * prediction.mfu(seconds):.1f} %, bandwidth utilisation "
            f"{100 * prediction.bandwidth_utilisation(seconds):.1f} %"]


def _count_with_bytes(run: PreparedRun) -> Any:
    """The run's ``OpCount`` with the bytes each operator moves, from its backend."""
    loaded, options = run.loaded, run.options
    args, kwargs = run.inputs
    if loaded.framework == "onnx":
        from deeplite_like.backends.onnx import count_ops as count_file

        return count_file(loaded.model, onnx_profiler_inputs((args, kwargs)), warn_untracked=False, bytes_moved=True)
    if loaded.framework == "tflite":
        from deeplite_like.backends.tflite import count_ops as count_file

        return count_file(loaded.model, warn_untracked=False, bytes_moved=True)
    from deeplite_like.backends.torch import count_ops

    return count_ops(loaded.model, args=args, kwargs=kwargs, backward=options.backward, meta=options.device == "meta",
                     causal_half=options.causal_half, bytes_moved=True, warn_untracked=False)


def _attention_kernel(device: Any) -> str:
    """The attention kernel ``device`` runs: CUDA's flash on a GPU (a Jetson too), the CPU's on a CPU."""
    if device is None or device.kind == "gpu" or "jetson" in device.name.lower():
        return "cuda"
    return "cpu"


def _roofline(run: PreparedRun, progress: Progress) -> tuple[Any, Any]:
    """The predicted time (``--device-model``) and the serving cost (``--decode``) of ``run``'s model."""
    options, loaded = run.options, run.loaded
    prediction = serving = device = None
    if options.device_model is not None:
        from deeplite_like.roofline import device_model, predict

        progress.start(f"{loaded.name}: predicted time on {options.device_model}")
        try:  # "this": calibrated at the thread count the execution time is measured at
            threads = options.num_threads if isinstance(options.num_threads, int) else DEFAULT_NUM_THREADS
            device = device_model(options.device_model, num_threads=threads)
            prediction = predict(_count_with_bytes(run), device, fused=options.fused)
        except Exception as exc:
            raise _failed(run, "predicting the time", exc) from exc
        progress.advance()
    if options.decode is not None:
        from deeplite_like.backends.torch.serving import count_serving

        progress.start(f"{loaded.name}: prefill and decode at {options.decode} tokens")
        try:
            args, kwargs = run.inputs
            ids = next((a for a in (*args, *kwargs.values()) if hasattr(a, "shape") and len(a.shape) == 2), None)
            batch, prompt = (int(ids.shape[0]), int(ids.shape[1])) if ids is not None else (1, options.decode)
            serving = count_serving(loaded.model, prompt_tokens=prompt, context=options.decode, batch_size=batch,
                                    attention=_attention_kernel(device))
            if device is not None:
                serving = serving.predict(device, fused=options.fused)
        except Exception as exc:
            raise _failed(run, "counting the prefill and decode step", exc) from exc
        progress.advance()
    return prediction, serving


def with_layer_times(table: TableReport, model: Any, args: tuple, kwargs: dict,
                     num_threads: int | None = None) -> TableReport:
    """The per-layer table with a ``latency_s`` column: median forward seconds per module, timed at
    ``num_threads`` (the execution time's, so that the report states one thread count)."""
    from deeplite_like.backends.torch.latency import module_forward_times

    times = module_forward_times(model, args, kwargs, num_threads=num_threads)
    rows = [{**row, LATENCY_COLUMN: times.get(str(row["module"]))} for row in table.rows]
    formatters = {**table.formatters, LATENCY_COLUMN: format_seconds}
    headers = {**table.headers, LATENCY_COLUMN: "Time (hooked)"}
    notes = [*table.notes, "Time (hooked): forward wall time per module, every module read from the same forward "
                           "(the median of 5), children included, so a parent is its children plus its own work; "
                           "timed with hooks (a few microseconds per module call), so the model row differs from "
                           "the Execution time metric, a torch.utils.benchmark median without hooks"]
    return TableReport(table.title, [*table.columns, LATENCY_COLUMN], rows, formatters=formatters, headers=headers,
                       notes=notes)


PREDICTED_COLUMNS = ("bytes_moved", "predicted_s", "bound")


def with_predicted_times(table: TableReport, prediction: Any) -> TableReport:
    """The per-layer table with each module's bytes moved, predicted time and bound (``--device-model``)."""
    rows = []
    for row in table.rows:
        figures = prediction.by_module.get(str(row["module"]))
        rows.append({**row, "bytes_moved": figures.bytes if figures else None,
                     "predicted_s": figures.time_s if figures else None, "bound": figures.bound if figures else None})
    formatters = {**table.formatters, "bytes_moved": lambda v: "" if v is None else format_bytes(v),
                  "predicted_s": lambda v: "" if v is None else format_seconds(v)}
    headers = {**table.headers, "bytes_moved": "Bytes moved", "predicted_s": f"Predicted ({prediction.device.name})",
               "bound": "Bound"}
    notes = [*table.notes, f"Predicted: the roofline time of the module's operators on {prediction.device.name}, "
                           "children included (deeplite_like.roofline; the table of the slowest operators below)"]
    return TableReport(table.title, [*table.columns, *PREDICTED_COLUMNS], rows, formatters=formatters, headers=headers,
                       notes=notes)


def check_device(device: str, specs: Sequence[str] = ()) -> None:
    """Refuse ``--device cuda`` where it cannot run, before anything is loaded: for ``.onnx`` files, an
    onnxruntime without the CUDA provider; for the other models, a torch that sees no CUDA device."""
    if device != "cuda":
        return
    import importlib.util

    onnx_files = [spec for spec in specs if str(spec).lower().endswith(".onnx")]
    if onnx_files:
        _check_onnx_cuda(onnx_files[0])
        if len(onnx_files) == len(specs):
            return

    if importlib.util.find_spec("torch") is None:
        raise UsageError("--device cuda runs PyTorch models, and torch is not installed here",
                         "use --device cpu (or meta, which counts without running)")
    import torch

    if not torch.cuda.is_available():
        build = f"torch {torch.__version__} " + ("is built without CUDA" if torch.version.cuda is None else
                                                f"is built for CUDA {torch.version.cuda}, but finds no GPU")
        raise UsageError(f"--device cuda: this torch sees no CUDA device ({build}); available here: cpu, meta",
                         "use --device cpu (or --device meta, which counts without running), or install a "
                         "CUDA build of torch on a machine with a GPU")


def _check_onnx_cuda(spec: str) -> None:
    import importlib.util

    if importlib.util.find_spec("onnxruntime") is None:
        raise UsageError(f"--device cuda times {spec} with ONNX Runtime's CUDA provider, and onnxruntime is not "
                         "installed here", "pip install onnxruntime-gpu (or use --device cpu)")
    from deeplite_like.backends.onnx.graph import missing_cuda_provider

    if (missing := missing_cuda_provider()) is not None:
        raise UsageError(f"--device cuda cannot time {spec}: {missing}",
                         "use --device cpu, or install onnxruntime-gpu in place of onnxruntime on a machine with a GPU")


# ------------------------------------------------------------------------------ helpers
def _check_batch(inputs: tuple[tuple, dict], batch_size: int) -> None:
    """Refuse a ``--batch-size`` whose inputs alone would not fit in memory here (estimated per sample)."""
    per_sample = sample_bytes(inputs)
    check_input_bytes(f"--batch-size {batch_size}", f"{batch_size} samples of {format_bytes(per_sample)} each",
                      per_sample * batch_size)


def _place(loaded: LoadedModel, inputs: tuple[tuple, dict], device: str) -> tuple[tuple, dict]:
    """Move a torch model and its inputs to ``cuda`` when asked (the model is the command's own copy)."""
    if device != "cuda":
        return inputs
    if loaded.framework == "onnx":  # ONNX Runtime's CUDA provider times it (ComputeExecutionTime's device)
        return inputs
    if loaded.framework != "torch":
        raise UsageError(f"--device cuda is supported for PyTorch and ONNX models; {loaded.spec!r} is a "
                         f"{loaded.framework} model", "drop --device")
    import torch
    from torch.utils._pytree import tree_map

    check_device(device)
    loaded.model.to("cuda")
    return tree_map(lambda x: x.to("cuda") if isinstance(x, torch.Tensor) else x, inputs)


def _as_is(batch: Any) -> Any:
    return batch


def _profiler(loaded: LoadedModel, args: tuple, kwargs: dict) -> Any:
    from deeplite_like import ForwardPass, Inputs, profiler_for

    try:
        if loaded.framework == "onnx":  # shapes by input name or in order (onnx_files.onnx_inputs)
            from deeplite_like.backends.onnx import OnnxProfiler

            return OnnxProfiler(loaded.model, name=loaded.name, inputs=onnx_profiler_inputs((args, kwargs)))
        if loaded.framework == "tflite":  # read at its inputs' shapes (tflite_at); a given array feeds the timing
            from deeplite_like.backends.tflite import TFLiteProfiler

            arrays = [a for a in (*args, *kwargs.values()) if not isinstance(a, tuple)]
            data = {"test": [arrays[0]]} if len(arrays) == 1 and len(loaded.model.inputs) == 1 else None
            return TFLiteProfiler(loaded.model, data, name=loaded.name)
        if len(args) == 1 and not kwargs:
            return profiler_for(loaded.model, {"test": [args[0]]}, name=loaded.name)
        return profiler_for(loaded.model, {"test": [Inputs(args, kwargs)]}, name=loaded.name,
                            forward_pass=ForwardPass(extract=_as_is))
    except ImportError as exc:
        raise UsageError(f"{loaded.spec!r}: {exc}", "install the extra named above") from None


def _select(profiler: Any, loaded: LoadedModel, options: RunOptions) -> list[str]:
    """Unregister the functions computing nothing asked for; return the keys to report."""
    known = (*profiler.status_keys, *profiler.limits)  # a key the model cannot have is refused below, with why
    explicit = options.metrics is not None
    wanted = expand_metrics(options.metrics, known) if explicit else list(known)
    refused = {**profiler.limits, **loaded.limits}
    if options.device == "meta":
        refused.update({key: "the meta device runs no arithmetic, so nothing can be timed" for key in TIMING_KEYS})
    for key, reason in refused.items():
        if key in wanted:
            if explicit:
                raise UsageError(f"--metrics {key}: {reason}", "leave it out of --metrics")
            wanted.remove(key)
    for function in profiler.functions:
        if not any(key.NAME in wanted for key in function.get_bounded_status_keys()):
            profiler.unregister_profiler_function(function)
    return wanted


def _friendly(profiler: Any, key: str) -> str:
    status = profiler.get_status(key)
    if isinstance(status, Metric):
        return status.friendly_name().lower()
    return key.replace("_", " ")


def _failed(run: PreparedRun, doing: str, exc: Exception) -> ProfilingFailed:
    """The error for ``exc``, raised by the model while ``doing`` (``'computing macs'``), with a hint."""
    return ProfilingFailed(f"profiling {run.loaded.name!r} failed while {doing}: {type(exc).__name__}: "
                           f"{_first_line(exc)}", _failure_hint(exc, *run.inputs))


def _failure_hint(exc: BaseException, args: tuple, kwargs: dict) -> str:
    from deeplite_like.data import describe

    text = str(exc).lower()
    shown = describe(args) + (f", {describe(kwargs)}" if kwargs else "")
    if any(word in text for word in ("shape", "size", "mat1", "dimension", "expected input", "channels")):
        return f"the model got inputs {shown}; pass --input-shape or --inputs that fit it (--verbose shows the traceback)"
    return f"the model got inputs {shown}; --verbose shows the traceback, and --metrics can leave a metric out"


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[:limit] + "..."
