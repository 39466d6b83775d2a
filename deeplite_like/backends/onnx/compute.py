"""``OnnxProfiler``: the core ``Profiler`` with the ONNX backend's metrics, and its ``Compute*`` functions.

The model is the file that ships (a path, bytes or ``onnx.ModelProto``); it is read once and
never changed. MACs and FLOPs come from ``count_ops`` (the formula table), parameters and size
from the initializers at their stored dtype, and latency from an ONNX Runtime
``InferenceSession`` on the CPU provider, timed with the shared timing loop (``timing_loop.py``)
at a stated thread count (intra-op threads, default 1; inter-op 1, sequential execution).

Inputs: ``inputs=`` (what ``count_ops`` accepts: arrays, shapes, a dict by input name) and
``dims=`` (symbolic dimensions by name), or else the first batch of a data split (``x`` of an
``(x, y)`` batch, arrays). Timing runs on the arrays given, or on seeded arrays of the bound
shapes and the inputs' dtypes (zeros for integer inputs: valid token ids) when only shapes are.
"""
from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from deeplite_like.errors import caller, check_profiler_options
from deeplite_like.backends.onnx.formulas import count_graph, node_costs, node_module, warn_about
from deeplite_like.backends.onnx.graph import (GraphInfo, OnnxSession, batch_dims, graph_and_bodies, import_onnx,
                                               inference_session, initializer_stats, load_model, prepare,
                                               session_inputs)
from deeplite_like.backends.onnx.graph import tensor_lifetimes
from deeplite_like.functions import PredictEvaluation, ProfilerFunction, complexity_values, memory_values
from deeplite_like.metrics import (ActivationArena, ExecutionTime, Flops, Macs, MemoryFootprint, ModelSize,
                                   PeakActivationMemory,
                                   Throughput, TotalParams)
from deeplite_like.profiler import Profiler
from deeplite_like.reports import TableReport
from deeplite_like.reports.base import format_seconds
from deeplite_like.metrics.status_keys import Detailed
from deeplite_like.timing import (DEFAULT_NUM_THREADS, busy_note, check_num_threads, summarise, time_blocks,
                                  timing_values)
from deeplite_like.units import format_bytes, format_share

import_onnx()

__all__ = ["ComputeComplexity", "ComputeExecutionTime", "ComputeFlops", "ComputeMemory", "ComputeParams", "ComputeSize",
           "DEFAULT_FUNCTIONS", "NodeTime", "NodeTimes", "OPTIMIZATION_LEVELS", "OnnxProfiler", "UnjoinedTime",
           "node_times"]

#: What ``total_params`` counts in this backend (a compare across backends states it).
ONNX_PARAMS_CONVENTION = ("ONNX: elements of every initializer, each once, at its stored dtype, except integer index "
                          "data (Reshape shapes, Gather indices); an exporter that folds batch norm into the conv "
                          "stores fewer parameters than the live model had")


def _first_batch(data_splits: Mapping[str, Any], split: str | None) -> Any:
    """``x`` of the first batch of ``split`` (default: ``'test'`` if present, else the first split)."""
    if not data_splits:
        return None
    name = split or ("test" if "test" in data_splits else next(iter(data_splits)))
    if name not in data_splits:
        raise KeyError(f"no data split {name!r}; the splits are {list(data_splits)}")
    batch = next(iter(data_splits[name]))
    return batch[0] if isinstance(batch, (tuple, list)) and len(batch) == 2 else batch


def _graph(onnx_model: Any, inputs: Any, dims: Mapping[str, int] | None, data_splits: Mapping[str, Any],
           split: str | None, batch_size: int | None = None) -> tuple[GraphInfo, Any]:
    """The inferred graph for the profiler's inputs, else the split's first batch (its first ``batch_size``
    samples); ``batch_size`` binds every symbolic first dimension (``graph.batch_dims``)."""
    given = inputs
    if given is None:
        given = _first_batch(data_splits, split)
        if batch_size is not None and hasattr(given, "shape"):
            if len(given) < batch_size:
                raise ValueError(f"batch_size={batch_size} but the split's first batch has {len(given)} samples")
            given = given[:batch_size]
    bound = dict(dims or {})
    if batch_size is not None:
        for name, value in batch_dims(onnx_model, batch_size).items():
            if bound.setdefault(name, value) != value:
                raise ValueError(f"dims binds {name!r} to {bound[name]}, but batch_size is {batch_size}")
    return prepare(onnx_model, given, bound), given


class ComputeComplexity(ProfilerFunction):
    """MACs and FLOPs of one run of the file, node by node (``count_ops``); untracked ops in the details."""

    def get_bounded_status_keys(self):
        return Macs, Flops

    def __call__(self, onnx_model: Any, data_splits: Mapping[str, Any], inputs: Any = None,
                 dims: Mapping[str, int] | None = None, split: str | None = None,
                 batch_size: int | None = None) -> dict:
        info, _ = _graph(onnx_model, inputs, dims, data_splits, split, batch_size)
        counted = count_graph(info)
        warn_about(info, counted)
        details = {"batch_size": counted.batch_size, "untracked": dict(counted.untracked),
                   "input_shapes": dict(info.input_shapes)}
        return complexity_values(counted, details)


ComputeFlops = ComputeComplexity  # deeplite-profiler's name


class ComputeParams(ProfilerFunction):
    """Parameters stored in the file: initializer elements, each once (``ONNX_PARAMS_CONVENTION``)."""

    def get_bounded_status_keys(self):
        return (TotalParams,)

    def __call__(self, onnx_model: Any) -> Detailed:
        stats = initializer_stats(onnx_model)
        return Detailed(stats.params, {"by_dtype": {k: v["params"] for k, v in stats.by_dtype.items()},
                                       "initializers": stats.count, "index_data_elements": stats.index_data,
                                       "convention": ONNX_PARAMS_CONVENTION})


class ComputeSize(ProfilerFunction):
    """Bytes of the parameters at their stored dtype (int8 1, fp16 2, int4 packed two per byte)."""

    def get_bounded_status_keys(self):
        return (ModelSize,)

    def __call__(self, onnx_model: Any) -> Detailed:
        stats = initializer_stats(onnx_model)
        return Detailed(stats.bytes, {"by_dtype": {k: v["bytes"] for k, v in stats.by_dtype.items()}})


class ComputeMemory(ProfilerFunction):
    """Peak live activation bytes of one run (``graph.tensor_lifetimes``), the arena a planner with offsets needs
    for the same tensors (``TensorLifetimes.plan``: ONNX Runtime reports no arena size), and the footprint:
    stored weights + peak.

    ``include_weights=False`` (deeplite-profiler's option) leaves the weights out of the footprint.
    """

    def get_bounded_status_keys(self):
        return PeakActivationMemory, MemoryFootprint, ActivationArena

    def __call__(self, onnx_model: Any, data_splits: Mapping[str, Any], inputs: Any = None,
                 dims: Mapping[str, int] | None = None, split: str | None = None, batch_size: int | None = None,
                 include_weights: bool = True) -> dict:
        info, _ = _graph(onnx_model, inputs, dims, data_splits, split, batch_size)
        memory = tensor_lifetimes(info)
        batches = {shape[0] for shape in info.input_shapes.values() if shape}
        batch = batches.pop() if len(batches) == 1 else 1
        weights = initializer_stats(onnx_model).bytes if include_weights else 0
        return {**memory_values(memory, weights, batch, include_weights, "tensor lifetimes in topological order"),
                ActivationArena.NAME: Detailed(memory.arena_bytes, {
                    "batch_size": batch, "source": "planned", "peak_activations": PeakActivationMemory(memory.peak_bytes),
                    "alignment": memory.alignment,
                    "method": (f"our planner: the same tensors as the peak, largest first, each at the smallest gap "
                               f"that fits, {memory.alignment}-byte aligned; ONNX Runtime reports no arena size")})}


class ComputeExecutionTime(ProfilerFunction):
    """Median time of one ONNX Runtime run of one batch and the throughput it implies.

    ``num_threads`` (default 1) is the session's intra-op thread count; inter-op is 1 with
    sequential execution. ``device``: ``"cpu"`` (the CPU provider) or ``"cuda"`` (the CUDA provider,
    onnxruntime-gpu; each run copies the inputs to the GPU and the outputs back, as ``session.run``
    does). Details as the other backends' (``q1``, ``q3``, ``forwards``, ...).
    """

    def get_bounded_status_keys(self):
        return ExecutionTime, Throughput

    def __call__(self, onnx_model: Any, data_splits: Mapping[str, Any], inputs: Any = None,
                 dims: Mapping[str, int] | None = None, split: str | None = None, min_run_time: float = 0.2,
                 num_threads: int | None = None, batch_size: int | None = None, device: str = "cpu") -> dict:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ImportError("timing an ONNX model needs onnxruntime, which is not installed here; install it with: "
                              "pip install 'deeplite-like[onnx]'") from exc
        threads = DEFAULT_NUM_THREADS if num_threads is None else num_threads
        info, given = _graph(onnx_model, inputs, dims, data_splits, split, batch_size)
        feeds = session_inputs(info.input_shapes, info.dtypes, given)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        session = inference_session(onnx_model, options, device)
        provider = session.get_providers()[0]
        busy = busy_note()
        blocks = time_blocks(lambda: session.run(None, feeds), lambda: None, warmup=3, min_run_time=min_run_time,
                             min_blocks=5)
        batches = {shape[0] for shape in info.input_shapes.values() if shape}
        batch = batches.pop() if len(batches) == 1 else 1
        reason = (f"ONNX Runtime {ort.__version__} {provider}: {threads} intra-op thread(s), 1 inter-op, "
                  "sequential execution")
        stats = summarise(blocks, batch_size=batch, num_threads=threads, device=device, compiled="onnxruntime",
                          threads_reason=reason, busy=busy)
        return timing_values(stats, runtime=f"onnxruntime {ort.__version__}", provider=provider)


# -- Per-node time from ONNX Runtime's profiler, joined to the per-node counts ------------------------------

#: ``graph_optimization_level`` names -> ``onnxruntime.GraphOptimizationLevel`` member names. ``"all"`` is ORT's
#: default (what ``execution_time`` times); ``"disabled"`` runs every node as stored: a 1:1 join.
OPTIMIZATION_LEVELS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
                       "layout": "ORT_ENABLE_LAYOUT", "all": "ORT_ENABLE_ALL"}

#: Suffixes ORT adds to a value's name when it names a node it made after that value (a layout transform's
#: ``..._nchwc``, a generated ``..._token_5``), stripped to find the value the name refers to.
_ORT_SUFFIX = re.compile(r"(_nchwc|_token_\d+|_reorder|_output_nchwc)+$")


@dataclass(frozen=True)
class NodeTime:
    """One node of the file, its counts, and the mean kernel time ONNX Runtime measured for it.

    ``time_s`` is ``None`` when ORT did not run the node as itself (fused into another node, folded into a
    constant, or a ``Constant`` ORT keeps as an initializer); ``note`` says which. ``bytes`` is what the node
    reads and writes (``formulas.node_costs``).
    """

    name: str
    op_type: str
    module: str
    macs: int
    flops: int
    bytes: int
    time_s: float | None
    note: str = ""

    def as_dict(self) -> dict:
        return {"name": self.name, "op_type": self.op_type, "module": self.module, "macs": self.macs,
                "flops": self.flops, "bytes": self.bytes, "time_s": self.time_s, "note": self.note}


@dataclass(frozen=True)
class UnjoinedTime:
    """A node ORT ran that is not a node of the file as stored, with its mean time: never dropped.

    ``reason``: ``"fused"`` (ORT merged nodes: ``fused /fc/Gemm`` is a ``FusedGemm``), ``"rewritten"`` (a
    node of the file's name run as another op, or a node ORT named after one of the file's values: a layout
    transform's ``/conv/Relu_output_0_nchwc``) or ``"inserted"`` (a node of ORT's own: ``ReorderOutput``,
    ``MemcpyToHost``). ``refers_to``: the file's nodes its name points at (a hint, not a join: the node
    also does the work of nodes its name does not name).
    """

    name: str
    op_type: str
    time_s: float
    reason: str
    refers_to: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"name": self.name, "op_type": self.op_type, "time_s": self.time_s, "reason": self.reason,
                "refers_to": list(self.refers_to)}


@dataclass(frozen=True)
class NodeTimes:
    """Per-node times of ``runs`` profiled runs of one file, joined to its per-node counts (``node_times``).

    ``nodes``: every node of the file's main graph in stored order; ``unjoined``: what ORT ran that no stored
    node is (their time is kept here, never spread over the file's nodes); ``run_s``: the mean ``model_run``
    time ORT recorded (session overhead included), so ``joined_s + unjoined_s <= run_s``.
    """

    nodes: list[NodeTime]
    unjoined: list[UnjoinedTime]
    run_s: float
    runs: int
    num_threads: int
    optimization: str
    runtime: str
    provider: str
    batch_size: int | None = None
    notes: list[str] = field(default_factory=list)
    #: ORT's allocator figures from the trace (largest over the profiled runs' nodes, bytes): ``mem_in_use_peak``
    #: and ``mem_arena_held``. They count initializers, prepacked weights and activations together, so they are
    #: reported as ORT gives them, never joined to a node or set beside our activation figures.
    allocator: dict[str, int] = field(default_factory=dict)

    @property
    def joined_s(self) -> float:
        return sum(n.time_s for n in self.nodes if n.time_s is not None)

    @property
    def unjoined_s(self) -> float:
        return sum(u.time_s for u in self.unjoined)

    def by_module(self) -> dict[str, float]:
        """Module -> seconds of its joined nodes, children included (``""``: the whole graph's joined time)."""
        totals: dict[str, float] = {"": 0.0}
        for node in self.nodes:
            if node.time_s is None:
                continue
            parts = node.module.split(".") if node.module else []
            for depth in range(len(parts) + 1):
                key = ".".join(parts[:depth])
                totals[key] = totals.get(key, 0.0) + node.time_s
        return totals

    def as_dict(self) -> dict:
        return {"runtime": self.runtime, "provider": self.provider, "num_threads": self.num_threads,
                "graph_optimization_level": self.optimization, "runs": self.runs, "batch_size": self.batch_size,
                "run_s": self.run_s, "joined_s": self.joined_s, "unjoined_s": self.unjoined_s,
                "nodes": [n.as_dict() for n in self.nodes], "unjoined": [u.as_dict() for u in self.unjoined],
                "allocator": dict(self.allocator), "notes": list(self.notes)}

    def layer_table(self, title: str = "Per-layer summary") -> TableReport:
        """The per-module table (rows keyed by qualified module name, parents include children, as the torch
        backend's): nodes, MACs, FLOPs, bytes moved and ORT's measured time of the module's joined nodes."""
        counts: dict[str, dict[str, Any]] = {}
        for node in self.nodes:
            parts = node.module.split(".") if node.module else []
            for depth in range(len(parts) + 1):
                row = counts.setdefault(".".join(parts[:depth]), {"nodes": 0, "macs": 0, "flops": 0, "bytes": 0})
                row["nodes"] += 1
                row["macs"] += node.macs
                row["flops"] += node.flops
                row["bytes"] += node.bytes
        times, total = self.by_module(), self.joined_s + self.unjoined_s
        rows = [{"module": name, **row, "ort_time_s": times.get(name),
                 "time_share": 100.0 * times[name] / total if name in times and total else None}
                for name, row in sorted(counts.items(), key=lambda kv: _module_order(kv[0], self.nodes))]
        notes = [f"ORT time: mean kernel time of the module's nodes over {self.runs} profiled run(s) ({self.runtime} "
                 f"{self.provider}, {self.num_threads} intra-op thread(s), graph_optimization_level="
                 f"{self.optimization!r}), children included; share of all node time"]
        if self.unjoined:
            notes.append(f"{len(self.unjoined)} node(s) ORT ran are not nodes of the file ("
                         f"{format_seconds(self.unjoined_s)}, {_share(self.unjoined_s, total)} of node time) and are "
                         "in no row: " + ", ".join(f"{u.name} ({u.op_type}, {u.reason})" for u in self.unjoined[:6])
                         + (" ..." if len(self.unjoined) > 6 else "")
                         + "; --node-times disabled turns ORT's fusions off for a 1:1 join")
        notes.extend(self.notes)
        return TableReport(title, ["module", "nodes", "macs", "flops", "bytes", "ort_time_s", "time_share"], rows,
                           formatters={"module": lambda v: v or "(model)", "macs": lambda v: f"{v:,}",
                                       "flops": lambda v: f"{v:,}", "bytes": format_bytes,
                                       "ort_time_s": format_seconds,
                                       "time_share": lambda v: "" if v is None else format_share(v)},
                           headers={"nodes": "Nodes", "macs": "MACs", "flops": "FLOPs", "bytes": "Bytes moved",
                                    "ort_time_s": "ORT time", "time_share": "Time %"}, notes=notes)


    def unjoined_table(self) -> TableReport:
        """What ORT ran that is no node of the file: its name, op, mean time, why, and the nodes it names."""
        rows = [{**u.as_dict(), "refers_to": ", ".join(u.refers_to)} for u in self.unjoined]
        return TableReport(f"ONNX Runtime nodes not in the file (graph_optimization_level={self.optimization!r})",
                           ["name", "op_type", "time_s", "reason", "refers_to"], rows,
                           formatters={"time_s": format_seconds},
                           headers={"name": "ORT node", "op_type": "Op", "time_s": "ORT time", "reason": "Why",
                                    "refers_to": "Names the file's node"},
                           notes=["fused: ORT merged nodes into one; rewritten: ORT ran another op in a node's place "
                                  "(a layout transform named after the node's output); inserted: ORT's own node. "
                                  "Their time is not spread over the file's nodes"])


def _share(part: float, total: float) -> str:
    return format_share(100.0 * part / total) if total else "0.0 %"


def _module_order(name: str, nodes: list[NodeTime]) -> tuple:
    """Modules in the order their first node runs, each parent before its children (the model first)."""
    first = {}
    for index, node in enumerate(nodes):
        parts = node.module.split(".") if node.module else []
        for depth in range(len(parts) + 1):
            first.setdefault(".".join(parts[:depth]), index)
    return (first.get(name, len(nodes)), name.count(".") + (name != ""))


def _named_copy(model: Any) -> tuple[Any, list[str], set[str]]:
    """A copy of ``model`` whose nodes all have unique names (an unnamed or repeated one becomes ``Op#index``,
    ``Op#g.index`` in a subgraph), the main graph's names in stored order, and the subgraphs' node names: ORT's
    profiler names events after nodes."""
    onnx = import_onnx()
    named = onnx.ModelProto()
    named.CopyFrom(model)
    seen: set[str] = set()
    names: list[str] = []
    inner: set[str] = set()
    for depth, graph in enumerate(graph_and_bodies(named.graph)):
        for index, node in enumerate(graph.node):
            if not node.name or node.name in seen:
                node.name = f"{node.op_type}#{index}" if depth == 0 else f"{node.op_type}#{depth}.{index}"
            seen.add(node.name)
            (names.append if depth == 0 else inner.add)(node.name)
    return named, names, inner


def _profiled_runs(events: list[dict], runs: int) -> tuple[list[dict], float]:
    """The ``Node`` kernel events of the last ``runs`` ``model_run`` windows, and those runs' mean seconds."""
    windows = sorted((e["ts"], e["ts"] + e["dur"], e["dur"]) for e in events
                     if e.get("cat") == "Session" and e.get("name") == "model_run")[-runs:]
    kept = [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")
            and any(start <= e["ts"] <= end for start, end, _ in windows)]
    return kept, sum(d for _, _, d in windows) / 1e6 / max(len(windows), 1)


def node_times(model: Any, inputs: Any = None, dims: Mapping[str, int] | None = None, repeats: int = 10,
               num_threads: int = DEFAULT_NUM_THREADS, optimization: str = "all", warmup: int = 2,
               device: str = "cpu") -> NodeTimes:
    """Per-node time of ``model`` from ONNX Runtime's own profiler, joined to our per-node counts.

    The session runs with ``enable_profiling`` (its trace written to a temporary folder that is removed;
    nothing is left in the working directory), ``warmup`` runs and then ``repeats`` profiled ones; each node's
    time is the mean over those runs of its ``<node>_kernel_time`` events (microseconds in the trace).

    Args:
        model: a path, bytes or ``onnx.ModelProto`` (never modified; the session runs a copy whose unnamed
            nodes are named ``Op#index``).
        inputs, dims: as ``count_ops`` takes them (arrays are run as given; shapes get seeded arrays).
        repeats: profiled runs averaged.
        num_threads: intra-op threads (inter-op 1, sequential execution).
        optimization: ORT's ``graph_optimization_level``, one of ``OPTIMIZATION_LEVELS``: ``"all"`` (ORT's
            default, what ships) fuses nodes, which then cannot be joined and are listed in
            ``NodeTimes.unjoined``; ``"disabled"`` runs the file's nodes as stored, every one joined.
        device: ``"cpu"`` or ``"cuda"`` (``graph.inference_session``).

    A node is joined when ORT ran a node of its name and op type; the time of anything else ORT ran is kept
    in ``unjoined`` with why (``UnjoinedTime``), never spread over the file's nodes by a guess.
    """
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ImportError("per-node times come from onnxruntime's profiler, which is not installed here; install it "
                          "with: pip install 'deeplite-like[onnx]'") from exc
    if optimization not in OPTIMIZATION_LEVELS:
        raise ValueError(f"optimization must be one of {', '.join(OPTIMIZATION_LEVELS)}, got {optimization!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    threads = check_num_threads(num_threads)
    if not isinstance(threads, int):
        raise ValueError(f"num_threads must be an int for per-node times, got {num_threads!r}")
    info = prepare(load_model(model), inputs, dims)
    named, names, inner = _named_copy(info.model)
    feeds = session_inputs(info.input_shapes, info.dtypes, inputs)
    with tempfile.TemporaryDirectory(prefix="deeplite-ort-profile-") as folder:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION_LEVELS[optimization])
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "ort")
        session = inference_session(named, options, device, info.folder)
        for _ in range(warmup + repeats):
            session.run(None, feeds)
        trace = Path(session.end_profiling())
        events = json.loads(trace.read_text())
    kernel_events, run_s = _profiled_runs(events, repeats)
    ran: dict[str, list] = {}  # ORT node name -> [op type, total microseconds]
    allocator: dict[str, int] = {}
    for event in kernel_events:
        for key in ("mem_in_use_peak", "mem_arena_held"):
            value = event.get("args", {}).get(key)
            if isinstance(value, (int, str)) and str(value).isdigit():
                allocator[key] = max(allocator.get(key, 0), int(value))
        entry = ran.setdefault(event["name"][:-len("_kernel_time")], [event.get("args", {}).get("op_name", ""), 0])
        entry[1] += event["dur"]
    by_name = dict(zip(names, named.graph.node))
    producer = {out: name for name, node in by_name.items() for out in node.output if out}
    unjoined, inside = [], 0
    for name, (op, total) in ran.items():
        if name in inner:  # a body node of an If / Loop / Scan: its time is inside the control-flow node's
            inside += 1
            continue
        node = by_name.get(name)
        if node is not None and node.op_type == op:
            continue
        if node is not None:
            unjoined.append(UnjoinedTime(name, op, total / 1e6 / repeats, "rewritten", (name,)))
        elif name.startswith("fused "):
            inner = name[len("fused "):]
            unjoined.append(UnjoinedTime(name, op, total / 1e6 / repeats, "fused",
                                         (inner,) if inner in by_name else ()))
        else:
            value = _ORT_SUFFIX.sub("", name)
            refers = (producer[value],) if value != name and value in producer else ()
            unjoined.append(UnjoinedTime(name, op, total / 1e6 / repeats, "rewritten" if refers else "inserted",
                                         refers))
    standins = {ref: u for u in unjoined for ref in u.refers_to}
    nodes = []
    for name, (node, cost, moved) in zip(names, node_costs(info)):
        seen = ran.get(name)
        if seen is not None and seen[0] == node.op_type:
            time_s, note = seen[1] / 1e6 / repeats, ""
        elif seen is not None:
            time_s, note = None, f"ORT ran a {seen[0]} of this name in its place (rewritten)"
        elif node.op_type == "Constant":
            time_s, note = None, "a Constant: ORT keeps it as an initializer, it never runs"
        elif name in standins:
            standin = standins[name]
            time_s, note = None, f"ORT ran {standin.name!r} ({standin.op_type}, {standin.reason}) in its place"
        else:
            time_s, note = None, "not run as itself: fused into another node or folded to a constant by ORT"
        nodes.append(NodeTime(name, node.op_type, node_module(node), cost.macs, cost.flops, moved, time_s, note))
    batches = {shape[0] for shape in info.input_shapes.values() if shape}
    notes = ["profiling adds a little to each node's time (ORT records two timestamps per node)"]
    if inside:
        notes.append(f"{inside} node(s) inside If / Loop / Scan bodies ran; their time is within their control-flow "
                     "node's")
    return NodeTimes(nodes, unjoined, run_s, repeats, threads, optimization, f"onnxruntime {ort.__version__}",
                     session.get_providers()[0], batches.pop() if len(batches) == 1 else None, notes, allocator)


DEFAULT_FUNCTIONS = (ComputeComplexity, ComputeParams, ComputeSize, ComputeMemory, ComputeExecutionTime)

#: deeplite-profiler's evaluation functions, on the session (``OnnxSession.predict``): top-1 accuracy and
#: misclassification in percent, ``{'top-1': %, 'top-5': %}``
get_accuracy = PredictEvaluation()
get_missclass = PredictEvaluation(result="missclass")
get_topk = PredictEvaluation((1, 5), result="topk")


class OnnxProfiler(Profiler):
    """Profiles an ONNX file: a path, bytes or ``onnx.ModelProto`` (read once, never modified).

    Args:
        model: the model file (external data is read only from beside a model file).
        data_splits: split name -> batches of arrays (``(x, y)`` or ``x``); the first batch gives the inputs
            when ``inputs`` is not given.
        name: shown in reports.
        inputs: the inputs as ``count_ops`` takes them (arrays, shapes, a dict by input name).
        dims: symbolic dimensions by name (``{"batch": 8}``).
        register_defaults: register every built-in ``Compute*`` function (default ``True``).

    Options of ``compute_network_status``: ``batch_size`` (binds every symbolic first dimension and takes that
    many samples of a split's first batch; default: the file's or the inputs' batch), ``split``,
    ``min_run_time``, ``num_threads``.
    """

    backend_name = "onnx"

    def __init__(self, model: Any, data_splits: Mapping[str, Any] | None = None, name: str = "model",
                 inputs: Any = None, dims: Mapping[str, int] | None = None, register_defaults: bool = True) -> None:
        super().__init__(model, data_splits, name)
        self.onnx_model = load_model(model)
        self.session = OnnxSession(self.onnx_model)
        self.inputs = inputs
        self.dims = dict(dims or {})
        if register_defaults:
            for function in DEFAULT_FUNCTIONS:
                self.register_default_function(function())

    def _check_options(self, kwargs: Mapping[str, Any]) -> None:
        check_profiler_options(kwargs, caller("compute_network_status"))
        if check_num_threads(kwargs.get("num_threads")) == "auto":
            raise ValueError("num_threads='auto' is not supported by the ONNX backend: pass an int (threads of the "
                             "ONNX Runtime session), or leave it out for 1")

    def context(self) -> dict[str, Any]:
        # ``model``, as an evaluation function receives it: the file on ONNX Runtime, ``predict(x)`` (OnnxSession)
        return {**super().context(), "model": self.session, "onnx_model": self.onnx_model, "inputs": self.inputs,
                "dims": self.dims}
