"""``.tflite`` files on the command line: read by the backend's one loader (LiteRT's schema reader), no code and
no custom-op library ever loaded; a file that is not one is a usage error naming it, never a traceback.
The file's stored input shapes are used (``--input-shape`` / ``--inputs`` are refused for now).
"""
from __future__ import annotations

from pathlib import Path

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


def refuse_tflite_inputs(loaded: LoadedModel, shapes: list | None, inputs_file: str | None) -> tuple[tuple, dict]:
    """TFLite files run at their stored input shapes: ``--input-shape`` / ``--inputs`` are refused, naming them."""
    if inputs_file is not None or shapes:
        stored = ", ".join(f"{t.name} {'x'.join(map(str, t.shape))}" for t in loaded.model.inputs)
        raise UsageError(f"{loaded.spec!r}: --input-shape and --inputs are not read for TFLite files yet; "
                         f"the file's stored inputs are used ({stored})", "drop --input-shape / --inputs")
    return (), {}
