"""Peak activation memory of one forward pass of a Keras model, in bytes.

**TensorFlow backend: a tensor-lifetime simulation of the graph-mode run.** What a
``tf.function`` holds is decided by its graph, not by eager Python, so the model is traced
with ``tf.function`` into a concrete function for the exact input shapes (nothing runs, no
activation is allocated) and its ops are walked in the order they were traced, which is a
topological order of the graph:

* each op's outputs are allocated when it runs (``elements x dtype size``) and freed right
  after their last consumer ran; the peak is taken right after an op allocated its outputs,
  while its inputs are still alive (as they must be while it runs);
* ops that only forward their input buffer (``Identity``, ``Reshape``, ``Squeeze``,
  ``ExpandDims``, ``StopGradient``, ...) allocate nothing: their output shares the buffer,
  which lives until the last consumer of any of its aliases;
* the inputs are live from the start to the end (the caller holds them) and are included;
  the outputs are live at the end;
* weights are excluded (they are the model's size): ``ReadVariableOp`` outputs alias the
  variables, and the resource handles are not tensors of data. A *cast* of a weight
  (mixed precision reads float32 variables and computes in float16) is a real new tensor and
  is counted. Graph constants (shape vectors, folded literals) are part of the traced program
  like the weights: excluded, and reported as ``constant_bytes``.

This is an exact account of the traced graph's tensors, not of TensorFlow's allocator. The
real run may hold *less*: Grappler may fuse ops (``Conv2D + BiasAdd + Relu`` into one kernel)
and some kernels write into an input buffer they own. It may hold *more*: kernel scratch
space and allocator rounding are invisible. Ops that run a nested function (``While``,
``If``, ``PartitionedCall``) are seen as one op; their internals are listed in
``opaque_ops``.

**torch backend of Keras: the PyTorch backend's storage ledger** (``deeplite_like.backends.torch.
memory.StorageLedger``) in the counting engine's recorded forward (``counting.engine.
TorchForwardMemory``): every ATen allocation of the eager ``no_grad`` forward is seen by the
operator tap that prices the layers' own operators, and the layer running at the peak is the
recorder's (``peak_module``). A status reads MACs, the layer table and memory from that one forward.
"""
from __future__ import annotations

import math
from typing import Any

from deeplite_like.backends.keras._tf import import_keras, import_tensorflow
from deeplite_like.backends.keras.counting.engine import MemoryStats, observe
from deeplite_like.backends.keras.latency import jax_forward
from deeplite_like.backends.keras.counting.recorder import CallRecord, LayerRecorder, SpecMaker, named_layers
from deeplite_like.backends.keras.inputs import add_failure_note, naming_failures, require_batch_size
from deeplite_like.backends.keras.state import preserved_model_state
from deeplite_like.backends.keras.tensors import to_backend

keras = import_keras()

__all__ = ["GRAPH_SIMULATION", "XLA_BUFFERS", "MemoryStats", "peak_activation_memory", "simulate_graph"]

GRAPH_SIMULATION = "tf.function graph, tensor-lifetime simulation"

# Ops whose outputs share their input's buffer (output i aliases input i for IdentityN).
_ALIAS_OPS = frozenset({"Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "StopGradient",
                        "PreventGradient", "Snapshot", "EnsureShape", "CheckNumerics", "Bitcast"})
# Ops whose outputs are the weights themselves or handles to them: never activations.
_WEIGHT_OPS = frozenset({"ReadVariableOp", "VarHandleOp", "VariableV2", "_ReadVariablesOp"})
_CONSTANT_OPS = frozenset({"Const", "HostConst"})
# Ops that run a nested function: their internal tensors are not seen.
_FUNCTION_OPS = frozenset({"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
                           "PartitionedCall", "StatefulPartitionedCall"})


def _tensor_bytes(tensor: Any) -> int | None:
    """Bytes of a graph tensor from its static shape and dtype; ``None`` if the shape is not static."""
    shape = tensor.shape
    if shape.rank is None or any(d is None for d in shape.as_list()):
        return None
    return math.prod(shape.as_list()) * tensor.dtype.size


def simulate_graph(graph: Any, inputs: list, outputs: list, owners: list[str] | None = None,
                   batch_size: int = 1) -> MemoryStats:
    """Walk ``graph``'s ops in order and track live tensor bytes (see the module docstring).

    ``inputs`` / ``outputs`` are the graph tensors of the model's inputs and outputs (live
    from start / to the end); ``owners[i]`` names the layer that created op ``i``.
    """
    ops = graph.get_operations()
    owners = owners if owners is not None else [""] * len(ops)
    input_names = {t.name for t in inputs}
    buffer_of: dict[str, int] = {}  # tensor name -> buffer id (aliases share one)
    size: dict[int, int] = {}
    excluded: set[str] = set()  # weights, handles, constants and their aliases
    constant_bytes = 0
    unsized: list[str] = []
    opaque: list[str] = []
    next_id = 0
    allocations: list[list[int]] = []  # per op: buffers it allocates
    for op in ops:
        new: list[int] = []
        for index, out in enumerate(op.outputs):
            source = None
            if op.type in _ALIAS_OPS and op.inputs:
                source = op.inputs[index if op.type == "IdentityN" else 0]
            if source is not None and source.name in excluded:
                excluded.add(out.name)
                continue
            if source is not None and source.name in buffer_of:
                buffer_of[out.name] = buffer_of[source.name]
                continue
            if op.type in _WEIGHT_OPS or out.dtype.name in ("resource", "variant") and op.type == "Placeholder":
                excluded.add(out.name)
                continue
            nbytes = _tensor_bytes(out)
            if op.type in _CONSTANT_OPS:
                excluded.add(out.name)
                constant_bytes += nbytes or 0
                continue
            if nbytes is None:
                unsized.append(op.name)
                nbytes = 0
            buffer_of[out.name] = next_id
            size[next_id] = nbytes
            if out.name not in input_names:
                new.append(next_id)
            next_id += 1
        if op.type in _FUNCTION_OPS:
            opaque.append(f"{op.type} {op.name}")
        allocations.append(new)

    pending: dict[int, set[str]] = {b: set() for b in size}  # buffer -> ops still to read it
    for op in ops:
        for tensor in op.inputs:
            buffer = buffer_of.get(tensor.name)
            if buffer is not None:
                pending[buffer].add(op.name)
    pinned = {buffer_of[t.name] for t in (*inputs, *outputs) if t.name in buffer_of}
    input_bytes = sum(size[buffer_of[t.name]] for t in inputs if t.name in buffer_of)

    live = peak = input_bytes
    allocated = 0
    peak_op, peak_module = "(inputs)", ""
    timeline: list[tuple[str, int]] = []
    freed: set[int] = set()
    for op, new, owner in zip(ops, allocations, owners):
        for buffer in new:
            live += size[buffer]
            allocated += size[buffer]
        if live > peak:
            peak, peak_op, peak_module = live, f"{op.type} {op.name}", owner
        if new:
            timeline.append((op.name, live))
        done = {buffer_of[t.name] for t in op.inputs if t.name in buffer_of} | set(new)
        for buffer in done:
            pending[buffer].discard(op.name)
            if not pending[buffer] and buffer not in pinned and buffer not in freed:
                freed.add(buffer)
                live -= size[buffer]
    output_bytes = sum(size[b] for b in {buffer_of[t.name] for t in outputs if t.name in buffer_of})
    return MemoryStats(peak_bytes=peak, input_bytes=input_bytes, output_bytes=output_bytes, end_bytes=live,
                       allocated_bytes=allocated, batch_size=batch_size, per_sample_peak_bytes=peak / batch_size,
                       peak_op=peak_op, peak_module=peak_module, method=GRAPH_SIMULATION,
                       constant_bytes=constant_bytes, opaque_ops=tuple(opaque), unsized=tuple(unsized),
                       timeline=tuple(timeline))


def _ensure_built(model: keras.layers.Layer, inputs: Any, training: bool) -> None:
    """Build an unbuilt model eagerly (variables cannot be created inside the trace)."""
    if not model.built:
        with naming_failures(model, inputs):
            model(inputs, training=training)


def _tensorflow_peak(model: keras.layers.Layer, inputs: Any, training: bool, batch_size: int) -> MemoryStats:
    tf = import_tensorflow()  # the TensorFlow backend is active, so Keras imported it already

    _ensure_built(model, inputs, training)
    holder: dict[str, LayerRecorder] = {}
    specs = SpecMaker(keras)

    def forward(x: Any) -> Any:
        graph = tf.compat.v1.get_default_graph()
        # Marks are the number of ops in the graph being traced: op i was created inside the
        # calls whose marks enclose i (see _owners).
        recorder = LayerRecorder(named_layers(model), specs.tree, specs.is_keras_tensor,
                                 marker=lambda: len(graph.get_operations()))
        holder["recorder"] = recorder
        with recorder:
            return model(x, training=training)

    with naming_failures(model, inputs):
        concrete = tf.function(forward, autograph=False).get_concrete_function(inputs)
    graph = concrete.graph
    n_inputs = len(tf.nest.flatten(inputs))
    owners = _owners(holder["recorder"].records, len(graph.get_operations()))
    return simulate_graph(graph, list(concrete.inputs[:n_inputs]), list(concrete.outputs), owners, batch_size)


def _owners(records: list[CallRecord], count: int) -> list[str]:
    """For ops ``0 .. count-1`` of the traced graph, the path of the innermost layer call that created each.

    Op ``i`` belongs to a call whose ``start_mark <= i < end_mark``. Records are in call order,
    so a call's range is overwritten by the calls made inside it, which come after it; ops
    created outside every recorded call belong to ``""`` (the model).
    """
    owners = [""] * count
    for record in records:
        for index in range(max(record.start_mark, 0), min(record.end_mark, count)):
            owners[index] = record.path
    return owners


def _torch_peak(model: keras.layers.Layer, inputs: Any, training: bool, batch_size: int) -> MemoryStats:
    return observe(model, inputs, batch_size, training=training, memory=True,
                   on_failure=lambda exc, recorder: add_failure_note(model, inputs, exc, recorder)).memory


def peak_activation_memory(model: keras.layers.Layer, inputs: Any, training: bool = False,
                           batch_size: int | None = None) -> MemoryStats:
    """Peak live activation bytes of one forward ``model(inputs, training=training)``.

    ``inputs`` is the model's input structure (tensors or NumPy arrays); ``batch_size``
    defaults to the leading dimension of the first input. On TensorFlow the forward is traced,
    not run; on torch it runs eagerly under ``no_grad``. The model is left as found.
    """
    if not isinstance(model, keras.layers.Layer):
        raise TypeError(f"peak_activation_memory expects a Keras model, got {type(model).__name__}")
    inputs = to_backend(inputs)
    batch_size = require_batch_size(inputs, batch_size, "peak_activation_memory")
    backend = keras.config.backend()
    with preserved_model_state(model):
        if backend == "tensorflow":
            return _tensorflow_peak(model, inputs, training, batch_size)
        if backend == "torch":
            return _torch_peak(model, inputs, training, batch_size)
        if backend == "jax":
            return _jax_peak(model, inputs, training, batch_size)
    raise NotImplementedError(f"peak activation memory is measured on Keras' tensorflow, torch and jax backends; "
                              f"this Keras runs on {backend!r}")


XLA_BUFFERS = "XLA buffer assignment (compiled.memory_analysis)"
XLA_SIZES = ("argument", "output", "alias", "temp", "generated_code")


def _jax_peak(model: keras.layers.Layer, inputs: Any, training: bool, batch_size: int) -> MemoryStats:
    """The compiled forward's own buffers: inputs + XLA's temporary allocation + outputs.

    ``jax.jit(...).lower(...).compile().memory_analysis()`` gives the bytes of the program's
    arguments (the variables and the inputs), outputs and temporaries. XLA assigns the
    temporaries to one allocation sized for those live at once, so inputs + temporaries + outputs
    is the program's activation memory at its peak, parameters left out as on the other backends.
    No operator is named: XLA reports no per-instruction peak (``peak_op`` is the program).
    Every size XLA reports is kept in ``program_bytes`` (``argument`` = parameters + inputs exactly,
    ``generated_code``: the compiled code itself, 0 on XLA's CPU client).
    """
    _ensure_built(model, inputs, training)
    import jax

    with naming_failures(model, inputs):
        jitted, arguments = jax_forward(model, inputs, training)
        analysis = jitted.lower(*arguments).compile().memory_analysis()
    input_bytes = sum(int(leaf.nbytes) for leaf in jax.tree_util.tree_leaves(arguments[2]))
    temp, output = int(analysis.temp_size_in_bytes), int(analysis.output_size_in_bytes)
    peak = input_bytes + temp + output
    sizes = tuple((name, int(getattr(analysis, f"{name}_size_in_bytes"))) for name in XLA_SIZES)
    if getattr(analysis, "peak_memory_in_bytes", None) is not None:  # absent from older jaxlib
        sizes += (("peak", int(analysis.peak_memory_in_bytes)),)
    return MemoryStats(peak_bytes=peak, input_bytes=input_bytes, output_bytes=output, end_bytes=input_bytes + output,
                       allocated_bytes=temp + output, batch_size=batch_size, per_sample_peak_bytes=peak / batch_size,
                       peak_op="the XLA program", peak_module=model.name, method=XLA_BUFFERS,
                       program_bytes=sizes)
