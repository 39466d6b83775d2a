"""Keras models from ``keras.applications`` and from ``.keras`` files.

``keras.applications.NAME(weights=None)`` builds the architecture with random weights (no
download). A ``.keras`` file is loaded with ``keras.saving.load_model(path, safe_mode=True)``,
which refuses to deserialise Python lambdas (code) from the file.

Imports keras only when one of these forms is used.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from deeplite_like.commands.errors import UsageError
from deeplite_like.commands.loading import LoadedModel, require_framework


def _keras(spec: str) -> Any:
    require_framework("keras", spec)
    import keras

    return keras


def keras_input_shapes(model: Any) -> list[tuple[int, ...]] | None:
    """The model's input shapes with an unknown batch axis set to 1; ``None`` if any other axis is unknown."""
    try:
        shapes = model.input_shape
    except (AttributeError, ValueError):  # a subclassed model that was never built has no input shape
        return None
    if isinstance(shapes, tuple) and (not shapes or not isinstance(shapes[0], (tuple, list))):
        shapes = [shapes]
    result = []
    for shape in shapes:
        dims = [1 if i == 0 and d is None else d for i, d in enumerate(shape)]
        if any(d is None for d in dims):
            return None
        result.append(tuple(int(d) for d in dims))
    return result


def load_keras_application(spec: str, name: str, model_args: tuple[tuple, dict]) -> LoadedModel:
    """``keras.applications.NAME(weights=None, **kwargs)``."""
    keras = _keras(spec)
    available = sorted(n for n in dir(keras.applications) if n[:1].isupper())
    if name not in available:
        close = difflib.get_close_matches(name, available, n=3)
        raise UsageError(f"{spec!r}: keras.applications has no model named {name!r}",
                         f"did you mean {', '.join(close)}?" if close else f"available: {', '.join(available)}")
    args, kwargs = model_args
    if args:
        raise UsageError(f"{spec!r}: keras.applications models take keyword --model-args only (a JSON object)",
                         'e.g. --model-args \'{"input_shape": [96, 96, 3]}\'')
    if kwargs.get("weights") is not None:
        raise UsageError(f"{spec!r}: weights are never downloaded; the model is built with random weights",
                         "drop 'weights' from --model-args")
    kwargs = {**kwargs, "weights": None}
    try:
        model = getattr(keras.applications, name)(**kwargs)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{spec!r}: {exc}", "fix --model-args") from None
    loaded = LoadedModel(spec, name, "keras", model, input_shapes=keras_input_shapes(model))
    loaded.notes.append("random weights (nothing downloaded)")
    return loaded


def load_keras_file(spec: str, path: Path) -> LoadedModel:
    """A saved ``.keras`` model, loaded in Keras' safe mode."""
    keras = _keras(spec)
    try:
        model = keras.saving.load_model(str(path), safe_mode=True)
    except ValueError as exc:
        raise UsageError(f"cannot load {spec!r} as a Keras model: {str(exc).splitlines()[0][:300]}",
                         "a model with custom layers must register them (keras.saving.register_keras_serializable); "
                         "or use its factory: deeplite-like profile models.py:build") from None
    return LoadedModel(spec, path.stem, "keras", model, input_shapes=keras_input_shapes(model))
