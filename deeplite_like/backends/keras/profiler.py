"""``KerasProfiler``: the core ``Profiler`` with every built-in metric of the Keras 3 backend."""
from __future__ import annotations

from typing import Any, Mapping

from deeplite_like.argument_checks import check_profiler_options
from deeplite_like.backends.keras import data as _keras_data
from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.functions import DEFAULT_FUNCTIONS
from deeplite_like.caller import caller
from deeplite_like.data import ForwardPass, Inputs, as_forward_pass
from deeplite_like.loaders import carried_forward_pass
from deeplite_like.profiler import Profiler
from deeplite_like.threads import check_num_threads

keras = import_keras()


class KerasProfiler(Profiler):
    """Profiles a Keras 3 model (TensorFlow or torch backend, read from ``keras.config.backend()``).

    Args:
        model: a ``keras.Model`` (or layer); it is never modified (trainable flags, weights and
            compiled state are left as found).
        data_splits: split name -> batches: a batched ``tf.data.Dataset``, a
            ``keras.utils.PyDataset``, a list of ``(x, y)`` batches, a generator function, or
            whole arrays as a tuple ``(x, y)`` / a single array (served in batches of
            ``array_batch_size``; see ``deeplite_like.backends.keras.data``).
        name: shown in reports.
        forward_pass: which parts of a batch are the model's inputs (default: the one carried by
            splits from ``enable_forward_pass_data_splits``, else ``x`` of ``(x, y)``).
        register_defaults: register every built-in ``Compute*`` function (default ``True``).
        array_batch_size: batch size of whole-array splits (default 32, as Keras' ``fit``).

    Options of ``compute_network_status`` (the PyTorch backend's names): ``batch_size``
    (default 1), ``split``, ``mode`` (``'eval'``: ``training=False``), ``method`` (counting
    method of ``count_ops``), ``causal_half``, ``device``, ``min_run_time``, ``num_threads``,
    ``include_weights`` (default ``True``: the memory footprint includes the weights and state).
    """

    backend_name = "keras"

    def __init__(self, model: Any, data_splits: Mapping[str, Any] | None = None, name: str = "model",
                 forward_pass: ForwardPass | None = None, register_defaults: bool = True,
                 array_batch_size: int = 32) -> None:
        if not isinstance(model, keras.layers.Layer):
            raise TypeError(f"KerasProfiler needs a Keras 3 model (keras.Model or keras.layers.Layer), got "
                            f"{type(model).__module__}.{type(model).__qualname__}; for a torch.nn.Module use "
                            "TorchProfiler, or deeplite_like.profiler_for(model, ...) to pick the backend")
        super().__init__(model, _keras_data.normalise_splits(data_splits, array_batch_size), name)
        self.array_batch_size = array_batch_size
        # splits from enable_forward_pass_data_splits carry their ForwardPass (deeplite-profiler's way)
        self.forward_pass = as_forward_pass(forward_pass or carried_forward_pass(data_splits), "KerasProfiler")
        self.keras_backend = keras.config.backend()
        if register_defaults:
            for function in DEFAULT_FUNCTIONS:
                self.register_default_function(function())

    @classmethod
    def from_inputs(cls, model: Any, *example: Any, name: str = "model", **kwargs: Any) -> "KerasProfiler":
        """A profiler whose only split, ``'test'``, is one batch of the given example input(s).

        Several example inputs are the model's several inputs (``model([a, b])``); one dict is
        the model's named inputs, passed as one structure (``model({"a": x, "b": y})``).
        """
        if not example:
            raise ValueError("from_inputs needs at least one example input (an array or tensor)")
        batch = example[0] if len(example) == 1 else tuple(example)
        if len(example) > 1:
            forward_pass = ForwardPass(inputs=tuple(range(len(example))))
        elif isinstance(batch, Mapping):
            forward_pass = ForwardPass(extract=lambda b: Inputs(args=(b,)))  # the dict is the one input
        else:
            forward_pass = ForwardPass(extract=lambda b: b)
        return cls(model, {"test": [batch]}, name=name, forward_pass=forward_pass, **kwargs)

    def _post_clone(self, original: "KerasProfiler") -> None:
        """A clone given new whole-array splits serves them in batches too."""
        self.data_splits = _keras_data.normalise_splits(self.data_splits, self.array_batch_size)

    def _check_options(self, kwargs: Mapping[str, Any]) -> None:
        check_profiler_options(kwargs, caller("compute_network_status"))
        check_num_threads(kwargs.get("num_threads"))
        if kwargs.get("device") is None:
            return
        if self.keras_backend == "torch":
            from deeplite_like.backends.torch.placement import checked_device

            checked_device(kwargs["device"])
        elif self.keras_backend == "tensorflow":
            from deeplite_like.backends.keras.timing import tensorflow_device

            tensorflow_device(kwargs["device"])

    def context(self) -> dict[str, Any]:
        return {**super().context(), "forward_pass": self.forward_pass}


TFProfiler = KerasProfiler  # deeplite-profiler's name for its TensorFlow Keras profiler
