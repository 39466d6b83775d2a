"""Reading a ``.tflite`` file: its tensors (shapes, dtypes, quantization, buffers) and operators.

The flatbuffer is read with LiteRT's maintained reader (``ai_edge_litert.schema_py_generated``, the
schema's generated object API): no byte is parsed by hand. A model is a path or the file's bytes;
it is read once, copied, and never changed. Every subgraph is read (``TFLiteModel.graphs``; the
first is the main one): the counting pass enters a ``WHILE``'s condition and body
(``formulas.py``); peak memory is the main subgraph's.

Shapes are the ones stored in the file (``shape``; ``shape_signature`` marks a dynamic dimension
with -1, and the stored shape is then the converter's example, usually batch 1).

Peak activation memory:

    Peak activation memory of a ``.tflite`` subgraph, from tensor lifetimes in execution order.

    Operator ``k`` (the subgraph's stored order, the order the interpreter runs) is step ``k``. A tensor
    is live from the step of the op that makes it to the step of its last consumer; graph inputs are
    live for the whole run and graph outputs to the end; constants (tensors with a buffer) are
    parameters (``model_size``), never activations. ``RESHAPE``, ``SQUEEZE`` and ``EXPAND_DIMS`` copy
    no data: their output is their input's storage, which then lives until the last consumer of either.
    Bytes are elements x dtype bits / 8 at the stored shapes (int8 activations 1 byte each).

    This is the live-tensor lower bound an ideal planner reaches; our planner's arena for the same
    tensors is ``LifetimeStats.arena_bytes``, and the interpreter's own (``interpreter_arena``, with its
    kernels' scratch buffers) is larger.
"""
from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from deeplite_like.results import LifetimeStats, TensorLifetimes

__all__ = ["ALIAS_OPS", "ArenaStats", "DTYPE_BITS", "LifetimeStats", "OpView", "TFLiteModel", "TensorInfo", "feed_arrays",
           "import_litert", "interpreter", "interpreter_arena", "load_model", "predict", "resize_inputs",
           "settled", "stale_shapes", "tensor_lifetimes"]

EXTRA_HINT = "pip install 'deeplite-like[tflite]'"

#: Bits per element of each ``TensorType`` name (sub-byte types are packed, rounded up per tensor).
DTYPE_BITS = {"FLOAT32": 32, "FLOAT16": 16, "BFLOAT16": 16, "FLOAT64": 64, "INT32": 32, "UINT32": 32, "INT64": 64,
              "UINT64": 64, "INT16": 16, "UINT16": 16, "INT8": 8, "UINT8": 8, "BOOL": 8, "INT4": 4, "UINT4": 4,
              "INT2": 2, "COMPLEX64": 64, "COMPLEX128": 128, "FLOAT8_E4M3FN": 8, "FLOAT8_E5M2": 8}
FLOAT_DTYPES = frozenset({"FLOAT32", "FLOAT16", "BFLOAT16", "FLOAT64"})
#: How the flatbuffer stores quantization parameters: scales float32, zero points int64.
SCALE_BYTES, ZERO_POINT_BYTES = 4, 8


def import_litert() -> Any:
    """The schema module of ai-edge-litert, or an ImportError naming the extra to install."""
    try:
        from ai_edge_litert import schema_py_generated
    except ImportError as exc:
        raise ImportError(f"the TFLite backend needs ai-edge-litert, which is not installed here; install it with: "
                          f"{EXTRA_HINT}") from exc
    return schema_py_generated


def _names(enum: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum).items() if not k.startswith("_")}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the subgraph: what the file says about it.

    Attributes:
        index: its index in the subgraph.
        name: the converter's name (scopes joined by ``/``, fused names by ``;``).
        shape: the stored shape.
        dtype: the ``TensorType`` name (``FLOAT32``, ``INT8``).
        constant: it has data in a buffer (a weight, bias or stored constant).
        scales / zero_points: quantization parameters (per-tensor: one each; per-channel: one per channel).
        value: the values of a constant integer or boolean tensor of at most 16 elements (loop bounds
            and steps, which a ``WHILE``'s trip count is read from; an ``IF``'s fixed condition), else ``None``.
        zeros_only: a constant vector (rank 1) stored in the file whose bytes are all zero: a converter's
            placeholder bias (``SeparableConv2D``'s depthwise half) or a bias still at its initial zeros.
    """

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    constant: bool
    scales: int = 0
    zero_points: int = 0
    value: tuple | None = None  # a small integer constant's values (a loop's bounds), else None
    zeros_only: bool = False  # a constant vector whose stored bytes are all zero (a placeholder bias)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the elements at the stored dtype (sub-byte types packed, rounded up)."""
        return (self.numel * DTYPE_BITS.get(self.dtype, 8) + 7) // 8

    @property
    def quantized(self) -> bool:
        return self.scales > 0

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    @property
    def numeric(self) -> bool:
        """Real-valued data: floating point, or integers that carry a scale (quantized values)."""
        return self.is_float or self.quantized

    @property
    def quantization_bytes(self) -> int:
        return self.scales * SCALE_BYTES + self.zero_points * ZERO_POINT_BYTES


@dataclass(frozen=True)
class OpView:
    """One operator in execution order: its op name, tensors and builtin options."""

    index: int
    op: str  # builtin name (``CONV_2D``) or ``CUSTOM:code``
    inputs: tuple[TensorInfo | None, ...]  # None for an omitted optional input (index -1)
    outputs: tuple[TensorInfo, ...]
    options: Any  # the builtin options object (``Conv2DOptionsT``), or None
    consumers: tuple[str, ...] = ()  # the op names that read its first output, in the subgraph's order

    @property
    def label(self) -> str:
        return f"{self.op}#{self.index} ({self.outputs[0].name if self.outputs else 'no output'})"

    def input(self, at: int) -> TensorInfo:
        tensor = self.inputs[at] if at < len(self.inputs) else None
        if tensor is None:
            raise ValueError(f"{self.label}: input {at} is missing")
        return tensor

    def has_input(self, at: int) -> bool:
        return at < len(self.inputs) and self.inputs[at] is not None

    def numel_out(self) -> int:
        return self.outputs[0].numel

    def option(self, name: str, default: Any = None) -> Any:
        return getattr(self.options, name, default) if self.options is not None else default


@dataclass
class Subgraph:
    """One subgraph: its tensors, operators in execution order, inputs and outputs."""

    tensors: list[TensorInfo] = field(default_factory=list)
    ops: list[OpView] = field(default_factory=list)
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)


@dataclass
class TFLiteModel:
    """A read ``.tflite`` file: its bytes, the main subgraph's tensors and operators in execution order,
    and every subgraph (``graphs[0]`` is the main one; the others are ``WHILE`` / ``IF`` bodies)."""

    content: bytes
    name: str
    tensors: list[TensorInfo] = field(default_factory=list)
    ops: list[OpView] = field(default_factory=list)
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    subgraphs: int = 1
    version: int = 0
    graphs: list[Subgraph] = field(default_factory=list)

    @property
    def constants(self) -> list[TensorInfo]:
        return [t for t in self.tensors if t.constant]

    def predict(self, x: Any, num_threads: int = 1) -> Any:
        """The first output for ``x`` through the LiteRT interpreter (``predict``), as Keras' ``model.predict``."""
        return predict(self, x, num_threads)


def _read_bytes(model: Any) -> tuple[bytes, str]:
    if isinstance(model, TFLiteModel):
        return model.content, model.name
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "model"
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        with open(path, "rb") as handle:  # FileNotFoundError names the path
            return handle.read(), os.path.splitext(os.path.basename(path))[0]
    raise TypeError(f"a TFLite model is a path to a .tflite file or its bytes, got {type(model).__name__}")


def load_model(model: Any) -> TFLiteModel:
    """Read a ``.tflite`` file (a path or its bytes); a file that is not one is a ``ValueError`` saying why."""
    if isinstance(model, TFLiteModel):
        return model
    schema = import_litert()
    content, name = _read_bytes(model)
    if len(content) < 8 or not schema.Model.ModelBufferHasIdentifier(content, 0):
        head = content[4:8] if len(content) >= 8 else content
        raise ValueError(f"{name!r} is not a TFLite flatbuffer: the file identifier (bytes 4-8) is {head!r}, "
                         f"not b'TFL3' ({len(content)} bytes)")
    try:
        proto = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
        info = _describe(proto, content, name, schema)
    except (struct.error, IndexError, ValueError, TypeError, AttributeError, KeyError, UnicodeDecodeError,
            OverflowError, MemoryError) as exc:
        # the generated reader raises these on offsets past the end of a truncated or damaged buffer
        raise ValueError(f"{name!r} is a damaged TFLite flatbuffer ({len(content)} bytes): "
                         f"{type(exc).__name__}: {exc}") from None
    return info


_SMALL_INTS = {"INT32": "<i4", "INT64": "<i8", "INT16": "<i2", "INT8": "<i1", "UINT8": "<u1", "BOOL": "|b1"}


def _small_value(dtype: str, shape: tuple[int, ...], buffer: Any) -> tuple | None:
    """The values of a small integer or boolean constant (at most 16 elements), read from its buffer."""
    if dtype not in _SMALL_INTS or math.prod(shape) > 16 or buffer is None or buffer.data is None:
        return None
    import numpy as np

    data = bytes(bytearray(buffer.data))
    width = np.dtype(_SMALL_INTS[dtype]).itemsize
    if len(data) != math.prod(shape) * width:
        return None
    return tuple(int(v) for v in np.frombuffer(data, dtype=_SMALL_INTS[dtype]))


def _describe(proto: Any, content: bytes, name: str, schema: Any) -> TFLiteModel:
    if not proto.subgraphs:
        raise ValueError("it has no subgraph")
    graphs = [_subgraph(proto, graph, schema) for graph in proto.subgraphs]
    main = graphs[0]
    return TFLiteModel(content, name, main.tensors, main.ops, main.inputs, main.outputs, len(proto.subgraphs),
                       int(proto.version), graphs)


def _subgraph(proto: Any, graph: Any, schema: Any) -> Subgraph:
    dtypes, builtins = _names(schema.TensorType), _names(schema.BuiltinOperator)
    buffers = proto.buffers or []
    tensors = []
    for index, t in enumerate(graph.tensors or []):
        buffer = buffers[t.buffer] if 0 < t.buffer < len(buffers) else None
        constant = buffer is not None and (buffer.data is not None and len(buffer.data) > 0 or buffer.size > 0)
        q = t.quantization
        scales = len(q.scale) if q is not None and q.scale is not None else 0
        zeros = len(q.zeroPoint) if q is not None and q.zeroPoint is not None else 0
        tname = t.name.decode("utf-8", "replace") if isinstance(t.name, bytes) else str(t.name or "")
        shape = tuple(int(d) for d in t.shape) if t.shape is not None else ()
        dtype = dtypes.get(t.type, f"TYPE{t.type}")
        value = _small_value(dtype, shape, buffer) if constant else None
        zeros_only = (constant and len(shape) == 1 and buffer.data is not None and len(buffer.data) > 0
                      and not any(bytes(bytearray(buffer.data))))
        tensors.append(TensorInfo(index, tname, shape, dtype, constant, scales, zeros, value, zeros_only))
    ops = []
    codes = proto.operatorCodes or []
    for index, op in enumerate(graph.operators or []):
        code = codes[op.opcodeIndex]
        # builtin codes under 127 are also kept in the deprecated int8 field, and files from converters older
        # than schema 3a leave ``builtinCode`` 0 (ADD): the larger of the two is the code
        builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
        if builtin == schema.BuiltinOperator.CUSTOM:
            custom = code.customCode.decode("utf-8", "replace") if isinstance(code.customCode, bytes) else code.customCode
            op_name = f"CUSTOM:{custom}"
        else:
            op_name = builtins.get(builtin, f"BUILTIN{builtin}")
        ins = tuple(tensors[i] if i >= 0 else None for i in (op.inputs if op.inputs is not None else []))
        outs = tuple(tensors[i] for i in (op.outputs if op.outputs is not None else []))
        ops.append(OpView(index, op_name, ins, outs, op.builtinOptions))
    readers: dict[int, list[str]] = {}
    for op in ops:
        for t in {t.index for t in op.inputs if t is not None}:
            readers.setdefault(t, []).append(op.op)
    ops = [replace(op, consumers=tuple(readers.get(op.outputs[0].index, ()))) if op.outputs else op for op in ops]
    return Subgraph(tensors, ops, [tensors[i] for i in (graph.inputs if graph.inputs is not None else [])],
                    [tensors[i] for i in (graph.outputs if graph.outputs is not None else [])])


def interpreter(model: TFLiteModel, num_threads: int = 1) -> Any:
    """A LiteRT ``Interpreter`` on the model's bytes, tensors allocated, at ``num_threads`` threads."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as exc:
        raise ImportError(f"running a TFLite model needs ai-edge-litert; install it with: {EXTRA_HINT}") from exc
    runner = Interpreter(model_content=model.content, num_threads=num_threads)
    runner.allocate_tensors()
    return runner


def resize_inputs(model: Any, shapes: Any) -> TFLiteModel:
    """``model`` read at other input shapes: every tensor's shape as the LiteRT interpreter propagates them.

    ``shapes``: one shape for a one-input model, a sequence in input order, or a dict by input name.
    A dimension may differ from the stored one only where the file's ``shape_signature`` marks it
    dynamic (-1; the converter writes -1 for a Keras ``None`` batch); anything else is a ``ValueError``
    naming the input, its stored shape and signature. An interpreter without the default delegate
    (XNNPACK would keep its partition's stored shapes) resizes the inputs, allocates and runs once on
    zeros (a shape computed at run time, as a converted ``Flatten``'s, is known only then), and the
    shapes it gives every tensor of
    every subgraph (``get_tensor_details(subgraph_index)``) replace the stored ones; the file's bytes
    are not changed (a later interpreter is resized again from the arrays fed to it).
    """
    import numpy as np

    model = load_model(model)
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    # without XNNPACK: a delegated partition keeps its tensors' stored shapes in the interpreter's view
    runner = Interpreter(model_content=model.content,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    runner.allocate_tensors()
    details = runner.get_input_details()
    names = [d["name"] for d in details]
    if isinstance(shapes, Mapping):
        unknown = [name for name in shapes if name not in names]
        if unknown:
            raise ValueError(f"{model.name!r} has no input named {unknown[0]!r}; its inputs are: {', '.join(names)}")
        wanted = [tuple(shapes[name]) if name in shapes else tuple(int(v) for v in d["shape"])
                  for name, d in zip(names, details)]
    else:
        given = [shapes] if shapes and all(isinstance(v, (int, np.integer)) for v in shapes) else list(shapes)
        if len(given) != len(details):
            raise ValueError(f"{model.name!r} has {len(details)} input(s) ({', '.join(names)}), "
                             f"got {len(given)} shape(s)")
        wanted = [tuple(int(v) for v in shape) for shape in given]
    for shape, detail in zip(wanted, details):
        stored, signature = tuple(int(v) for v in detail["shape"]), tuple(int(v) for v in detail["shape_signature"])
        said = f"input {detail['name']!r} of {model.name!r} (stored {'x'.join(map(str, stored))}, signature " \
               f"{'x'.join(map(str, signature))}; -1 is a dimension the file leaves open)"
        if len(shape) != len(stored):
            raise ValueError(f"{said} has rank {len(stored)}, but the shape given is {'x'.join(map(str, shape))}")
        for axis, (size, fixed, open_) in enumerate(zip(shape, stored, signature)):
            if size < 1:
                raise ValueError(f"{said}: dimension {axis} must be at least 1, got {size}")
            if size != fixed and open_ != -1:
                raise ValueError(f"{said}: dimension {axis} is fixed at {fixed} in the file, got {size}")
        if shape != stored:
            runner.resize_tensor_input(detail["index"], list(shape), strict=True)
    try:
        runner.allocate_tensors()
        for detail in runner.get_input_details():  # one run: shapes computed at run time (a Flatten's) settle
            runner.set_tensor(detail["index"], np.zeros(detail["shape"], dtype=detail["dtype"]))
        runner.invoke()
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"{model.name!r} cannot run at input shapes "
                         f"{', '.join('x'.join(map(str, s)) for s in wanted)}: {str(exc).strip()[:300]}") from None
    graphs = []
    for index, graph in enumerate(model.graphs):
        sized = {d["index"]: tuple(int(v) for v in d["shape"]) for d in runner.get_tensor_details(index)}
        tensors = [replace(t, shape=sized.get(t.index, t.shape)) for t in graph.tensors]
        ops = [replace(op, inputs=tuple(tensors[t.index] if t is not None else None for t in op.inputs),
                       outputs=tuple(tensors[t.index] for t in op.outputs)) for op in graph.ops]
        graphs.append(Subgraph(tensors, ops, [tensors[t.index] for t in graph.inputs],
                               [tensors[t.index] for t in graph.outputs]))
    main = graphs[0]
    return TFLiteModel(model.content, model.name, main.tensors, main.ops, main.inputs, main.outputs, model.subgraphs,
                       model.version, graphs)


def stale_shapes(model: TFLiteModel) -> bool:
    """Whether the stored shapes cannot all be the run's: a ``RESHAPE`` whose output holds another number of
    elements than its input. The converter stores such placeholders where a shape is computed at run time
    (a Keras ``Dense`` on a 4-D input becomes ``SHAPE`` ... ``PACK``, ``RESHAPE`` to 2-D, ``FULLY_CONNECTED``:
    ConvNeXt's pointwise layers, stored as [1, 1] rows)."""
    return any(op.op == "RESHAPE" and op.inputs and op.inputs[0] is not None and op.outputs
               and op.inputs[0].numel != op.outputs[0].numel
               for graph in model.graphs for op in graph.ops)


def settled(model: TFLiteModel) -> TFLiteModel:
    """``model`` itself, or, when its stored shapes are stale (``stale_shapes``), read again at its stored input
    shapes with every tensor's shape from one interpreter run (``resize_inputs``)."""
    return resize_inputs(model, [t.shape for t in model.inputs]) if stale_shapes(model) else model


@dataclass(frozen=True)
class ArenaStats:
    """The LiteRT interpreter's activation arena, read from where it placed its tensors (bytes).

    ``span``: from the first byte to the last of the tensors in the block that holds the model's first
    input (tensors 64-byte aligned, as the arena aligns them, and touching); ``scratch``: the largest of
    the kernels' own temporaries in it (unnamed tensors: a convolution's im2col buffer); ``tensors``:
    how many tensors the block holds.
    """

    span: int
    scratch: int
    tensors: int


def interpreter_arena(model: Any) -> ArenaStats:
    """The arena a LiteRT interpreter plans for ``model`` (its stored or resized shapes), beside our
    live-tensor peak (``tensor_lifetimes``). No API reports the arena's size, so it is read from the
    tensors' buffer addresses after ``allocate_tensors`` (interpreter without XNNPACK, whose packed
    weights and workspace are its own): every non-constant tensor's interval, grouped into blocks of
    touching 64-byte-aligned intervals; the block holding the first input is the read-write arena.
    """
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    model = load_model(model)
    runner = Interpreter(model_content=model.content,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    stored = {t.index: t.shape for t in model.tensors}
    for detail in runner.get_input_details():
        if tuple(int(v) for v in detail["shape"]) != stored.get(detail["index"]):
            runner.resize_tensor_input(detail["index"], list(stored[detail["index"]]), strict=True)
    runner.allocate_tensors()
    constant = {t.index for t in model.tensors if t.constant}
    intervals = []
    for detail in runner.get_tensor_details():
        if detail["index"] in constant:
            continue
        try:
            view = runner.tensor(detail["index"])()
        except ValueError:  # no buffer yet (a dynamic tensor)
            continue
        if view.nbytes:
            start = view.__array_interface__["data"][0]
            intervals.append((start, start + -(-view.nbytes // 64) * 64, view.nbytes, not detail["name"]))
    first = runner.get_input_details()[0]["index"]
    anchor = runner.tensor(first)().__array_interface__["data"][0]
    blocks: list[list[tuple]] = []
    for interval in sorted(intervals):
        if blocks and interval[0] <= max(end for _, end, _, _ in blocks[-1]):
            blocks[-1].append(interval)
        else:
            blocks.append([interval])
    block = next(b for b in blocks if b[0][0] <= anchor < max(end for _, end, _, _ in b))
    return ArenaStats(max(start + size for start, _, size, _ in block) - block[0][0],
                      max((size for _, _, size, unnamed in block if unnamed), default=0), len(block))


def _quantization(details: Mapping[str, Any]) -> tuple[float, int] | None:
    scale, zero = details.get("quantization", (0.0, 0))
    return (float(scale), int(zero)) if scale else None


def feed_arrays(model: TFLiteModel, x: Any, runner: Any) -> None:
    """Set the interpreter's inputs from ``x`` (one array, or a sequence in input order), resizing to its
    shapes; float data given to a quantized input is quantized with the input's scale and zero point."""
    import numpy as np

    arrays = list(x) if isinstance(x, (list, tuple)) else [x]
    details = runner.get_input_details()
    if len(arrays) != len(details):
        raise ValueError(f"{model.name!r} has {len(details)} input(s) "
                         f"({', '.join(d['name'] for d in details)}), got {len(arrays)} array(s)")
    resized = False
    for array, detail in zip(arrays, details):
        if tuple(np.shape(array)) != tuple(detail["shape"]):
            runner.resize_tensor_input(detail["index"], list(np.shape(array)))
            resized = True
    if resized:
        runner.allocate_tensors()
    for array, detail in zip(arrays, runner.get_input_details()):
        array = np.asarray(array)
        dtype = np.dtype(detail["dtype"])
        quant = _quantization(detail)
        if quant is not None and np.issubdtype(array.dtype, np.floating) and np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            array = np.clip(np.round(array / quant[0]) + quant[1], info.min, info.max)
        runner.set_tensor(detail["index"], array.astype(dtype, copy=False))


def predict(model: Any, x: Any, num_threads: int = 1) -> Any:
    """Run ``x`` through the LiteRT interpreter; the first output, dequantized to float32 when quantized."""
    import numpy as np

    model = load_model(model)
    runner = interpreter(model, num_threads)
    feed_arrays(model, x, runner)
    runner.invoke()
    detail = runner.get_output_details()[0]
    out = runner.get_tensor(detail["index"])
    quant = _quantization(detail)
    return (out.astype(np.float32) - quant[1]) * quant[0] if quant is not None else out


# -- Peak activation memory -------------------------------------------------------------------------

ALIAS_OPS = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS"})


def tensor_lifetimes(model: TFLiteModel) -> LifetimeStats:
    """The live-tensor peak of ``model``'s main subgraph (see the module docstring for the rules), at the run's
    shapes where the stored ones are placeholders (``settled``; the stored ones if the file cannot run)."""
    try:
        model = settled(model)
    except ValueError:  # (the interpreter cannot run the file: the stored shapes, as the count says)
        pass
    lifetimes = TensorLifetimes(len(model.ops))
    for t in model.inputs:
        lifetimes.born(t.index, 0, t.nbytes)
        lifetimes.keep(t.index)
    for step, op in enumerate(model.ops):
        for t in op.inputs:
            if t is not None and not t.constant:
                lifetimes.read(t.index, step)
        for position, t in enumerate(op.outputs):
            source = op.inputs[0] if op.inputs else None
            if op.op in ALIAS_OPS and position == 0 and source is not None and not source.constant:
                lifetimes.view(t.index, source.index, step)
                continue
            lifetimes.born(t.index, step, t.nbytes)
    for t in model.outputs:
        lifetimes.keep(t.index)
    return lifetimes.stats([op.label for op in model.ops], input_bytes=sum(t.nbytes for t in model.inputs),
                           output_bytes=sum(t.nbytes for t in model.outputs))
