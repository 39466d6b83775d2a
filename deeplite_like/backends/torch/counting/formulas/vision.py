"""Detection ops of torchvision (``torchvision::nms``, ``torchvision::roi_align``), by name.

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

from ..registry import Cost, OpCall, register_formula
from ._common import numel, shape

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
