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

import re
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import numpy as np

from deeplite_like.errors import check_batch_agrees, check_batch_size
from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.counting.recorder import (CallRecord, LayerRecorder, SpecMaker, named_layers,
                                                            shapes_text)
from deeplite_like.backends.keras.tensors import (batch_size_of, format_shapes, model_input_tensors, shape_of,
                                                  tensor_leaves, to_backend)
from deeplite_like.data import DataError, ForwardPass, Inputs
from deeplite_like.device import Device
from deeplite_like.data.loaders import DataLoader as LoaderBase, TensorInfo, TensorSampler

keras = import_keras()

__all__ = [
    "TFDataLoader", "TFForwardPass", "TFTensorSampler", "add_batch_axis", "add_failure_note", "as_model_input",
    "call_model", "check_mode", "model_inputs", "naming_failures", "require_batch_size", "resolve_split",
    "to_backend", "without_contents"
]


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
                 batch_size: int | None, model: keras.layers.Layer | None = None) -> Any:
    """The model input of the first batch of ``split``, resized to ``batch_size`` samples, as tensors.

    Given the ``model``, a batch that is one sample without its batch axis gets one first
    (``add_batch_axis``), so ``batch_size`` samples are taken from the right axis.
    """
    split = resolve_split(data_splits, split)
    adjust = (lambda a, k: add_batch_axis(model, a, k)[:2]) if model is not None else None
    args, kwargs = forward_pass.inputs_for(data_splits, split, batch_size=batch_size, adjust=adjust)
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


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# A printed array or tensor: brackets around numbers only, long enough to be data rather than a shape.
_PRINTED_VALUES = re.compile(r"\[[\[\]\s0-9eE.,+\-]{24,}\]")


def without_contents(text: str) -> str:
    """``text`` with terminal colour codes removed and printed tensor values replaced by ``[...]``."""
    return _PRINTED_VALUES.sub("[...]", _ANSI.sub("", text))


def _drop_contents(error: Exception) -> None:
    """Rewrite ``error``'s message in place (its type and traceback kept) when it prints tensor values.

    Keras puts the whole offending input, colour codes included, in some messages ("Invalid
    input shape for input [[0.1 ...]]"): a 224x224x3 image is 150,528 numbers. Errors here
    name shapes, never contents.
    """
    args = getattr(error, "args", ())
    cleaned = tuple(without_contents(a) if isinstance(a, str) else a for a in args)
    if cleaned != args:
        error.args = cleaned


def add_batch_axis(model: keras.layers.Layer, args: tuple, kwargs: Mapping[str, Any]) -> tuple[tuple, dict, bool]:
    """``(args, kwargs, added)``: each positional input one rank short of the model's declared input
    gets a leading batch axis of 1 (an unbatched sample, as deeplite's TensorFlow helpers accepted).

    Known only for a model that declares its inputs (functional, or a built ``Sequential``);
    keyword inputs and undeclared models pass unchanged.
    """
    declared = model_input_tensors(model)
    if not args or kwargs or len(declared) != len(args):
        return tuple(args), dict(kwargs), False
    added = False
    batched = []
    for x, spec in zip(args, declared):
        shape = shape_of(x) if tensor_leaves(x) == [x] else None
        if shape is not None and len(shape) == len(spec.shape) - 1:
            x = x[None] if isinstance(x, np.ndarray) else keras.ops.expand_dims(x, 0)
            added = True
        batched.append(x)
    return tuple(batched), dict(kwargs), added


def add_failure_note(model: keras.layers.Layer, inputs: Any, error: Exception,
                     recorder: LayerRecorder | None) -> Exception:
    """Note on ``error`` which layer failed (``recorder.failed_record``), on what, and what the model expects.

    Printed tensor values are removed from its message (``without_contents``). Returns ``error``
    (the counting engine's ``run_recorded`` then re-raises it as it is).
    """
    _drop_contents(error)
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


# -- deeplite-profiler's TensorFlow data-loader classes ----------------------------------------
class TFTensorSampler(TensorSampler):
    """deeplite's ``TFTensorSampler``: describes tensors as NumPy arrays.

    As in deeplite, a 4-D array is taken as a batch of images (its first axis stripped from
    the per-sample shape) and any other as one sample.
    """

    def _standardize_tensor(self, x: Any) -> np.ndarray:
        if isinstance(x, np.ndarray):
            return x
        if tensor_leaves(x) == [x]:  # a backend tensor (TensorFlow, JAX, torch)
            return np.asarray(keras.ops.convert_to_numpy(x))
        raise ValueError(f"TFTensorSampler: {type(x).__name__} is not a tensor or a NumPy array")

    def _create_random_tensor(self, x_info: TensorInfo, batch_size: int) -> np.ndarray:
        if np.issubdtype(x_info.dtype, np.complexfloating):
            raise RuntimeError(f"TFTensorSampler makes no random {x_info.dtype} tensors (complex numbers)")
        return np.random.rand(batch_size, *x_info.shp).astype(np.float32)

    def _get_info(self, x: np.ndarray) -> tuple[tuple, Any]:
        return (tuple(x.shape[1:]) if x.ndim == 4 else tuple(x.shape)), x.dtype

    def to_device(self, tensors_tuple: tuple, device: Any, standardize: bool = True) -> tuple:
        """The tensors as NumPy arrays (Keras places the computation; ``device`` is checked, as a name)."""
        Device(device)
        return self.standardize_tensors(tensors_tuple) if standardize else tuple(tensors_tuple)


class TFForwardPass(ForwardPass):
    """deeplite's ``TFForwardPass``: ``model_call`` feeds NumPy / backend tensors with ``training=False``.

    A sample without its batch axis gets one (``add_batch_axis``). Unlike deeplite's, it returns
    the model's output alone, not ``(output, seconds)``: time with the profiler.
    """

    @property
    def _tensor_sampler_cls(self) -> type[TFTensorSampler]:
        return TFTensorSampler

    def model_call(self, model: Any, x: Any, device: Any = None, training: bool = False) -> Any:
        if not self.expecting_common_inputs:
            raise TypeError(f"{type(self).__name__}.model_call: with expecting_common_inputs=False, define model_call "
                            "in the subclass (the default feeds tensors, or tuples / lists / dicts of tensors)")
        if not isinstance(model, keras.layers.Layer):
            raise TypeError(f"{type(self).__name__}.model_call: the model must be a Keras model, got "
                            f"{type(model).__name__}")
        Device(device if device is not None else "cpu")
        inputs = x if isinstance(x, Inputs) else Inputs(x if isinstance(x, (tuple, list)) else (x,))
        args, kwargs, _ = add_batch_axis(model, inputs.args, inputs.kwargs)
        return call_model(model, to_backend(as_model_input(args, kwargs)), training=training)


class TFDataLoader(LoaderBase):
    """deeplite's ``TFDataLoader``: wraps a ``tf.data.Dataset`` or any iterable of batches."""

    def dump_native_info(self) -> None:
        return None

    def load_native_info(self, native_state: Any) -> "TFDataLoader":
        return self

    def __len__(self) -> int:
        try:
            return len(self.native_dl)
        except TypeError:
            return sum(1 for _ in self.native_dl)

    def _create_iter(self) -> Any:
        return iter(self.native_dl)

    @property
    def batch_size(self) -> int:
        """The leading dimension of the first batch's first tensor."""
        first = next(iter(self.native_dl))
        size = batch_size_of(first[0] if isinstance(first, (tuple, list)) else first)
        if size is None:
            raise TypeError(f"TFDataLoader.batch_size: the first batch of {type(self.native_dl).__name__} has no "
                            "tensor with a batch axis")
        return size
