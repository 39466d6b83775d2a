"""Interpolation (``F.interpolate``, ``nn.Upsample``, ``F.grid_sample``), per OUTPUT element.

Each output is a weighted sum of n input neighbours: n multiplies + (n - 1) adds = 2n - 1::

    nearest, nearest-exact   0   (an indexed copy: free, like any gather)
    linear (1-D)             3   (2 neighbours)
    bilinear (2-D)           7   (4 neighbours)
    trilinear (3-D)         15   (8 neighbours)
    bicubic (2-D)           31   (16 neighbours)

Interpolation weights depend only on the output position, are shared by every batch and
channel, and are not counted. The count depends only on the output size, so ``size=`` and
``scale_factor=`` that produce the same output cost the same. ``mode='area'`` runs as
adaptive average pooling (pooling.py).
"""
from __future__ import annotations

import math

from ..registry import Cost, OpCall, register_formula, register_free
from ._common import bind, first_tensor, is_float, numel, ops, per_input_element, shape
from .elementwise import elementwise

LINEAR, BILINEAR, TRILINEAR, BICUBIC = 3, 7, 15, 31

register_free(*ops("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
                   "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"))

register_formula(*ops("upsample_linear1d"))(elementwise(LINEAR))
register_formula(*ops("upsample_bilinear2d"))(elementwise(BILINEAR))
register_formula(*ops("upsample_trilinear3d"))(elementwise(TRILINEAR))
register_formula(*ops("upsample_bicubic2d"))(elementwise(BICUBIC))


def _aa_taps(size_in: int, size_out: int, interp_size: int, align_corners: bool, scale_factor) -> int:
    """Inputs weighed per output of one anti-aliased pass.

    Anti-aliased resize (``antialias=True``) runs separable passes, last dim first, one per
    resized dim; each output of a pass is a weighted sum of ``taps = 2*ceil(support) + 1``
    inputs, support = interp_size/2 * max(scale, 1) (interp_size 2 bilinear, 4 bicubic,
    scale = in/out): (2*taps - 1) FLOPs per element of that pass's output. Taps are the
    kernel's maximum window; the few border windows that are clipped are still priced full.
    """
    if align_corners:
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    elif scale_factor:
        scale = 1.0 / scale_factor
    else:
        scale = size_in / size_out
    support = interp_size * 0.5 * (scale if scale >= 1.0 else 1.0)
    return 2 * math.ceil(support) + 1


def _aa_passes(a: dict, size_in, target: tuple[int, ...], interp_size: int) -> Cost:
    """The separable passes resizing ``size_in`` to ``target``: (2*taps - 1) FLOPs per element of each output."""
    current = list(size_in)
    flops = 0
    # horizontal pass first, as the kernel does
    for dim, scale in ((-1, a.get("scales_w")), (-2, a.get("scales_h"))):
        if current[dim] == target[dim]:
            continue
        taps = _aa_taps(current[dim], target[dim], interp_size, bool(a["align_corners"]), scale)
        current[dim] = target[dim]
        flops += (2 * taps - 1) * math.prod(current)
    return Cost.elementwise(flops)


def _aa(interp_size: int):
    def formula(call: OpCall) -> Cost:
        a = bind(call)
        x = a.get("self", a.get("input"))
        out = first_tensor(call.out)
        return _aa_passes(a, shape(x), shape(out), interp_size) if is_float(out) else Cost()

    formula.__name__ = formula.__qualname__ = f"upsample_aa_{interp_size}"
    formula.__doc__ = "Anti-aliased resize: separable passes, (2*taps - 1) FLOPs per element of each pass's output."
    return formula


register_formula(*ops("_upsample_bilinear2d_aa"))(_aa(2))
register_formula(*ops("_upsample_bicubic2d_aa"))(_aa(4))


def _backward(flops_per_grad: int):
    """An upsample backward charging ``flops_per_grad`` FLOPs per grad_output element.

    Backward: each grad_output element is spread over its n neighbours (n multiplies and
    n adds, 2n FLOPs); nearest backward sums grads, 1 FLOP per grad_output element.
    ``grid_sample`` backward adds the same again for the grid's gradient.
    """
    return per_input_element(flops_per_grad, f"Upsample backward: {flops_per_grad} FLOP(s) per grad_output element.")


register_formula(*ops("upsample_nearest1d_backward", "upsample_nearest2d_backward", "upsample_nearest3d_backward",
                      "_upsample_nearest_exact1d_backward", "_upsample_nearest_exact2d_backward",
                      "_upsample_nearest_exact3d_backward"))(_backward(1))
register_formula(*ops("upsample_linear1d_backward"))(_backward(LINEAR + 1))
register_formula(*ops("upsample_bilinear2d_backward"))(_backward(BILINEAR + 1))
register_formula(*ops("upsample_trilinear3d_backward"))(_backward(TRILINEAR + 1))
register_formula(*ops("upsample_bicubic2d_backward"))(_backward(BICUBIC + 1))


@register_formula(*ops("_upsample_bilinear2d_aa_backward", "_upsample_bicubic2d_aa_backward"))
def upsample_aa_backward(call: OpCall) -> Cost:
    """Anti-aliased resize backward: priced as its forward pass from grad_output's size (the same windows)."""
    a = bind(call)
    grad = a["grad_output"]
    if not is_float(grad):
        return Cost()
    return _aa_passes(a, a["input_size"], shape(grad), 2 if "bilinear" in call.name else 4)


_GRID = {0: BILINEAR, 1: 0, 2: BICUBIC}  # interpolation_mode: bilinear, nearest, bicubic


@register_formula(*ops("grid_sampler_2d", "grid_sampler_3d", "grid_sampler", "cudnn_grid_sampler"))
def grid_sampler(call: OpCall) -> Cost:
    """grid_sample: per output element 7 (bilinear) / 15 (3-D trilinear) / 31 (bicubic) / 0 (nearest)."""
    a = bind(call)
    out = first_tensor(call.out)
    if not is_float(out):
        return Cost()
    mode = int(a.get("interpolation_mode") or 0)
    per = TRILINEAR if (mode == 0 and out.dim() == 5) else _GRID.get(mode, BILINEAR)
    return Cost.elementwise(per * numel(out))


@register_formula(*ops("affine_grid_generator"))
def affine_grid(call: OpCall) -> Cost:
    """affine_grid: each output coordinate is a dot of (x, y[, z], 1) with a theta row: 3 (2-D) or 4 (3-D) MACs."""
    out = call.out
    return Cost.contraction(numel(out) * (3 if out.dim() == 4 else 4))


_GRID_TAPS = {0: 4, 1: 1, 2: 16}  # neighbours per output: bilinear, nearest, bicubic (3-D bilinear: 8)


@register_formula(*ops("grid_sampler_2d_backward", "grid_sampler_3d_backward"))
def grid_sampler_backward(call: OpCall) -> Cost:
    """grid_sample backward, per grad_output element with n neighbours (4 bilinear, 8 trilinear, 16 bicubic):
    input grad 2n (multiply, scatter-add), grid grad 2n (weight derivatives times values); nearest: 1 and 0."""
    a = bind(call)
    grad = a["grad_output"]
    if not is_float(grad):
        return Cost()
    mode = int(a["interpolation_mode"])
    taps = 8 if (mode == 0 and grad.dim() == 5) else _GRID_TAPS.get(mode, 4)
    mask = a["output_mask"]
    per = (1 if mode == 1 else 2 * taps) * int(bool(mask[0])) + (0 if mode == 1 else 2 * taps) * int(bool(mask[1]))
    return Cost.elementwise(per * numel(grad))
