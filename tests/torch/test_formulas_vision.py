"""torchvision's detection ops, priced by name (torchvision does not import here), and the registry's
name-keyed formulas that make it possible."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import count_ops, register_formula, register_free, unregister
from deeplite_like.backends.torch.counting.formulas.vision import nms, roi_align
from deeplite_like.backends.torch.counting.registry import CountOptions, OpCall, is_free, lookup


class _Op:
    """Stands in for an op overload in a direct formula call."""

    def __init__(self, name: str):
        self.name_ = name


def _call(formula, args, out):
    return formula(OpCall(_Op("torchvision"), args, {}, out, CountOptions()))


def test_nms_prices_every_pair():
    # N = 10 boxes: areas 3 * 10 = 30; pairs 10 * 9 / 2 = 45, 12 FLOPs each = 540. 570 FLOPs.
    boxes, keep = torch.rand(10, 4), torch.arange(4)
    assert tuple(_call(nms, (boxes, torch.rand(10), 0.5), keep)) == (0, 570)
    # N = 1: its area only
    assert tuple(_call(nms, (torch.rand(1, 4), torch.rand(1), 0.5), torch.arange(1))) == (0, 3)


def test_roi_align_with_a_fixed_sampling_ratio():
    # 3 boxes, 16 channels, 7x7 output: 3 * 16 * 49 = 2,352 values; sampling 2 -> 4 samples * 8 FLOPs = 32
    # each: 75,264 FLOPs.
    x, rois, out = torch.randn(2, 16, 32, 32), torch.tensor([[0, 0, 0, 8, 8.]] * 3), torch.empty(3, 16, 7, 7)
    assert tuple(_call(roi_align, (x, rois, 1.0, 7, 7, 2, False), out)) == (0, 75_264)


def test_roi_align_adaptive_sampling_reads_the_boxes():
    # sampling_ratio 0: ceil(h / 7) * ceil(w / 7) samples per output value, box by box (scale 0.5):
    # box 1 (0, 0)-(28, 14) -> 14 x 7 on the map: ceil(7/7) * ceil(14/7) = 1 * 2 = 2 samples;
    # box 2 (0, 0)-(40, 40) -> 20 x 20: 3 * 3 = 9 samples. Per sample 8 FLOPs, 4 channels, 49 bins:
    # (2 + 9) * 8 * 4 * 49 = 17,248 FLOPs.
    x = torch.randn(1, 4, 32, 32)
    rois = torch.tensor([[0, 0, 0, 28, 14.], [0, 0, 0, 40, 40.]])
    assert tuple(_call(roi_align, (x, rois, 0.5, 7, 7, 0, True), torch.empty(2, 4, 7, 7))) == (0, 17_248)


def test_roi_align_adaptive_sampling_on_meta_says_what_to_do():
    x, rois = torch.empty(1, 4, 32, 32, device="meta"), torch.empty(2, 5, device="meta")
    with pytest.raises(ValueError, match="sampling_ratio > 0"):
        _call(roi_align, (x, rois, 0.5, 7, 7, 0, True), torch.empty(2, 4, 7, 7, device="meta"))


def test_a_formula_registered_by_name_before_its_op_exists_prices_it():
    # The mechanism the torchvision formulas use: a name whose op is not loaded is kept by name.
    @register_formula("dltestlate::scale3")
    def scale3(call):
        return (0, 3 * call.out.numel())

    register_free("dltestlate::noop")
    library = torch.library.Library("dltestlate", "DEF")
    try:
        library.define("scale3(Tensor x) -> Tensor")
        library.define("noop(Tensor x) -> Tensor")
        library.impl("scale3", lambda x: x * 3, "CompositeExplicitAutograd")
        library.impl("noop", lambda x: x.clone(), "CompositeExplicitAutograd")
        op = torch.ops.dltestlate.scale3.default
        assert lookup(op) is scale3 and is_free(torch.ops.dltestlate.noop.default)

        class Uses(nn.Module):
            def forward(self, x):
                return torch.ops.dltestlate.noop(torch.ops.dltestlate.scale3(x))

        counted = count_ops(Uses(), torch.randn(2, 5))
        assert (counted.macs, counted.flops) == (0, 30)  # 3 FLOPs x 10 elements; noop free
        assert counted.untracked == {}
    finally:
        unregister("dltestlate::scale3", "dltestlate::noop")
        library._destroy()


def test_aten_names_still_must_exist():
    with pytest.raises(AttributeError):
        register_formula("aten::no_such_op_here")(lambda call: (0, 0))


def test_torchvision_ops_are_priced_when_torchvision_runs():
    torchvision = pytest.importorskip("torchvision", reason="torchvision does not import here")
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60.]])

    class Detect(nn.Module):
        def forward(self, b, s):
            return torchvision.ops.nms(b, s, 0.5)

    counted = count_ops(Detect(), boxes, torch.tensor([0.9, 0.8, 0.7]))
    assert counted.flops == 3 * 3 + 12 * 3  # 3 areas + 3 pairs
