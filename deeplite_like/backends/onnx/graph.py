"""Reading an ONNX model: loading (path, bytes, ``ModelProto``), binding inputs, shape inference, initializers.

Everything the counting pass and the profiler need to know about the file is read here, once:

* ``load_model`` accepts a path, bytes or an ``onnx.ModelProto`` and never changes the caller's
  proto (binding dimensions works on a copy). External data is read only from beside the model
  file, and every location is checked first: no absolute path, no ``..``, nothing outside the
  model's folder (``check_external_data``). The weights themselves stay on disk: counting,
  parameters, size and memory need only each initializer's dims and dtype, so a model over 2 GB
  (an LLM export) is read as its graph. Only small external tensors are read, when a value is
  needed (a ``Reshape`` shape for shape inference, a ``Loop`` trip count: ``inline_small_tensors``);
  ONNX Runtime reads the rest itself from the model's folder (``inference_session``), which the
  loaded proto remembers (``external_folder``).
* ``bind_inputs`` fixes every graph input's shape from arrays, shapes or named dimensions
  (``batch=8``), and refuses a dimension left symbolic, naming the input and the dimension.
* ``infer`` runs onnx's own shape inference (strict, with data propagation, so ``Shape ->
  Reshape`` chains resolve) and turns its error into one naming the node where it failed.
* ``Initializers`` are the stored weights: parameters and bytes at their stored dtype (int4
  packed two per byte), each initializer once however many nodes read it.

Peak activation memory:

    Peak activation memory of an ONNX graph, from tensor lifetimes in topological order.

    The graph's nodes are stored in topological order (the ONNX spec requires it); node ``k`` is step
    ``k``. A tensor is live from the step of the node that makes it to the step of its last consumer:

    * graph inputs are live from the start to the end (the caller holds them for the whole run, as
      the torch backend counts them);
    * graph outputs are live to the end (the last step);
    * initializers, and the outputs of ``Constant`` nodes, are stored in the file: they are
      parameters (``model_size``), not activations, and never count here;
    * a node's inputs and outputs are live together while it runs, so the bytes at step ``k`` are
      every tensor whose interval holds ``k``; the peak is the largest such total, and the node where
      it happens is reported with it.

    Views: ``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze`` and ``Identity`` copy no data (ONNX
    Runtime gives their output the input's buffer, and torch's ``view`` / ``flatten`` allocate
    nothing): their output is the same storage as their input, which then lives until the last
    consumer of either. Every other node's output is a fresh tensor of ``numel x element bits / 8``
    bytes (sub-byte types rounded up per tensor), at its inferred shape and dtype.

    This is the live-tensor lower bound an ideal planner reaches; the arena a planner with offsets
    needs for the same tensors (``LifetimeStats.arena_bytes``, ``TensorLifetimes.plan``) can be larger
    because of fragmentation. ONNX Runtime's own arena is not readable (docs/onnx.rst).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from deeplite_like.results import LifetimeStats, TensorLifetimes

__all__ = ["ALIAS_OPS", "GraphInfo", "Initializers", "LifetimeStats", "NodeView", "OnnxSession", "batch_dims",
           "bind_inputs", "check_external_data", "external_folder", "graph_and_bodies", "import_onnx", "infer",
           "inference_session", "initializer_stats", "inline_small_tensors", "load_model", "missing_cuda_provider",
           "prepare", "seed_subgraphs", "session_inputs", "shapes_by_running", "tensor_lifetimes"]


def import_onnx() -> Any:
    """The ``onnx`` module, or an ImportError saying which extra installs it."""
    try:
        import onnx
    except ImportError as exc:
        raise ImportError("the ONNX backend needs the onnx package, which is not installed here; install it with: "
                          "pip install 'deeplite-like[onnx]'") from exc
    return onnx


onnx = import_onnx()
from google.protobuf.message import DecodeError  # noqa: E402  (onnx's own dependency)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402  (after the clear error above)
from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data  # noqa: E402

#: Floating-point element types: only these cost FLOPs in elementwise ops (integer and bool outputs cost 0).
_LOW_PRECISION_FLOATS = ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT4E2M1")
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
                        | {getattr(TensorProto, n) for n in _LOW_PRECISION_FLOATS if hasattr(TensorProto, n)})

#: Bits per element of packed sub-byte types (stored two per byte, rounded up per tensor).
_SUB_BYTE_BITS = {getattr(TensorProto, n): 4 for n in ("INT4", "UINT4", "FLOAT4E2M1") if hasattr(TensorProto, n)}


def dtype_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type).lower()


def element_bits(elem_type: int) -> int:
    """Bits one element of ``elem_type`` occupies as stored."""
    if elem_type in _SUB_BYTE_BITS:
        return _SUB_BYTE_BITS[elem_type]
    if elem_type == TensorProto.STRING:
        raise ValueError("string tensors have no fixed element size")
    return 8 * helper.tensor_dtype_to_np_dtype(elem_type).itemsize


# ----------------------------------------------------------------------------------- loading
def _all_tensors(graph: Any) -> Iterable[Any]:
    """Every TensorProto of ``graph``: initializers and tensor attributes, subgraphs included."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _all_tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _all_tensors(subgraph)


def check_external_data(model: Any, base_dir: Path | None) -> None:
    """Refuse external-data locations that would read outside the model's folder (or with no folder).

    A location must be a relative path with no ``..`` part that resolves inside ``base_dir``.
    Raises ``ValueError`` naming the initializer and the location.
    """
    for tensor in _all_tensors(model.graph):
        if not uses_external_data(tensor):
            continue
        location = {e.key: e.value for e in tensor.external_data}.get("location", "")
        where = f"initializer {tensor.name!r} stores its data in external file {location!r}"
        if base_dir is None:
            raise ValueError(f"{where}, but the model was given as bytes or a ModelProto: external data is read only "
                             "from beside a model file; pass the model's path instead")
        parts = Path(location).parts
        if not location or Path(location).is_absolute() or os.path.isabs(location) or ".." in parts \
                or location.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", location):
            raise ValueError(f"{where}: an external-data location must be a relative path inside the model's folder "
                             "(no absolute path, no '..')")
        resolved = (base_dir / location).resolve()
        if base_dir.resolve() not in resolved.parents:
            raise ValueError(f"{where}, which resolves to {resolved}, outside the model's folder {base_dir.resolve()}")
        if not resolved.is_file():
            raise FileNotFoundError(f"{where}, which does not exist next to the model ({resolved})")


def _check_is_model(proto: Any, what: str) -> None:
    """Protobuf decodes many byte strings (an empty one too) into a message: refuse one that is no model."""
    if not proto.ir_version or not proto.HasField("graph") or not proto.graph.node:
        raise ValueError(f"not an ONNX model ({what}): it has no IR version or no graph nodes")


#: Protos ``load_model`` read from a file whose external data stays on disk: ``id`` -> (the proto, its folder).
#: An ``onnx.ModelProto`` takes no attribute and no weak reference, so the folder is kept here, beside a
#: strong reference to the proto (its ``id`` cannot be reused while it is held), for the ``_FOLDERS_KEPT``
#: most recent loads; a proto that fell out is refused as any proto with external data is (pass the path).
_FOLDERS: dict[int, tuple[Any, Path]] = {}
_FOLDERS_KEPT = 64


def external_folder(model: Any) -> Path | None:
    """The folder ``model``'s external data is read from: set for a proto ``load_model`` read from a file with
    external data (that very object, not a copy), else ``None``."""
    entry = _FOLDERS.get(id(model))
    return entry[1] if entry is not None and entry[0] is model else None


def _remember_folder(proto: Any, folder: Path) -> None:
    _FOLDERS[id(proto)] = (proto, folder)
    while len(_FOLDERS) > _FOLDERS_KEPT:
        del _FOLDERS[next(iter(_FOLDERS))]  # the oldest load (dicts keep insertion order)


#: External tensors of at most this many bytes are read when a value is needed (shape constants, zero
#: points, trip counts: what shape inference and the formulas read); larger ones are never read here.
SMALL_TENSOR_BYTES = 4096


def inline_small_tensors(model: Any, folder: Path | None) -> Any:
    """``model`` (a copy the caller owns: edited in place) with every external tensor of at most
    ``SMALL_TENSOR_BYTES`` read into the proto from ``folder``; larger ones stay external (onnx's shape
    inference reads no value of theirs: a weight's dims and dtype are in the proto)."""
    if folder is None:
        return model
    for tensor in _all_tensors(model.graph):
        if uses_external_data(tensor):
            length = {e.key: e.value for e in tensor.external_data}.get("length")
            size = int(length) if length else (_numel(tensor.dims) * element_bits(tensor.data_type) + 7) // 8
            if size <= SMALL_TENSOR_BYTES:
                load_external_data_for_tensor(tensor, str(folder))  # (then an inline tensor: location cleared)
    return model


def load_model(model: Any) -> Any:
    """An ``onnx.ModelProto`` for a path, bytes or ``ModelProto`` (the caller's proto is returned as is: never edited).

    A file's external data is checked (``check_external_data``) but not read: the proto keeps its tensors'
    dims and dtypes, and remembers its folder (``external_folder``) for the values read later.
    """
    if isinstance(model, onnx.ModelProto):
        check_external_data(model, external_folder(model))
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            proto = onnx.load_model_from_string(bytes(model))
        except DecodeError as exc:
            raise ValueError(f"the bytes given are not an ONNX model ({type(exc).__name__}: {exc})") from exc
        _check_is_model(proto, "the bytes given")
        check_external_data(proto, None)
        return proto
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise FileNotFoundError(f"no ONNX model file at {str(path)!r}")
        try:
            proto = onnx.load_model(str(path), load_external_data=False)
        except DecodeError as exc:
            raise ValueError(f"{str(path)!r} is not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
        _check_is_model(proto, repr(str(path)))
        check_external_data(proto, path.parent)
        if any(uses_external_data(t) for t in _all_tensors(proto.graph)):
            _remember_folder(proto, path.parent.resolve())
        return proto
    raise TypeError(f"an ONNX model is a path, bytes or onnx.ModelProto; got {type(model).__module__}."
                    f"{type(model).__qualname__}")


# ------------------------------------------------------------------------------------ inputs
def _graph_inputs(model: Any) -> list[Any]:
    """The graph's real inputs (initializers listed as inputs, as old exporters do, are weights)."""
    weights = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in weights]


def _shape_of(value: Any, name: str) -> tuple[int, ...]:
    """A shape from an array-like (``.shape``) or a sequence of ints."""
    shape = getattr(value, "shape", value)
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"input {name!r}: expected an array or a shape (a sequence of ints), got "
                        f"{type(value).__qualname__}") from None
    if any(d < 0 for d in dims) or any(isinstance(d, bool) for d in shape):
        raise ValueError(f"input {name!r}: a shape has non-negative int dimensions, got {tuple(shape)}")
    return dims


def given_shapes(model: Any, inputs_or_shapes: Any) -> dict[str, tuple[int, ...]]:
    """Input name -> shape, from ``None``, one array/shape, a sequence of them (graph order) or a dict by name."""
    inputs = _graph_inputs(model)
    names = [i.name for i in inputs]
    if inputs_or_shapes is None:
        return {}
    if isinstance(inputs_or_shapes, Mapping):
        unknown = sorted(set(inputs_or_shapes) - set(names))
        if unknown:
            raise ValueError(f"{unknown} are not inputs of this model; its inputs are {names}")
        return {k: _shape_of(v, k) for k, v in inputs_or_shapes.items()}
    single = hasattr(inputs_or_shapes, "shape") or (
        isinstance(inputs_or_shapes, Sequence) and all(isinstance(d, int) for d in inputs_or_shapes))
    items = [inputs_or_shapes] if single else list(inputs_or_shapes)
    if len(items) > len(names):
        raise ValueError(f"{len(items)} inputs given, but the model has {len(names)}: {names}")
    return {name: _shape_of(value, name) for name, value in zip(names, items)}


def bind_inputs(model: Any, inputs_or_shapes: Any = None, dims: Mapping[str, int] | None = None) -> Any:
    """A copy of ``model`` whose graph inputs all have fixed shapes.

    A shape given for an input must agree with its fixed dimensions; a symbolic dimension is
    bound by the given shape, or by name from ``dims`` (``batch=8``). Raises ``ValueError``
    naming the input and the dimension left unbound.
    """
    dims = dict(dims or {})
    for key, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"dimension {key!r} must be a non-negative int, got {value!r}")
    shapes = given_shapes(model, inputs_or_shapes)
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    used: set[str] = set()
    for value_info in _graph_inputs(bound):
        tensor_type = value_info.type.tensor_type
        if not value_info.type.HasField("tensor_type"):
            raise ValueError(f"input {value_info.name!r} is not a tensor; only tensor inputs are supported")
        model_dims = tensor_type.shape.dim
        given = shapes.get(value_info.name)
        if given is not None and len(given) != len(model_dims) and tensor_type.HasField("shape"):
            raise ValueError(f"input {value_info.name!r} has rank {len(model_dims)} but the shape given is {given}")
        if given is not None and not tensor_type.HasField("shape"):
            for d in given:
                tensor_type.shape.dim.add().dim_value = d
            continue
        for axis, dim in enumerate(model_dims):
            symbol = dim.dim_param if dim.HasField("dim_param") else None
            if given is not None:
                if dim.HasField("dim_value") and dim.dim_value != given[axis]:
                    raise ValueError(f"input {value_info.name!r}: dimension {axis} is fixed at {dim.dim_value} in the "
                                     f"model, but the shape given is {given}")
                if symbol and symbol in dims and dims[symbol] != given[axis]:
                    raise ValueError(f"input {value_info.name!r}: dimension {symbol!r} is bound to {dims[symbol]} but "
                                     f"the shape given has {given[axis]}")
                dim.dim_value = given[axis]
            elif dim.HasField("dim_value"):
                continue
            elif symbol and symbol in dims:
                dim.dim_value = dims[symbol]
                used.add(symbol)
            else:
                label = repr(symbol) if symbol else "with no name"
                raise ValueError(f"input {value_info.name!r}: dimension {axis} ({label}) is not bound; pass a shape "
                                 f"for {value_info.name!r}" + (f" or {symbol}=<int>" if symbol else ""))
            if symbol:
                used.add(symbol)
    unused = sorted(set(dims) - used)
    if unused:
        symbols = sorted({d.dim_param for v in _graph_inputs(model) for d in v.type.tensor_type.shape.dim
                          if d.HasField("dim_param")})
        raise ValueError(f"dimension(s) {unused} are not symbolic dimensions of this model's inputs; "
                         f"its symbolic dimensions are {symbols or 'none'}")
    return bound


def batch_dims(model: Any, batch_size: int) -> dict[str, int]:
    """Symbolic first dimension -> ``batch_size`` for every input whose first dimension is symbolic.

    An input whose first dimension is fixed at another size is an error naming it: the file was
    exported for one batch size (re-export it with a dynamic batch axis).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    bound: dict[str, int] = {}
    for value_info in _graph_inputs(model):
        dims = value_info.type.tensor_type.shape.dim
        if not dims:
            continue
        first = dims[0]
        if first.HasField("dim_param") and first.dim_param:
            bound[first.dim_param] = batch_size
        elif first.HasField("dim_value") and first.dim_value != batch_size:
            raise ValueError(f"input {value_info.name!r} has a fixed batch of {first.dim_value} in this file, so it "
                             f"cannot be profiled at batch_size={batch_size}; leave batch_size out, or export the "
                             "model with a dynamic batch axis (torch.onnx.export(..., dynamic_axes={name: {0: "
                             "'batch'}}))")
    return bound


# ------------------------------------------------------------------------------ shape inference
_NODE_IN_MESSAGE = re.compile(r"\(op_type:(?P<op>[^,]+), node name: (?P<name>[^)]*)\)")


def infer(model: Any) -> Any:
    """``model`` with every value's shape inferred by onnx (strict, with data propagation).

    A failure raises ``ValueError`` naming the node (its op type and name) and onnx's reason.
    """
    from onnx.shape_inference import InferenceError, infer_shapes

    try:
        return infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except (InferenceError, onnx.checker.ValidationError, RuntimeError) as exc:
        message = str(exc)
        found = _NODE_IN_MESSAGE.search(message)
        where = f"node {found['name']!r} ({found['op']})" if found else "a node onnx did not name"
        raise ValueError(f"ONNX shape inference failed at {where}: {message.strip()}") from exc


def graph_and_bodies(graph: Any) -> Iterable[Any]:
    """``graph`` and its subgraphs (``If`` branches, ``Loop`` / ``Scan`` bodies), nested ones included."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from graph_and_bodies(attribute.g)
            for subgraph in attribute.graphs:
                yield from graph_and_bodies(subgraph)


def _subgraph_inputs(node: Any, shapes: Mapping[str, tuple[int, ...] | None]) -> list[tuple[int, tuple[int, ...]]]:
    """(body input position, shape) of a ``Loop`` / ``Scan`` body's inputs, from the outer values that feed them.

    ``Loop``: the body's inputs are (iteration, condition, carried...), the carried ones entering as the
    node's inputs 2.. ; ``Scan``: (states..., one slice of each scan input), a slice being the scan
    input without its scan axis (``scan_input_axes``, default 0).
    """
    outer = list(node.input)
    if node.op_type == "Loop":
        return [(2 + k, shapes[name]) for k, name in enumerate(outer[2:]) if shapes.get(name) is not None]
    states = len(outer) - next((int(a.i) for a in node.attribute if a.name == "num_scan_inputs"), 0)
    axes = next((list(a.ints) for a in node.attribute if a.name == "scan_input_axes"), [])
    seeded = []
    for k, name in enumerate(outer):
        shape = shapes.get(name)
        if shape is None:
            continue
        if k >= states:
            axis = axes[k - states] if k - states < len(axes) else 0
            axis = axis + len(shape) if axis < 0 else axis
            if not 0 <= axis < len(shape):
                continue
            shape = shape[:axis] + shape[axis + 1:]
        seeded.append((k, shape))
    return seeded


def _carried_shapes_hold(node: Any, body: Any, seeded: list[tuple[int, tuple[int, ...]]]) -> bool:
    """A seeded body keeps each carried value's (state's) shape from one iteration to the next."""
    if node.op_type == "Loop":
        pairs = [(position, position - 1) for position, _ in seeded]  # carried input k+2 -> output k+1
    else:
        states = len(node.input) - next((int(a.i) for a in node.attribute if a.name == "num_scan_inputs"), 0)
        pairs = [(position, position) for position, _ in seeded if position < states]
    given = dict(seeded)
    return all(out < len(body.output) and _value_shape(body.output[out]) == given[position] for position, out in pairs)


def _loop_outputs(node: Any, shapes: dict[str, tuple[int, ...] | None], constants: Mapping[str, Any]) -> None:
    """Fill the unknown shapes of a ``Loop`` / ``Scan`` node's outputs from its (seeded) body, in place:
    onnx leaves them unknown when the graph declares them without a shape.

    A carried value (a state) leaves with its body output's shape; a scan output is the body's per-step
    output stacked along a new first axis (``Scan``: ``scan_output_axes``, default 0) of the trip count
    (``Loop``: a constant ``M``; ``Scan``: its first scan input's length along its scan axis).
    """
    if node.op_type not in ("Loop", "Scan") or node.domain not in ("", "ai.onnx"):
        return
    body = next((a.g for a in node.attribute if a.name == "body" and a.HasField("g")), None)
    if body is None:
        return
    attrs = {a.name: a for a in node.attribute}
    if node.op_type == "Loop":
        carried, first, trips = len(node.input) - 2, 1, constants.get(node.input[0]) if node.input and node.input[0] else None
        trips = int(trips.reshape(-1)[0]) if trips is not None and trips.size == 1 else None
        axes: list[int] = []
    else:
        scans = int(attrs["num_scan_inputs"].i) if "num_scan_inputs" in attrs else 0
        carried, first = len(node.input) - scans, 0
        in_axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else []
        sequence = shapes.get(node.input[carried]) if 0 < scans and carried < len(node.input) else None
        axis = in_axes[0] if in_axes else 0
        trips = sequence[axis + len(sequence) if axis < 0 else axis] if sequence and -len(sequence) <= axis < len(sequence) else None
        axes = list(attrs["scan_output_axes"].ints) if "scan_output_axes" in attrs else []
    for k, name in enumerate(node.output):
        inner = first + k
        if not name or shapes.get(name) is not None or inner >= len(body.output):
            continue
        shape = shapes.get(body.output[inner].name) or _value_shape(body.output[inner])
        if shape is None:
            continue
        if k < carried:
            shapes[name] = shape
        elif trips is not None:
            axis = axes[k - carried] if k - carried < len(axes) else 0
            axis = axis + len(shape) + 1 if axis < 0 else axis
            shapes[name] = shape[:axis] + (trips,) + shape[axis:]


def seed_subgraphs(model: Any) -> Any:
    """``model`` (an inferred copy) with its ``Loop`` / ``Scan`` bodies' input shapes given where the body
    declares none, inferred again: onnx does not carry an outer shape into a body (a carried value may
    change shape between iterations), so a body's nodes would stay unshaped.

    A body's inputs take the shapes of the outer values that enter it (``_subgraph_inputs``); after
    inference, every carried value must come out of the body with the shape it went in with, else the
    seeding is undone (the shapes really change per iteration, and stay unknown). Nested bodies are
    seeded on the next pass (at most 4).
    """
    for _ in range(4):
        shapes = {}
        for each in graph_and_bodies(model.graph):
            for value_info in list(each.input) + list(each.value_info) + list(each.output):
                shapes.setdefault(value_info.name, _value_shape(value_info))
            for tensor in each.initializer:
                shapes[tensor.name] = tuple(int(d) for d in tensor.dims)
        trial = onnx.ModelProto()
        trial.CopyFrom(model)
        seeded_bodies = []
        for each in graph_and_bodies(trial.graph):
            for node in each.node:
                if node.op_type not in ("Loop", "Scan") or node.domain not in ("", "ai.onnx"):
                    continue
                body = next((a.g for a in node.attribute if a.name == "body" and a.HasField("g")), None)
                if body is None:
                    continue
                seeded = [(position, shape) for position, shape in _subgraph_inputs(node, shapes)
                          if position < len(body.input) and _value_shape(body.input[position]) is None
                          and body.input[position].type.HasField("tensor_type")]
                for position, shape in seeded:
                    tensor_type = body.input[position].type.tensor_type
                    tensor_type.ClearField("shape")
                    tensor_type.shape.SetInParent()
                    for dim in shape:
                        tensor_type.shape.dim.add().dim_value = dim
                if seeded:
                    seeded_bodies.append((node.name or node.output[0], seeded))
        if not seeded_bodies:
            return model
        try:
            again = infer(trial)
        except ValueError:
            return model
        nodes = {node.name or node.output[0]: node for each in graph_and_bodies(again.graph) for node in each.node}
        for name, seeded in seeded_bodies:
            node = nodes.get(name)
            body = next((a.g for a in node.attribute if a.name == "body"), None) if node is not None else None
            if body is None or not _carried_shapes_hold(node, body, seeded):
                return model
        model = again
    return model


@dataclass(frozen=True)
class GraphInfo:
    """An inferred graph: each value's shape (``None`` where unknown) and element type."""

    model: Any
    shapes: Mapping[str, tuple[int, ...] | None]
    dtypes: Mapping[str, int]
    constants: Mapping[str, Any]  # initializer / Constant name -> numpy array (scalars an attribute needs)
    input_shapes: Mapping[str, tuple[int, ...]]
    #: why some values' shapes stayed unknown (no onnxruntime, or the run failed); "" when none did
    unknown_reason: str = ""
    #: the folder of the file's external data (``external_folder``), ``None`` when it has none
    folder: Path | None = None
    #: nodes whose output shapes depend on the input values (``VALUE_SHAPED_OPS``), read from a run on
    #: seeded inputs because no arrays were given: the counts after them are that data's
    seeded_nodes: tuple[str, ...] = ()


#: Ops whose output shape depends on the values of their inputs, not on their shapes alone.
VALUE_SHAPED_OPS = frozenset({"NonZero", "NonMaxSuppression", "Unique", "Compress"})


def _value_shape(value_info: Any) -> tuple[int, ...] | None:
    if not value_info.type.HasField("tensor_type") or not value_info.type.tensor_type.HasField("shape"):
        return None
    dims = value_info.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def prepare(model: Any, inputs_or_shapes: Any = None, dims: Mapping[str, int] | None = None) -> GraphInfo:
    """Load, bind and infer ``model``: the one place the backend reads a file's graph.

    Values whose shapes onnx cannot infer (ops outside its schemas: ``com.microsoft.QGemm`` and
    other contrib ops, custom domains; outputs whose size depends on the data, as ``NonZero``'s) are
    read from one ONNX Runtime run on the bound inputs (``shapes_by_running``): the arrays given, or
    seeded ones (then ``seeded_nodes`` names the data-dependent nodes, and the counts warn). Without onnxruntime, or when that run fails (a custom op whose library
    is not loaded), they stay unknown: a formula that needs one names its node and the reason, and
    an untracked op needs none.
    """
    proto = load_model(model)
    folder = external_folder(proto)
    inferred = seed_subgraphs(infer(inline_small_tensors(bind_inputs(proto, inputs_or_shapes, dims), folder)))
    graph = inferred.graph
    shapes: dict[str, tuple[int, ...] | None] = {}
    dtypes: dict[str, int] = {}
    constants: dict[str, Any] = {}
    for each in graph_and_bodies(graph):  # the main graph and every If / Loop / Scan body (value names are unique)
        for value_info in list(each.input) + list(each.value_info) + list(each.output):
            if value_info.name not in shapes or shapes[value_info.name] is None:
                shapes[value_info.name] = _value_shape(value_info)
            if value_info.type.HasField("tensor_type") and value_info.type.tensor_type.elem_type:
                dtypes[value_info.name] = value_info.type.tensor_type.elem_type
        for tensor in each.initializer:
            shapes[tensor.name] = tuple(int(d) for d in tensor.dims)
            dtypes[tensor.name] = tensor.data_type
            if _numel(tensor.dims) <= 16:  # small ones only: scalars and short vectors formulas may read
                constants[tensor.name] = numpy_helper.to_array(tensor, str(folder or ""))
        for node in each.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                for attribute in node.attribute:
                    if attribute.name == "value":
                        constants[node.output[0]] = numpy_helper.to_array(attribute.t)
    for each in graph_and_bodies(graph):
        for node in each.node:
            _loop_outputs(node, shapes, constants)
    input_shapes = {i.name: shapes[i.name] for i in _graph_inputs(inferred)}
    unknown = [name for node in graph.node for name in node.output if name and shapes.get(name) is None]
    reason = ""
    seeded: tuple[str, ...] = ()
    if unknown:
        if not _has_arrays(inputs_or_shapes):
            missing = set(unknown)
            seeded = tuple(f"{node.op_type} {node.name or '(unnamed)'!r}" for node in graph.node
                           if node.op_type in VALUE_SHAPED_OPS and node.domain in ("", "ai.onnx")
                           and missing.intersection(node.output))
        try:
            ran_shapes, ran_dtypes = shapes_by_running(inferred, input_shapes, dtypes, unknown,
                                                       inputs_or_shapes if _has_arrays(inputs_or_shapes) else None,
                                                       folder)
        except ValueError as exc:  # raised only where a formula needs one of these shapes (NodeView)
            reason = str(exc)
        else:
            shapes.update(ran_shapes)
            for name, elem_type in ran_dtypes.items():
                dtypes.setdefault(name, elem_type)
    return GraphInfo(inferred, shapes, dtypes, constants, input_shapes, reason, folder,
                     seeded if not reason else ())


def _has_arrays(given: Any) -> bool:
    if isinstance(given, Mapping):
        return any(hasattr(v, "dtype") for v in given.values())
    if isinstance(given, (list, tuple)):
        return any(hasattr(v, "dtype") for v in given)
    return hasattr(given, "dtype")


def session_inputs(input_shapes: Mapping[str, tuple[int, ...]], dtypes: Mapping[str, int], given: Any = None,
                   seed: int = 0) -> dict[str, Any]:
    """Input name -> array for ONNX Runtime: the arrays given, else seeded arrays of the bound shapes
    (standard normal for floating-point inputs, zeros for integer ones: valid token ids and indices)."""
    names = list(input_shapes)
    if isinstance(given, Mapping):
        arrays = {k: v for k, v in given.items() if hasattr(v, "shape") and hasattr(v, "dtype")}
    elif hasattr(given, "shape") and hasattr(given, "dtype"):
        arrays = {names[0]: given}
    elif isinstance(given, (list, tuple)):
        arrays = {n: v for n, v in zip(names, given) if hasattr(v, "shape") and hasattr(v, "dtype")}
    else:
        arrays = {}
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, shape in input_shapes.items():
        dtype = helper.tensor_dtype_to_np_dtype(dtypes[name])
        if name in arrays:
            feeds[name] = _feed(arrays[name], dtype)
        elif np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[name] = np.zeros(shape, dtype=dtype)
    return feeds


def _feed(value: Any, dtype: Any) -> Any:
    """``value`` (a numpy array, a torch or TensorFlow tensor) as the contiguous array of ``dtype`` a session takes."""
    value = value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) else value
    return np.ascontiguousarray(value, dtype=dtype)


def missing_cuda_provider() -> str | None:
    """Why ONNX Runtime cannot run on CUDA here (``"this onnxruntime 1.x has no CUDAExecutionProvider (it
    has ...)"``), or ``None`` when it can. ORT itself would fall back to the CPU without a word."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    if "CUDAExecutionProvider" in available:
        return None
    return f"this onnxruntime {ort.__version__} has no CUDAExecutionProvider (it has {', '.join(available)})"


def inference_session(model: Any, options: Any, device: str = "cpu", folder: Path | None = None) -> Any:
    """An ONNX Runtime ``InferenceSession`` of ``model`` on the CPU provider (``device="cuda"``: the CUDA
    provider, with the CPU provider for the nodes it does not implement, as ONNX Runtime places them), made
    quietly.

    ``device="cuda"`` with an onnxruntime that has no CUDA provider (the ``onnxruntime`` wheel; the GPU one is
    ``onnxruntime-gpu``) is a ``ValueError`` naming the providers it has: ONNX Runtime itself would fall back
    to the CPU and time the wrong device.

    When a session cannot be made, onnxruntime prints an "EP Error ... Falling back" banner to standard
    output and retries once before it raises; the banner would land inside a report (a JSON one too), so
    standard output is captured while the session is made (restored after, also when it raises); the error
    itself propagates to the caller, which names it.

    External data: ONNX Runtime reads it itself from ``folder`` (default: the folder ``load_model`` remembered
    for ``model``, ``external_folder``), given as its ``session.model_external_initializers_file_folder_path``:
    the proto (a copy with named nodes or extra outputs too) is passed as bytes without the weights, which
    stay in their file; its small tensors are read into it first (``inline_small_tensors``), as ONNX Runtime's
    shape inference, like onnx's, reads no external value.
    """
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    if device == "cuda":
        if (missing := missing_cuda_provider()) is not None:
            raise ValueError(f"device='cuda': {missing}; install onnxruntime-gpu in place of onnxruntime, or time on "
                             "device='cpu'")
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    elif device != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda' for an ONNX model, got {device!r}")
    folder = folder or external_folder(model)
    if folder is not None:  # its small tensors inline: ORT's own shape inference reads no external value either
        options.add_session_config_entry("session.model_external_initializers_file_folder_path", str(folder))
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        model = inline_small_tensors(copy, folder)
    with contextlib.redirect_stdout(io.StringIO()):
        return ort.InferenceSession(model.SerializeToString(), options, providers=providers)


class OnnxSession:
    """An ONNX file run by ONNX Runtime (CPU provider, ``num_threads`` intra-op threads; the session is made on
    the first ``predict``), as the file backends' evaluation functions call it: ``predict(x)`` is the first
    output for ``x`` (an array for the first input, a tuple of arrays in input order, or a dict by input
    name), each array cast to its input's element type, as Keras' ``model.predict``."""

    def __init__(self, model: Any, num_threads: int = 1) -> None:
        self.onnx_model = load_model(model)
        self.num_threads = num_threads
        self._session = None
        stored = {t.name for t in self.onnx_model.graph.initializer}
        self.inputs = [i for i in self.onnx_model.graph.input if i.name not in stored]

    def predict(self, x: Any) -> Any:
        import onnxruntime as ort

        if self._session is None:
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.num_threads
            options.inter_op_num_threads = 1
            self._session = inference_session(self.onnx_model, options)
        if isinstance(x, Mapping):
            given = dict(x)
        else:
            arrays = tuple(x) if isinstance(x, (tuple, list)) else (x,)
            if len(arrays) > len(self.inputs):
                raise ValueError(f"{len(arrays)} arrays for a model with {len(self.inputs)} input(s) "
                                 f"({', '.join(i.name for i in self.inputs)})")
            given = {i.name: a for i, a in zip(self.inputs, arrays)}
        feeds = {}
        for value in self.inputs:
            if value.name not in given:
                raise ValueError(f"no array for the model's input {value.name!r}")
            feeds[value.name] = _feed(given[value.name], helper.tensor_dtype_to_np_dtype(
                value.type.tensor_type.elem_type))
        return self._session.run(None, feeds)[0]


def shapes_by_running(model: Any, input_shapes: Mapping[str, tuple[int, ...]], dtypes: Mapping[str, int],
                      unknown: Sequence[str], given: Any = None, folder: Path | None = None
                      ) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """Shapes and element types of the ``unknown`` values, from one ONNX Runtime run (CPU, 1 thread, no graph
    optimisation, so every node runs as stored) on the given arrays or seeded ones of the bound shapes."""
    try:
        import onnxruntime as ort
    except ImportError:
        first = next(n for n in model.graph.node if unknown[0] in n.output)
        raise ValueError(f"the output shapes of node {first.name or '(unnamed)'!r} ({first.domain or 'ai.onnx'}."
                         f"{first.op_type}) are unknown to onnx's shape inference; install onnxruntime "
                         "(pip install 'deeplite-like[onnx]') to read them from a run") from None
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output}
    for name in unknown:
        if name not in present:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = inference_session(probe, options, folder=folder)
        values = session.run(unknown, session_inputs(input_shapes, dtypes, given))
    except Exception as exc:  # onnxruntime raises its own exception types (Fail, InvalidGraph, ...)
        raise ValueError(f"onnx could not infer the shapes of {len(unknown)} value(s) (the first: {unknown[0]!r}) "
                         f"and ONNX Runtime could not run the model to read them: {type(exc).__name__}: {exc}"
                         ) from exc
    shapes = {name: tuple(int(d) for d in value.shape) for name, value in zip(unknown, values)}
    elem_types = {name: helper.np_dtype_to_tensor_dtype(value.dtype) for name, value in zip(unknown, values)
                  if hasattr(value, "dtype")}
    return shapes, elem_types


def _numel(shape: Iterable[int]) -> int:
    total = 1
    for d in shape:
        total *= int(d)
    return total


# ------------------------------------------------------------------------------------- nodes
@dataclass(frozen=True)
class NodeView:
    """One node with the shapes and types of its values: what a formula reads."""

    node: Any
    info: GraphInfo

    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def label(self) -> str:
        return f"node {self.node.name or '(unnamed)'!r} ({self.node.op_type})"

    def has_input(self, index: int) -> bool:
        return index < len(self.node.input) and bool(self.node.input[index])

    def _shape(self, names: Sequence[str], index: int, kind: str) -> tuple[int, ...]:
        if index >= len(names) or not names[index]:
            raise ValueError(f"{self.label} has no {kind} {index}")
        shape = self.info.shapes.get(names[index])
        if shape is None:
            why = f" ({self.info.unknown_reason})" if self.info.unknown_reason else ""
            raise ValueError(f"{self.label}: the shape of its {kind} {index} ({names[index]!r}) is unknown after "
                             f"shape inference{why}; bind every symbolic input dimension (count_ops(model, shapes, "
                             "batch=...)) or give the inputs' shapes")
        return shape

    def input_shape(self, index: int) -> tuple[int, ...]:
        return self._shape(self.node.input, index, "input")

    def output_shape(self, index: int = 0) -> tuple[int, ...]:
        return self._shape(self.node.output, index, "output")

    def numel_in(self, index: int = 0) -> int:
        return _numel(self.input_shape(index))

    def numel_out(self, index: int = 0) -> int:
        return _numel(self.output_shape(index))

    def is_float(self, name: str) -> bool:
        return self.info.dtypes.get(name) in FLOAT_TYPES

    def float_out(self, index: int = 0) -> bool:
        return self.is_float(self.node.output[index])

    def float_in(self, index: int = 0) -> bool:
        return self.is_float(self.node.input[index])

    def attr(self, name: str, default: Any = None) -> Any:
        for attribute in self.node.attribute:
            if attribute.name == name:
                value = helper.get_attribute_value(attribute)
                return value.decode() if isinstance(value, bytes) else value
        return default

    def constant(self, index: int) -> Any:
        """The value of input ``index`` when it is an initializer or a Constant (else ``None``)."""
        if not self.has_input(index):
            return None
        return self.info.constants.get(self.node.input[index])

    def filled_with(self, index: int, value: float) -> bool:
        """Whether input ``index`` is stored data (a Constant, or an initializer of any size) whose every
        element is ``value``: the ones and zeros an exporter writes where the source had no parameter. A
        QuantizeLinear -> DequantizeLinear round trip of stored data (onnxruntime's static QDQ quantizer wraps
        constants fed to a float op so) is read as the data it quantizes."""
        if not self.has_input(index):
            return False
        name = self.node.input[index]
        graph = self.info.model.graph
        for _ in range(2):  # DequantizeLinear, then the QuantizeLinear feeding it
            producer = next((n for n in graph.node if name in n.output), None)
            if producer is None or producer.op_type not in ("DequantizeLinear", "QuantizeLinear"):
                break
            name = producer.input[0]
        array = self.info.constants.get(name)
        if array is None:
            tensor = next((t for t in graph.initializer if t.name == name), None)
            array = None if tensor is None else numpy_helper.to_array(tensor, str(self.info.folder or ""))
        return array is not None and array.size > 0 and array.dtype.kind == "f" and bool(np.all(array == value))


# ------------------------------------------------------------------------------- initializers
@dataclass
class Initializers:
    """Parameters and bytes of a model's initializers, each once, at its stored dtype.

    ``params`` counts the elements of every initializer except integer index data
    (``int64``/``int32`` tensors that only shape, axis or index inputs read: ``Reshape``'s shape,
    ``Gather``'s indices); an ``int32`` bias of a quantized op *is* a parameter.
    """

    params: int = 0
    bytes: int = 0
    by_dtype: dict[str, dict[str, int]] = field(default_factory=dict)  # dtype -> {"params", "bytes"}
    index_data: int = 0  # elements of integer index initializers, left out of params
    count: int = 0


#: (op type, input position) pairs whose integer tensor is a weight (a quantized op's weights or int32 bias),
#: or the int32 zero point a QDQ file stores beside each int32 bias (``DequantizeLinear`` input 2): stored
#: quantization parameters, as the int8 zero points of the weights are.
_WEIGHT_SLOTS = {("QLinearConv", 3), ("QLinearConv", 8), ("ConvInteger", 1), ("MatMulInteger", 1),
                 ("QLinearMatMul", 3), ("DequantizeLinear", 0), ("DequantizeLinear", 2), ("QGemm", 3), ("QGemm", 6),
                 ("MatMulNBits", 1),
                 ("DynamicQuantizeMatMul", 1), ("MatMulIntegerToFloat", 1)}


def initializer_stats(model: Any) -> Initializers:
    """Parameters and bytes of ``model``'s initializers (see ``Initializers``)."""
    weight_reads: set[str] = set()
    packed: dict[str, int] = {}  # a 4-bit MatMul's uint8 blob -> its N x K weights (sub-byte, packed)
    per_byte: dict[str, int] = {}  # a uint8 GatherBlockQuantized table -> weights per byte (8 / bits)
    for node in model.graph.node:
        for position, name in enumerate(node.input):
            if (node.op_type, position) in _WEIGHT_SLOTS:
                weight_reads.add(name)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type in ("MatMulNBits", "MatMulBnb4") and len(node.input) > 1:
            packed[node.input[1]] = int(attrs["N"]) * int(attrs["K"])
        if node.op_type == "GatherBlockQuantized" and node.input:
            per_byte[node.input[0]] = 8 // int(attrs.get("bits", 4))
    stats = Initializers()
    seen: set[str] = set()
    for tensor in model.graph.initializer:
        if tensor.name in seen:
            continue
        seen.add(tensor.name)
        count = _numel(tensor.dims)
        index_like = tensor.data_type in (TensorProto.INT64, TensorProto.INT32) and tensor.name not in weight_reads
        if index_like:
            stats.index_data += count
            continue
        size = (count * element_bits(tensor.data_type) + 7) // 8
        count = packed.get(tensor.name, count)  # a packed blob holds more (sub-byte) weights than bytes
        if tensor.data_type == TensorProto.UINT8:  # (an int4 / uint4 table is counted per element already)
            count *= per_byte.get(tensor.name, 1)
        stats.params += count
        stats.bytes += size
        stats.count += 1
        entry = stats.by_dtype.setdefault(dtype_name(tensor.data_type), {"params": 0, "bytes": 0})
        entry["params"] += count
        entry["bytes"] += size
    return stats


# -- Peak activation memory -------------------------------------------------------------------------

#: Ops whose output is their first input's storage (no copy): default domain only.
ALIAS_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})


def _node_label(node, index: int) -> str:
    return node.name or f"{node.op_type}#{index}"


def _nbytes(name: str, info: GraphInfo, where: str) -> int:
    shape, elem_type = info.shapes.get(name), info.dtypes.get(name)
    if shape is None or elem_type is None:
        why = f" ({info.unknown_reason})" if info.unknown_reason else ""
        raise ValueError(f"peak activation memory: the {'shape' if shape is None else 'element type'} of tensor "
                         f"{name!r} ({where}) is unknown after shape inference{why}")
    numel = 1
    for d in shape:
        numel *= int(d)
    return (numel * element_bits(elem_type) + 7) // 8


def tensor_lifetimes(info: GraphInfo) -> LifetimeStats:
    """The live-tensor peak of ``info``'s graph (see the module docstring for the rules)."""
    graph = info.model.graph
    nodes = list(graph.node)
    stored = {t.name for t in graph.initializer}
    stored |= {n.output[0] for n in nodes if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output}
    lifetimes = TensorLifetimes(len(nodes))
    graph_inputs = [i.name for i in graph.input if i.name not in stored]
    for name in graph_inputs:
        lifetimes.born(name, 0, _nbytes(name, info, "graph input"))
        lifetimes.keep(name)
    for index, node in enumerate(nodes):
        label = _node_label(node, index)
        for name in node.input:
            if name and name in lifetimes:
                lifetimes.read(name, index)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            continue
        aliased = (node.op_type in ALIAS_OPS and node.domain in ("", "ai.onnx") and node.input
                   and node.input[0] in lifetimes)
        for position, name in enumerate(node.output):
            if not name:
                continue
            if aliased and position == 0:
                lifetimes.view(name, node.input[0], index)
                continue
            lifetimes.born(name, index, _nbytes(name, info, f"output {position} of {label} ({node.op_type})"))
    outputs = [o.name for o in graph.output if o.name in lifetimes]
    for name in outputs:
        lifetimes.keep(name)
    return lifetimes.stats([_node_label(node, index) for index, node in enumerate(nodes)],
                           input_bytes=lifetimes.storages(graph_inputs), output_bytes=lifetimes.storages(outputs))

