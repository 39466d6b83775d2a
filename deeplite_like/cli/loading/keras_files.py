"""Keras models from ``keras.applications`` and from ``.keras`` files.

``keras.applications.NAME(weights=None)`` builds the architecture with random weights (no
download). A ``.keras`` file is loaded with ``keras.saving.load_model(path, safe_mode=True)``,
which refuses to deserialise Python lambdas (code) from the file; a file that is not a zip
archive is refused before Keras reads it (Keras would call it "not found").

Imports keras only when one of these forms is used.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading.preflight import (ZIP, LoadedModel, describe, kind_of, require_framework,
                                                 require_known_model)


SAVE_HINT = ("save the model again with model.save('model.keras'), or profile its factory: "
             "deeplite-like profile models.py:build")


def _keras(spec: str) -> Any:
    require_framework("keras", spec)
    from deeplite_like.backends.keras._tf import import_keras

    return import_keras()


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
    require_known_model(spec, name, available, "keras.applications", f"available: {', '.join(available)}")
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
    kind = kind_of(path)
    if kind != ZIP:  # keras says "File not found" of a file that exists but is not a zip archive
        raise UsageError(f"{spec!r} is not a Keras model file: it is {describe(kind)}, and model.save writes a .keras "
                         "file as a zip archive (the file is corrupt, truncated or of another kind)", SAVE_HINT)
    keras = _keras(spec)
    try:
        model = keras.saving.load_model(str(path), safe_mode=True)
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "safe_mode" in str(exc) or "arbitrary code" in str(exc):
            raise UsageError(f"{spec!r} holds Python code (such as a Lambda layer's function), which Keras would "
                             f"run to load it; deeplite-like loads .keras files with safe_mode=True and refuses: "
                             f"{first.split(' If you trust')[0][:300]}",
                             "rebuild the model from its code: deeplite-like profile models.py:build, or replace the "
                             "Lambda layer by a registered custom layer") from None
        raise UsageError(f"cannot load {spec!r} as a Keras model: {first[:300]}",
                         "a model with custom layers must register them (keras.saving.register_keras_serializable); "
                         "or use its factory: deeplite-like profile models.py:build") from None
    except Exception as exc:  # a damaged archive: KeyError, BadZipFile, JSON errors... from inside keras
        raise UsageError(f"{spec!r} is a corrupt Keras model file: {type(exc).__name__}: "
                         f"{str(exc).strip()[:200]}", SAVE_HINT) from None
    return LoadedModel(spec, path.stem, "keras", model, input_shapes=keras_input_shapes(model))
