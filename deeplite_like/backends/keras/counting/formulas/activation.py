"""Activation layers: FLOPs per output element, the torch backend's per-element costs.

    Activation(fn)  the table in _common.ACTIVATIONS (relu 1, sigmoid 4, tanh 1, gelu 5,
                    silu 5, softmax 5, ...); a function that is not a Keras built-in is untracked
    ReLU            max 1, + 1 with a negative_slope (leaky), + 1 with a max_value (clip, as
                    relu6 = hardtanh = 2), + 1 for the shift when both a threshold and a slope apply
    LeakyReLU, PReLU 2 (max(x, a*x))
    ELU             3 (exp, sub, mul)
    Softmax         5 (max, sub, exp, sum, divide) + 1 for the mask add when a mask is given
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas.conventions as c
from ..registry import Cost, LayerCall, register_layer_formula
from ._common import activation_cost, float_elements, per_output_element


@register_layer_formula("keras.layers.Activation", opaque=False)
def activation(call: LayerCall) -> Cost:
    """The activation function's per-element cost (``_common.ACTIVATIONS``) per output element."""
    return activation_cost(call, call.layer.activation, float_elements(call.output))


@register_layer_formula("keras.layers.ReLU")
def relu(call: LayerCall) -> Cost:
    """1 per element, +1 negative_slope != 0, +1 max_value set, +1 threshold != 0 with a slope."""
    layer = call.layer
    slope = float(layer.negative_slope or 0.0) != 0.0
    per = c.RELU + int(slope) + int(layer.max_value is not None)
    per += int(slope and float(layer.threshold or 0.0) != 0.0)
    return Cost.elementwise(per * float_elements(call.output))


register_layer_formula("keras.layers.LeakyReLU", "keras.layers.PReLU")(per_output_element(
    c.LEAKY_RELU, "leaky_relu", "max(x, a*x): 2 FLOPs per element."))
register_layer_formula("keras.layers.ELU")(per_output_element(
    c.ELU, "elu", "alpha*(exp(x) - 1) on the negative side: 3 FLOPs per element."))


@register_layer_formula("keras.layers.Softmax")
def softmax(call: LayerCall) -> Cost:
    """5 FLOPs per element (+1 per element for the mask add when a mask is given)."""
    n = float_elements(call.output)
    masked = call.argument("mask", 1) is not None
    return Cost.elementwise((c.SOFTMAX + int(masked)) * n)
