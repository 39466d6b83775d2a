"""Image ops: interpolation (upsampling, grid sampling) and torchvision's detection ops.

Interpolation (``F.interpolate``, ``nn.Upsample``, ``F.grid_sample``), per OUTPUT element.

Each output is a weighted sum of n input neighbours: n multiplies + (n - 1) adds = 2n - 1::

    nearest, nearest-exact   0   (an indexed copy: free, like any gather)
    linear (1-D)             3   (2 neighbours)
    bilinear (2-D)           7   (4 neighbours)
    trilinear (3-D)         15   (8 neighbours)
    bicubic (2-D)           31   (16 neighbours)

Interpolation weights depend only on the output position, are shared by every batch and
channel, and are not counted. The count depends only on the output size, so ``size=`` and
``scale_factor=`` that produce the same output cost the same. ``mode='area'`` runs as
adaptive average pooling (conv.py).

Detection ops of torchvision (``torchvision::nms``, ``torchvision::roi_align``), by name.

Registered by name (``'torchvision::nms'``), so they price the ops whether torchvision is
imported before or after this table is built, and cost nothing when it is never imported.

nms (N boxes): the kernel sorts the scores (free), computes each box's area (2 subtractions,
1 multiply: 3 FLOPs) and the IoU of pairs of boxes: intersection corners 2 max + 2 min, width
and height 2 subtractions clamped at 0 (2 max), their product 1, union area 2 adds/subtracts,
the ratio 1 divide: 12 FLOPs per pair. Counted for all N (N - 1) / 2 pairs: an upper bound,
since the kernel skips the pairs of a box already suppressed (how many depends on the boxes).

roi_align (K boxes, C channels, output P_h x P_w): each output value averages S bilinear
samples, S = sampling_ratio^2 (or, for ``sampling_ratio <= 0``, ceil(roi_h / P_h) *
ceil(roi_w / P_w) per box, read from the boxes' values); a bilinear sample is 4 multiplies +
3 adds (7 FLOPs), the average S - 1 adds + 1 divide: 8 S FLOPs per output value.
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


# -- torchvision's detection ops (nms, roi_align), by name ---------------------------------------------------
IOU = 12
BOX_AREA = 3
BILINEAR_SAMPLE = 8  # 7 for the interpolation + 1 for its share of the average


@register_formula("torchvision::nms")
def nms(call: OpCall) -> Cost:
    """Non-maximum suppression of N boxes: 3 N (areas) + 12 N (N - 1) / 2 (IoU of every pair, an upper bound)."""
    n = shape(call.args[0])[0]
    return Cost.elementwise(BOX_AREA * n + IOU * n * (n - 1) // 2)


@register_formula("torchvision::roi_align")
def roi_align(call: OpCall) -> Cost:
    """RoIAlign: 8 FLOPs per bilinear sample, S samples per output value (S from ``sampling_ratio``)."""
    x, rois, spatial_scale, pooled_h, pooled_w, sampling_ratio = call.args[:6]
    out = call.out
    sampling_ratio, pooled_h, pooled_w = int(sampling_ratio), int(pooled_h), int(pooled_w)
    if sampling_ratio > 0:
        return Cost.elementwise(BILINEAR_SAMPLE * sampling_ratio * sampling_ratio * numel(out))
    if rois.is_meta or type(rois).__name__ != "Tensor":
        raise ValueError("roi_align with sampling_ratio <= 0 takes as many samples as each box's size, which "
                         "needs the boxes' values: count with real tensors, or pass sampling_ratio > 0")
    aligned = bool(call.args[6]) if len(call.args) > 6 else False
    channels, per_box = shape(x)[1], pooled_h * pooled_w
    total = 0
    for box in rois.detach().cpu().tolist():
        x1, y1, x2, y2 = (value * float(spatial_scale) for value in box[1:5])
        width, height = x2 - x1, y2 - y1
        if not aligned:  # (torchvision: boxes of unaligned RoIAlign are at least 1 x 1)
            width, height = max(width, 1.0), max(height, 1.0)
        samples = math.ceil(height / pooled_h) * math.ceil(width / pooled_w)
        total += BILINEAR_SAMPLE * samples * channels * per_box
    return Cost.elementwise(total)
