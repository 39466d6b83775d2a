"""Leave the user's Keras model as it was found: the one guard around every run of the model.

Profiling calls the model with ``training=False`` by default, traces it in a ``tf.function``
that is never stored on the model (``predict_on_batch`` is not used: it would cache a
``predict_function`` on the model), and reads its weights; none of that changes the model
or its compiled state (tested in ``tests/keras/test_profiler.py`` and
``tests/keras/test_count_safety.py``). ``preserved_model_state`` is the guard around every
run anyway: it snapshots what a run could touch and puts it back in ``finally`` (also when
the run raises):

* every layer's ``trainable`` flag (and so each variable's ``trainable``);
* every layer's list of added losses (activity regularisers add to it on each call);
* the values of every variable, trainable or not, in any mode (``restore_values=False`` skips
  it): batch-norm moving statistics and dropout seed states (they advance in training mode),
  RNN states (stateful RNNs advance in any mode), a layer's own counters or caches
  (``assign_add`` in ``call`` runs in inference too), and a trainable weight a ``call`` writes.
  Values are copied and compared with ``keras.ops`` on the backend's own tensors (no round trip
  through NumPy) and written back only where the run changed them; the copy holds one copy of
  the model's weights for the duration of the run.

The restore runs to its end whatever interrupts it (Ctrl-C is raised after it), and threads
measuring the same model take turns (``deeplite_like.safety``).

Keras is imported on first use (the counting engine, whose package imports no framework,
uses this guard too).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.safety import (checkpoint, interrupt_guard, model_lock, protected, restore_all,
                                  restore_each, uninterruptible)

__all__ = ["preserved_model_state"]


@contextlib.contextmanager
@protected
def preserved_model_state(model: Any, restore_values: bool = True) -> Iterator[Any]:
    """Snapshot ``model``'s flags, losses and non-trainable values, yield the model, restore on exit."""
    keras = import_keras()
    if not isinstance(model, keras.layers.Layer):
        raise TypeError(f"preserved_model_state expects a Keras model or layer, got {type(model).__name__}")
    ops = keras.ops
    layers = list(model._flatten_layers(include_self=True, recursive=True))
    with interrupt_guard(), model_lock(layers):  # Ctrl-C never half-restores; one thread at a time
        flags = [(layer, layer.trainable) for layer in layers]
        losses = [(layer, list(layer._losses)) for layer in layers
                  if isinstance(getattr(layer, "_losses", None), list)]
        values = [(v, ops.copy(v.value)) for v in model.variables] if restore_values else []

        def put_back(entry: tuple[Any, Any]) -> None:
            variable, before = entry
            now = variable.value
            if tuple(now.shape) != tuple(before.shape) or not bool(ops.all(ops.equal(now, before))):
                variable.assign(before)

        try:
            checkpoint()  # (an interrupt held during the set-up is raised here)
            yield model
        finally:
            with uninterruptible():
                restore_all(lambda: restore_each([(layer, t) for layer, t in flags if layer.trainable != t],
                                                 lambda entry: setattr(entry[0], "trainable", entry[1])),
                            lambda: restore_each(losses, lambda e: e[0]._losses.__setitem__(slice(None), e[1])),
                            lambda: restore_each(values, put_back))
