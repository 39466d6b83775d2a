"""Per-element layers, priced per output element with the torch backend's per-element costs:
activations, merges, and the dropout and noise layers.

Activation layers:

    Activation(fn)  the table in _common.ACTIVATIONS (relu 1, sigmoid 4, tanh 1, gelu 5,
                    silu 5, softmax 5, ...); a function that is not a Keras built-in is untracked
    ReLU            max 1, + 1 with a negative_slope (leaky), + 1 with a max_value (clip, as
                    relu6 = hardtanh = 2), + 1 for the shift when both a threshold and a slope apply
    LeakyReLU, PReLU 2 (max(x, a*x))
    ELU             3 (exp, sub, mul)
    Softmax         5 (max, sub, exp, sum, divide) + 1 for the mask add when a mask is given

Merge layers:

    Merge layers, per OUTPUT element (broadcasting is priced as it runs), n = number of inputs::

        Add, Multiply, Maximum, Minimum   (n - 1) per output element
        Subtract                          1 per output element
        Average                           (n - 1) adds + 1 divide = n per output element
        Concatenate                       free (a copy)
        Dot                               numel(out) * contracted size MACs (a batched dot);
                                          ``normalize=True`` adds an L2 normalisation of each input
                                          (3N + R, as UnitNormalization)

Dropout and noise layers:

    Dropout and noise layers: free in inference, priced per element in training.

        Dropout, SpatialDropout{1,2,3}D   2 per element (scale the kept mask, multiply; as torch)
        GaussianNoise                     1 per element (add the noise; drawing it is free)
        GaussianDropout                   1 per element (multiply by the noise)
        AlphaDropout                      2 per element (a*x + b after a free select)

    The random draws themselves cost 0, as torch's random fills. "Training" is the ``training``
    flag the layer was called with (``count_ops(..., training=True)`` passes it down).
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas._common as c
from ..registry import Cost, LayerCall, LayerFormula, register_free_layer, register_layer_formula
from ._common import activation_cost, float_elements, named, per_output_element


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


# -- Merge layers -----------------------------------------------------------------------------------
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


# -- Dropout and noise layers -----------------------------------------------------------------------
def _in_training(per: int, amount: str, name: str, doc: str) -> LayerFormula:
    """``per`` FLOPs per output element in training when ``layer.<amount>`` (rate, stddev) > 0; else 0."""
    def formula(call: LayerCall) -> Cost:
        active = call.training and float(getattr(call.layer, amount) or 0.0) > 0.0
        return Cost.elementwise(per * float_elements(call.output) if active else 0)

    return named(formula, name, doc)


register_layer_formula("keras.layers.Dropout", "keras.layers.SpatialDropout1D", "keras.layers.SpatialDropout2D",
                       "keras.layers.SpatialDropout3D")(_in_training(
    c.DROPOUT, "rate", "dropout", "Training with rate > 0: 2 FLOPs per element; inference: 0."))
register_layer_formula("keras.layers.GaussianNoise")(_in_training(
    1, "stddev", "gaussian_noise", "Training with stddev > 0: 1 FLOP per element (the add); inference: 0."))
register_layer_formula("keras.layers.GaussianDropout")(_in_training(
    1, "rate", "gaussian_dropout", "Training with rate > 0: 1 FLOP per element (the multiply); inference: 0."))
register_layer_formula("keras.layers.AlphaDropout")(_in_training(
    2, "rate", "alpha_dropout", "Training with rate > 0: 2 FLOPs per element (a*x + b); inference: 0."))
