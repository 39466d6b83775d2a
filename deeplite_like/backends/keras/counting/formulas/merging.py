"""Merge layers, per OUTPUT element (broadcasting is priced as it runs), n = number of inputs::

    Add, Multiply, Maximum, Minimum   (n - 1) per output element
    Subtract                          1 per output element
    Average                           (n - 1) adds + 1 divide = n per output element
    Concatenate                       free (a copy)
    Dot                               numel(out) * contracted size MACs (a batched dot);
                                      ``normalize=True`` adds an L2 normalisation of each input
                                      (3N + R, as UnitNormalization)
"""
from __future__ import annotations

from ..registry import Cost, LayerCall, register_free_layer, register_layer_formula
from ._common import float_elements, per_output_element


@register_layer_formula("keras.layers.Add", "keras.layers.Multiply", "keras.layers.Maximum",
                        "keras.layers.Minimum")
def reduce_inputs(call: LayerCall) -> Cost:
    """(n - 1) FLOPs per output element for n inputs."""
    return Cost.elementwise((len(call.inputs) - 1) * float_elements(call.output))


register_layer_formula("keras.layers.Subtract")(per_output_element(1, "subtract", "1 FLOP per output element."))


@register_layer_formula("keras.layers.Average")
def average(call: LayerCall) -> Cost:
    """n FLOPs per output element ((n - 1) adds, one divide)."""
    return Cost.elementwise(len(call.inputs) * float_elements(call.output))


@register_layer_formula("keras.layers.Dot")
def dot(call: LayerCall) -> Cost:
    """numel(out) * contracted size MACs; + 3N + R per input with normalize=True."""
    layer = call.layer
    x1, x2 = call.inputs[:2]
    axes = layer.axes if isinstance(layer.axes, (list, tuple)) else [layer.axes, layer.axes]
    axis1 = axes[0] % x1.rank
    contracted = x1.shape[axis1]
    cost = Cost.contraction(call.output.numel * contracted)
    if layer.normalize:
        for x, axis in ((x1, axis1), (x2, axes[1] % x2.rank)):
            cost = cost + Cost.elementwise(3 * x.numel + x.numel // max(x.shape[axis], 1))
    return cost


register_free_layer("keras.layers.Concatenate")
