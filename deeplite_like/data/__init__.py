"""Data binding: from a user's ``data_splits`` to the inputs of one forward pass (no framework imports).

* ``adapters``: tensors of any framework through one ``TensorAdapter`` each, the one
  ``describe`` of a batch that every error message uses, and ``data_splits`` (split name ->
  iterable of batches), checked, one-shot iterators refused;
* ``forward_pass``: ``ForwardPass``, which parts of a batch are the model's inputs, resized to
  a batch size by taking real samples;
* ``loaders``: deeplite-profiler's data-loader layer (``DataLoader``, ``TensorSampler``...), for
  code written against it.
"""
from deeplite_like.data.adapters import (NumpyAdapter, TensorAdapter, _type_names, adapter_for, cyclic_indices,
                                         describe, first_batch, format_shape, iter_batches, register_adapter,
                                         register_split_check, split_loader)
from deeplite_like.data.forward_pass import ForwardPass, ForwardPassSplits, Inputs, ModelInputPattern, as_forward_pass
from deeplite_like.errors import DataError

__all__ = [
    "DataError",
    "ForwardPass",
    "ForwardPassSplits",
    "Inputs",
    "ModelInputPattern",
    "NumpyAdapter",
    "TensorAdapter",
    "adapter_for",
    "as_forward_pass",
    "describe",
    "first_batch",
    "iter_batches",
    "register_adapter",
    "register_split_check",
    "split_loader",
]
