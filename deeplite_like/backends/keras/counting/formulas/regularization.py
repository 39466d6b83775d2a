"""Dropout and noise layers: free in inference, priced per element in training.

    Dropout, SpatialDropout{1,2,3}D   2 per element (scale the kept mask, multiply; as torch)
    GaussianNoise                     1 per element (add the noise; drawing it is free)
    GaussianDropout                   1 per element (multiply by the noise)
    AlphaDropout                      2 per element (a*x + b after a free select)

The random draws themselves cost 0, as torch's random fills. "Training" is the ``training``
flag the layer was called with (``count_ops(..., training=True)`` passes it down).
"""
from __future__ import annotations

from ..registry import Cost, LayerCall, register_layer_formula
from . import conventions as c
from ._common import float_elements


def _in_training(call: LayerCall, amount: float) -> bool:
    return call.training and float(amount or 0.0) > 0.0


@register_layer_formula("keras.layers.Dropout", "keras.layers.SpatialDropout1D", "keras.layers.SpatialDropout2D",
                        "keras.layers.SpatialDropout3D")
def dropout(call: LayerCall) -> Cost:
    """Training with rate > 0: 2 FLOPs per element; inference: 0."""
    return Cost.elementwise(c.DROPOUT * float_elements(call.output) if _in_training(call, call.layer.rate) else 0)


@register_layer_formula("keras.layers.GaussianNoise")
def gaussian_noise(call: LayerCall) -> Cost:
    """Training with stddev > 0: 1 FLOP per element (the add); inference: 0."""
    return Cost.elementwise(float_elements(call.output) if _in_training(call, call.layer.stddev) else 0)


@register_layer_formula("keras.layers.GaussianDropout")
def gaussian_dropout(call: LayerCall) -> Cost:
    """Training with rate > 0: 1 FLOP per element (the multiply); inference: 0."""
    return Cost.elementwise(float_elements(call.output) if _in_training(call, call.layer.rate) else 0)


@register_layer_formula("keras.layers.AlphaDropout")
def alpha_dropout(call: LayerCall) -> Cost:
    """Training with rate > 0: 2 FLOPs per element (a*x + b); inference: 0."""
    return Cost.elementwise(2 * float_elements(call.output) if _in_training(call, call.layer.rate) else 0)
