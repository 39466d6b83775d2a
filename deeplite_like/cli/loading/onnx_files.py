"""``.onnx`` files on the command line: loading one safely, and its inputs from ``--input-shape``.

An ONNX file is a protobuf: data, no code. It is read by the ONNX backend's one loader
(``backends.onnx.graph.load_model``): external data only from beside the file, locations checked,
no custom-op library ever loaded. A file that is not an ONNX model (a text file, random bytes, a
truncated protobuf) is a usage error naming the file and its kind, never a traceback.

Inputs: ``--input-shape NAME=1x3x224x224`` names the graph input it shapes (repeat it for several);
an unnamed ``--input-shape`` shapes the graph's inputs in order. With none, the file's own fixed
shapes are used (a symbolic dimension left unbound is then an error naming it). From shapes the
backend draws seeded arrays of each input's own dtype (zeros for integer inputs); ``--inputs FILE``
(``.npy`` / ``.npz``, names as the graph's inputs) passes real arrays on, which bind the dimensions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading.preflight import LoadedModel, not_loadable

SAVE_HINT = "write the file with torch.onnx.export, tf2onnx or onnx.save_model"


def load_onnx_file(spec: str, path: Path) -> LoadedModel:
    """An ``.onnx`` file as an ``onnx.ModelProto`` (``framework='onnx'``), or a ``UsageError`` saying why not."""
    try:
        from deeplite_like.backends.onnx.graph import load_model
    except ImportError as exc:
        raise UsageError(f"{spec!r}: {exc}", "install it with: pip install 'deeplite-like[onnx]'") from None
    try:
        proto = load_model(path)
    except (ValueError, FileNotFoundError) as exc:
        raise not_loadable(spec, path, "ONNX", exc, SAVE_HINT) from None
    except Exception as exc:  # protobuf / onnx errors on a damaged file other than DecodeError
        raise UsageError(f"{spec!r} is a corrupt ONNX model file: {type(exc).__name__}: {str(exc).strip()[:200]}",
                         SAVE_HINT) from None
    return LoadedModel(spec, path.name, "onnx", proto)  # the name keeps .onnx: a compare with its source reads clearly


def onnx_inputs(loaded: LoadedModel, shapes: Sequence[tuple[int, ...]]) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of shapes for ``OnnxProfiler(inputs=...)``: named shapes by input name, else in order.

    Every name must be one of the graph's inputs (initializers are not); mixing named and unnamed is refused.
    """
    names = [getattr(shape, "name", None) for shape in shapes]
    graph = loaded.model.graph
    stored = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in stored]
    if not shapes:
        unbound = [f"{i.name}[{axis}]" + (f" ({d.dim_param!r})" if d.dim_param else "")
                   for i in inputs for axis, d in enumerate(i.type.tensor_type.shape.dim) if not d.HasField("dim_value")]
        if unbound:
            example = " ".join(f"--input-shape {i.name}=SHAPE" for i in inputs)
            raise UsageError(f"{loaded.spec!r}: the file leaves dimensions of its inputs open: {', '.join(unbound)}",
                             f"give every input's shape, batch axis first: {example}")
        return (), {}
    if not any(names):
        return tuple(tuple(shape) for shape in shapes), {}
    if not all(names):
        raise UsageError("--input-shape: name every input (NAME=SHAPE) or none", "e.g. --input-shape input=1x3x224x224")
    inputs = [i.name for i in inputs]
    for name in names:
        if name not in inputs:
            raise UsageError(f"--input-shape {name}=...: {loaded.spec!r} has no input named {name!r}",
                             f"its inputs are: {', '.join(inputs)}")
    if len(set(names)) != len(names):
        raise UsageError("--input-shape names an input twice", "give each input once")
    return (), {name: tuple(shape) for name, shape in zip(names, shapes)}


def onnx_profiler_inputs(inputs: tuple[tuple, dict]) -> Any:
    """What ``OnnxProfiler(inputs=...)`` takes for ``onnx_inputs``' result (``None``: the file's own shapes)."""
    args, kwargs = inputs
    if kwargs:
        return dict(kwargs)
    if not args:
        return None
    return args[0] if len(args) == 1 else list(args)


def with_batch(inputs: tuple[tuple, dict], batch_size: int) -> tuple[tuple, dict]:
    """``--batch-size N`` on ONNX shapes: each given shape's batch axis (the first) becomes ``N``.

    With no shapes given (the file's fixed shapes), nothing changes here: the backend binds every
    symbolic first dimension to ``N`` and refuses a fixed one that differs, naming it.
    """
    args, kwargs = inputs
    if any(not isinstance(s, tuple) for s in (*args, *kwargs.values())):
        raise UsageError("--batch-size with --inputs: the arrays fix the batch", "drop one of them")
    resize = lambda shape: (batch_size, *tuple(shape)[1:]) if len(shape) else tuple(shape)  # noqa: E731
    return tuple(resize(s) for s in args), {name: resize(s) for name, s in kwargs.items()}
