"""Pooling of ranks 1-3, as the torch backend's pooling formulas (K = prod(pool_size)); each
formula's docstring gives its count (the global pools as torch's adaptive pools to 1, or ``mean``).

Windows are priced dense: positions that fall in ``'same'`` padding count as window
elements, as in torch (Keras' average pool divides by the valid count; the cost is the same).
A ``mask`` given to global average pooling adds a multiply per input element.
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas.conventions as c
from ..registry import Cost, LayerCall, LayerFormula, register_layer_formula
from ._common import float_elements, named, prod, spatial_dims

_RANKS = ("1D", "2D", "3D")


@register_layer_formula(*(f"keras.layers.MaxPooling{r}" for r in _RANKS))
def max_pool(call: LayerCall) -> Cost:
    """numel(out) * prod(pool_size) FLOPs (one max per window element)."""
    return Cost.elementwise(float_elements(call.output) * prod(call.layer.pool_size))


@register_layer_formula(*(f"keras.layers.AveragePooling{r}" for r in _RANKS))
def avg_pool(call: LayerCall) -> Cost:
    """numel(out) * (prod(pool_size) + 1) FLOPs (sum the window, one divide)."""
    return Cost.elementwise(float_elements(call.output) * (prod(call.layer.pool_size) + 1))


@register_layer_formula(*(f"keras.layers.GlobalMaxPooling{r}" for r in _RANKS))
def global_max_pool(call: LayerCall) -> Cost:
    """N FLOPs (one max per input element)."""
    return Cost.elementwise(float_elements(call.input))


@register_layer_formula(*(f"keras.layers.GlobalAveragePooling{r}" for r in _RANKS))
def global_avg_pool(call: LayerCall) -> Cost:
    """N + numel(out) FLOPs (sum, one divide per output); + N for a mask multiply."""
    n = float_elements(call.input)
    masked = call.argument("mask", 1) is not None
    return Cost.elementwise(n + float_elements(call.output) + (n if masked else 0))


def _adaptive(divide: bool, name: str, doc: str) -> LayerFormula:
    """Adaptive max: one FLOP per element of every output window; adaptive average: the same + one
    divide per output. Window i spans [floor(i*In/Out), ceil((i+1)*In/Out)) per dimension."""
    def formula(call: LayerCall) -> Cost:
        x, out = call.input, call.output
        if not out.is_float:
            return Cost()
        spatial_in, spatial_out = spatial_dims(call.layer, x.shape), spatial_dims(call.layer, out.shape)
        planes = out.numel // max(prod(spatial_out), 1)
        flops = planes * c.adaptive_window_elements(spatial_in, spatial_out) + (out.numel if divide else 0)
        return Cost.elementwise(flops)

    return named(formula, name, doc)


register_layer_formula(*(f"keras.layers.AdaptiveAveragePooling{r}" for r in _RANKS))(_adaptive(
    True, "adaptive_avg_pool", "One FLOP per element of every output window + one divide per output."))
register_layer_formula(*(f"keras.layers.AdaptiveMaxPooling{r}" for r in _RANKS))(_adaptive(
    False, "adaptive_max_pool", "One FLOP per element of every output window."))
