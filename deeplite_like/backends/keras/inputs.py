"""Model inputs for a Keras profiling run: taken from a data split, resized, called safely.

A Keras model takes *one* input structure (``model(x)``, ``model([a, b])``,
``model({"ids": ..., "mask": ...})``). The ``ForwardPass`` gives ``(args, kwargs)``; they
become that structure this way:

* one positional input -> that input, as it is (an array, a list or a dict of arrays);
* several positional inputs -> a list ``[a, b]`` (a functional model with several inputs);
* keyword inputs only -> a dict ``{name: x}`` (a functional model with named inputs).

NumPy arrays are converted to backend tensors (``keras.ops.convert_to_tensor``, same dtype)
so that every run feeds the model what ``model.predict`` would.

``naming_failures`` runs a call of the model recording (with the counting engine's
``LayerRecorder``, model-scoped) only where an exception comes from, and adds a note naming
the innermost layer that failed and the shapes it was given.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from deeplite_like.argument_checks import check_batch_agrees, check_batch_size
from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.counting.inputs import model_input_tensors
from deeplite_like.backends.keras.counting.recorder import CallRecord, LayerRecorder, named_layers
from deeplite_like.backends.keras.counting.specs import SpecMaker, shapes_text
from deeplite_like.backends.keras.tensors import batch_size_of, format_shapes, shape_of, tensor_leaves, to_backend
from deeplite_like.data import DataError, ForwardPass

keras = import_keras()

__all__ = ["add_failure_note", "as_model_input", "call_model", "check_mode", "model_inputs", "naming_failures",
           "require_batch_size", "resolve_split", "to_backend"]


def _shapes(tree: Any) -> str:
    return format_shapes(shape_of(t) for t in tensor_leaves(tree))


def resolve_split(data_splits: Mapping[str, Any], split: str | None) -> str:
    """``split`` if given; else ``'test'`` when present, else the first split."""
    if split is not None:
        return split
    if not isinstance(data_splits, Mapping) or not data_splits:
        raise DataError("this profiler has no data splits to take model inputs from; pass "
                        "data_splits={'test': [batch, ...]} or use KerasProfiler.from_inputs(model, example)")
    return "test" if "test" in data_splits else next(iter(data_splits))


def as_model_input(args: tuple, kwargs: Mapping[str, Any]) -> Any:
    """The one input structure of a Keras model call (see the module docstring)."""
    if args and kwargs:
        raise DataError(f"a Keras model takes one input structure, but the forward pass gave positional inputs "
                        f"{_shapes(args)} and keyword inputs {sorted(kwargs)}; use ForwardPass(inputs=...) "
                        "with positions only (a list of inputs) or keys only (a dict of inputs)")
    if kwargs:
        return dict(kwargs)
    if not args:
        raise DataError("the forward pass gave no model input")
    return args[0] if len(args) == 1 else list(args)


def model_inputs(data_splits: Mapping[str, Any], forward_pass: ForwardPass, split: str | None,
                 batch_size: int | None) -> Any:
    """The model input of the first batch of ``split``, resized to ``batch_size`` samples, as tensors."""
    split = resolve_split(data_splits, split)
    args, kwargs = forward_pass.inputs_for(data_splits, split, batch_size=batch_size)
    return to_backend(as_model_input(tuple(args), dict(kwargs)))


def require_batch_size(inputs: Any, batch_size: int | None, api: str = "") -> int:
    """``batch_size``, else the leading dimension of the first input tensor; an error when neither is known.

    A ``batch_size`` given must be an int >= 1 and a dimension of some input (``check_batch_agrees``):
    it labels the figures (per-sample peak, throughput).
    """
    if batch_size is not None:
        batch_size = check_batch_size(batch_size, "batch_size", api)
        shapes = [tuple(-1 if d is None else d for d in shape_of(t)) for t in tensor_leaves(inputs)]
        check_batch_agrees(batch_size, shapes, api or "batch_size")
    else:
        batch_size = batch_size_of(inputs)
    if not batch_size or batch_size < 1:
        raise ValueError(f"cannot tell the batch size of the inputs (shapes: {_shapes(inputs) or 'no tensors'}): "
                         "pass batch_size=... explicitly")
    return int(batch_size)


def check_mode(mode: str) -> bool:
    """``'eval'`` -> ``training=False``, ``'train'`` -> ``training=True`` (the PyTorch backend's names)."""
    if mode not in ("eval", "train"):
        raise ValueError(f"mode must be 'eval' or 'train', got {mode!r}")
    return mode == "train"


@contextmanager
def naming_failures(model: keras.layers.Layer, inputs: Any) -> Iterator[LayerRecorder]:
    """Run the body recording where exceptions come from; an exception gets a note naming the failing layer."""
    specs = SpecMaker(keras)
    recorder = LayerRecorder(named_layers(model), specs.tree, specs.is_keras_tensor, keep_records=False)
    try:
        with recorder:
            yield recorder
    except Exception as error:
        add_failure_note(model, inputs, error, recorder)
        raise


def add_failure_note(model: keras.layers.Layer, inputs: Any, error: Exception,
                     recorder: LayerRecorder | None) -> Exception:
    """Note on ``error`` which layer failed (``recorder.failed_record``), on what, and what the model expects.

    Returns ``error`` (the counting engine's ``run_recorded`` then re-raises it as it is).
    """
    record = recorder.failed_record(error) if recorder is not None else None
    where = f"{_failure_site(record)}; " if record is not None else ""
    error.add_note(f"({where}model {model.name!r} was given inputs {_shapes(inputs) or 'none'}"
                   f"{_expected_shapes(model)}. Check the data split's shapes and layout: Keras layers are "
                   "channels-last unless configured otherwise)")
    return error


def _failure_site(record: CallRecord) -> str:
    """``"while calling layer 'block.fc' (Dense) on input shapes 2x9"``."""
    which = f"layer {record.path!r}" if record.path else f"the model {record.layer.name!r} itself"
    return (f"while calling {which} ({type(record.layer).__name__}) "
            f"on input shapes {shapes_text((record.args, record.kwargs)) or 'none'}")


def _expected_shapes(model: keras.layers.Layer) -> str:
    shapes = [tuple(t.shape) for t in model_input_tensors(model)]  # functional / built Sequential models only
    if not shapes:
        return ""
    return f", it expects {shapes[0] if len(shapes) == 1 else shapes}"


def call_model(model: keras.layers.Layer, inputs: Any, training: bool = False) -> Any:
    """``model(inputs, training=training)``; an exception is re-raised with the failing layer named."""
    with naming_failures(model, inputs):
        return model(inputs, training=training)
