"""Normalisation layers, as the torch backend's norm formulas (N = input elements).

Each layer's count is in its formula's docstring.
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas._common as c
from ..registry import Cost, LayerCall, register_layer_formula
from ._common import axes_of, float_elements, prod


@register_layer_formula("keras.layers.BatchNormalization")
def batch_norm(call: LayerCall) -> Cost:
    """Inference 2N + 2C (+N, +N); training (trainable) 6N + 4C (+N gamma, +N beta).

    C = channels (the size of ``axis``). Moving-average updates are book-keeping and not counted,
    as in torch. Keras' batch norm uses batch statistics only when called with ``training=True``
    *and* ``trainable`` (a frozen batch norm always uses its moving statistics).
    """
    layer, x = call.layer, call.input
    n = float_elements(x)
    if not n:
        return Cost()
    channels = prod(x.shape[a] for a in axes_of(layer.axis, x.rank))
    if call.training and layer.trainable:
        return c.normalisation_cost(n, channels, layer.scale, layer.center)
    return c.running_stats_cost(n, channels, layer.scale, layer.center)


def _rows(x, axis) -> int:
    return x.numel // max(prod(x.shape[a] for a in axes_of(axis, x.rank)), 1)


@register_layer_formula("keras.layers.LayerNormalization")
def layer_norm(call: LayerCall) -> Cost:
    """6N + 4R (+N gamma, +N beta), R = N / prod(normalised sizes); rms_scaling: 6N + 4R (+N gamma).

    ``rms_scaling=True`` (deprecated): Keras divides by the standard deviation without centring
    (var 4N + 2R, add eps and rsqrt 2R, x*inv N, gamma N): 6N + 4R + N, a layer norm without beta.
    """
    layer, x = call.layer, call.input
    n = float_elements(x)
    if not n:
        return Cost()
    rows = _rows(x, layer.axis)
    if getattr(layer, "rms_scaling", False):
        return c.normalisation_cost(n, rows, layer.scale, False)
    return c.normalisation_cost(n, rows, layer.scale, layer.center)


@register_layer_formula("keras.layers.GroupNormalization")
def group_norm(call: LayerCall) -> Cost:
    """6N + 4 * batch * groups (+N gamma, +N beta)."""
    layer, x = call.layer, call.input
    n = float_elements(x)
    if not n:
        return Cost()
    return c.normalisation_cost(n, x.shape[0] * layer.groups, layer.scale, layer.center)


@register_layer_formula("keras.layers.RMSNormalization")
def rms_norm(call: LayerCall) -> Cost:
    """3N + 3R + N (scale), R = N / prod(normalised sizes)."""
    x = call.input
    n = float_elements(x)
    return c.rms_norm_cost(n, _rows(x, call.layer.axis), True) if n else Cost()


@register_layer_formula("keras.layers.UnitNormalization")
def unit_norm(call: LayerCall) -> Cost:
    """x / ||x||_2 over ``axis``: square N, sum N, sqrt R, divide N -> 3N + R."""
    x = call.input
    n = float_elements(x)
    return Cost.elementwise(3 * n + _rows(x, call.layer.axis)) if n else Cost()
