"""Per-layer summary of a Keras model: one row per layer with shapes, params, MACs, FLOPs, bytes.

Facts come from one recorded forward pass (the counting engine's ``run_recorded``): its
records are priced exactly as ``count_ops`` prices them, and the same records give each
layer's input and output shapes and output bytes (first call) and its number of calls. Rows
and counts are keyed by the same qualified layer names (``counting.recorder.named_layers``),
so they cannot disagree. The rendering is a ``TableReport`` with the same columns as the
PyTorch backend's.
"""
from __future__ import annotations

from typing import Any

from deeplite_like.backends.keras._tf import import_keras
from deeplite_like.backends.keras.counting.engine import Observation, observe, warn_if_untracked
from deeplite_like.backends.keras.counting.inputs import prepare_inputs
from deeplite_like.backends.keras.counting.recorder import CallRecord
from deeplite_like.backends.keras.counting.specs import shapes_text, spec_bytes
from deeplite_like.backends.keras.inputs import add_failure_note
from deeplite_like.backends.keras.params import params_by_layer
from deeplite_like.reports import TableReport
from deeplite_like.units import format_bytes, format_share

keras = import_keras()

__all__ = ["COLUMNS", "HEADERS", "layerwise_summary"]

COLUMNS = ("module", "type", "input_shapes", "output_shapes", "params", "macs", "flops", "activation_bytes",
           "macs_share", "calls")
HEADERS = {"module": "Layer", "type": "Type", "input_shapes": "Input shapes", "output_shapes": "Output shapes",
           "params": "Params", "macs": "MACs", "flops": "FLOPs", "activation_bytes": "Output bytes",
           "macs_share": "MACs %", "calls": "Calls"}


def layerwise_summary(model: keras.layers.Layer, inputs: Any, training: bool = False, causal_half: bool = False,
                      max_depth: int | None = None) -> TableReport:
    """A ``TableReport`` with one row per layer that ran (a nested model's row includes its layers).

    ``input_shapes`` are the tensors the layer's ``call`` received (a mask Keras passes
    included), ``activation_bytes`` the size of its output tensors (first call); ``macs_share``
    is the layer's MACs over the whole model's, in percent. ``module`` is the qualified layer
    name as in the torch backend (``""`` for the model, shown as ``(model)``);
    ``max_depth`` hides deeper layers (their cost stays in their parents). The counts are
    ``count_ops``' analytic ones: its ``method='graph'`` has no per-layer breakdown. A failing
    forward raises its own exception, with a note naming the layer that failed.
    """
    inputs, batch = prepare_inputs(model, inputs, None, keras)
    seen = observe(model, inputs, batch, training=bool(training), causal_half=bool(causal_half),
                   on_failure=lambda error, rec: add_failure_note(model, inputs, error, rec))
    warn_if_untracked(seen.counts, stacklevel=2)
    return layer_table(model, seen, max_depth)


def layer_table(model: keras.layers.Layer, seen: Observation, max_depth: int | None = None) -> TableReport:
    """The per-layer table of one observation of ``model`` (``layerwise_summary``)."""
    recorder, counted, batch = seen.recorder, seen.counts, seen.counts.batch_size
    first: dict[str, CallRecord] = {}  # path -> first finished call, in call order (a parent before its layers)
    calls: dict[str, int] = {}
    for record in recorder.records:
        if record.finished:
            first.setdefault(record.path, record)
            calls[record.path] = calls.get(record.path, 0) + 1
    params = params_by_layer(model)
    position = {path: index for index, path in enumerate(first)}
    layers = [(path, layer) for path, layer in recorder.layers if isinstance(layer, keras.layers.Layer)]
    total_macs = counted.macs
    rows = []
    # Rows in call order; layers that did not run last.
    for name, layer in sorted(layers, key=lambda item: (position.get(item[0], len(position)), item[0])):
        record = first.get(name)
        stats = counted.by_module.get(name)
        if record is None and stats is None:
            continue  # never ran (an InputLayer)
        depth = 0 if name == "" else name.count(".") + 1
        if max_depth is not None and depth > max_depth:
            continue
        macs = stats.macs if stats else 0
        rows.append({
            "module": name,
            "type": type(layer).__name__,
            "input_shapes": shapes_text((record.args, record.kwargs)) if record else "",
            "output_shapes": shapes_text(record.outputs) if record else "",
            "params": params.get(id(layer), 0),
            "macs": macs,
            "flops": stats.flops if stats else 0,
            "activation_bytes": spec_bytes(record.outputs) if record else 0,
            "macs_share": 100.0 * macs / total_macs if total_macs else 0.0,
            "calls": stats.calls if stats else calls.get(name, 0),
        })
    notes = [f"batch size {batch}; MACs and FLOPs of a layer include its sublayers'" if batch else
             "MACs and FLOPs of a layer include its sublayers'"]
    if counted.untracked:
        notes.append("untracked (counted 0): " + ", ".join(f"{k} x{v}" for k, v in counted.untracked.items()))
    formatters = {"module": lambda v: v or "(model)", "params": lambda v: f"{v:,}", "macs": lambda v: f"{v:,}", "flops": lambda v: f"{v:,}",
                  "activation_bytes": format_bytes, "macs_share": format_share}
    return TableReport(f"Per-layer summary: {type(model).__name__} {model.name!r}", COLUMNS, rows,
                       formatters=formatters, headers=HEADERS, notes=notes)
