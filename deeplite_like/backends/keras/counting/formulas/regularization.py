"""Dropout and noise layers: free in inference, priced per element in training.

    Dropout, SpatialDropout{1,2,3}D   2 per element (scale the kept mask, multiply; as torch)
    GaussianNoise                     1 per element (add the noise; drawing it is free)
    GaussianDropout                   1 per element (multiply by the noise)
    AlphaDropout                      2 per element (a*x + b after a free select)

The random draws themselves cost 0, as torch's random fills. "Training" is the ``training``
flag the layer was called with (``count_ops(..., training=True)`` passes it down).
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas.conventions as c
from ..registry import Cost, LayerCall, LayerFormula, register_layer_formula
from ._common import float_elements, named


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
