"""``.tflite`` files on the command line: read by the backend's one loader (LiteRT's schema reader), no code and
no custom-op library ever loaded; a file that is not one is a usage error naming it, never a traceback.
Inputs: the file's stored shapes, or ``--input-shape`` (``NAME=SHAPE`` by input name, else in input order),
``--inputs FILE`` (the arrays' shapes; a one-input model's array also feeds the timing) and ``--batch-size``
(each input's first dimension): the file is read again at those shapes (``tflite_at``), every dimension
the file leaves open (-1 in its ``shape_signature``) resolved, a fixed one that differs refused by name.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading.preflight import LoadedModel, not_loadable

SAVE_HINT = "write the file with tf.lite.TFLiteConverter (or ai_edge_torch / LiteRT's converters)"


def load_tflite_file(spec: str, path: Path) -> LoadedModel:
    """A ``.tflite`` file, read (``framework='tflite'``), or a ``UsageError`` saying why not."""
    try:
        from deeplite_like.backends.tflite.graph import load_model
        from deeplite_like.backends.tflite.graph import import_litert

        import_litert()
    except ImportError as exc:
        raise UsageError(f"{spec!r}: {exc}", "install it with: pip install 'deeplite-like[tflite]'") from None
    try:
        model = load_model(path)
    except (ValueError, OSError) as exc:
        raise not_loadable(spec, path, "TFLite", exc, SAVE_HINT) from None
    return LoadedModel(spec, path.name, "tflite", model)  # the name keeps .tflite: a compare reads clearly


def tflite_inputs(loaded: LoadedModel, shapes: Sequence[tuple[int, ...]]) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of shapes: ``--input-shape NAME=SHAPE`` by input name, else in input order; none given,
    the file's stored shapes (``()``, ``{}``). Names are checked against the file's inputs."""
    names = [getattr(shape, "name", None) for shape in shapes]
    if not shapes:
        return (), {}
    if not any(names):
        return tuple(tuple(shape) for shape in shapes), {}
    if not all(names):
        raise UsageError("--input-shape: name every input (NAME=SHAPE) or none", "e.g. --input-shape x=1x32x32x1")
    inputs = [t.name for t in loaded.model.inputs]
    for name in names:
        if name not in inputs:
            raise UsageError(f"--input-shape {name}=...: {loaded.spec!r} has no input named {name!r}",
                             f"its inputs are: {', '.join(inputs)}")
    return (), {name: tuple(shape) for name, shape in zip(names, shapes)}


def tflite_at(loaded: LoadedModel, inputs: tuple[tuple, dict], batch_size: int | None) -> LoadedModel:
    """``loaded`` read at the shapes of ``inputs`` (shapes, or arrays from ``--inputs``) and ``--batch-size``
    (each input's first dimension), through ``backends.tflite.resize_inputs``; the file's stored shapes
    when neither is given. A shape the file does not allow is a ``UsageError`` naming the input."""
    from deeplite_like.backends.tflite.graph import resize_inputs

    args, kwargs = inputs
    if not args and not kwargs and batch_size is None:
        return loaded
    if batch_size is not None and any(not isinstance(v, tuple) for v in (*args, *kwargs.values())):
        raise UsageError("--batch-size with --inputs: the arrays fix the batch", "drop one of them")
    shape = lambda value: tuple(int(v) for v in (value if isinstance(value, tuple) else value.shape))  # noqa: E731
    given: Any = {name: shape(v) for name, v in kwargs.items()} if kwargs else [shape(v) for v in args]
    if not args and not kwargs:
        given = [t.shape for t in loaded.model.inputs]
    if batch_size is not None:
        batched = lambda s: (batch_size, *s[1:]) if s else s  # noqa: E731
        given = {k: batched(v) for k, v in given.items()} if isinstance(given, dict) else [batched(s) for s in given]
    try:
        model = resize_inputs(loaded.model, given)
    except ValueError as exc:
        raise UsageError(f"{loaded.spec!r}: {exc}", "give a shape the file allows: only its -1 dimensions may change "
                         "(convert with a None batch dimension to leave the batch open)") from None
    return dataclasses.replace(loaded, model=model)
