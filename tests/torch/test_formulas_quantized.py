"""Quantized kernels (``torch.ao.quantization``, static and dynamic) count as their float twins.

Weights are read from the packed parameters; see ``formulas/quantized.py`` for the table.
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.ao.nn.intrinsic.quantized as nniq
import torch.ao.nn.quantized as nnq
import torch.ao.quantization as tq
from torch import nn
from torch.ao.nn.quantized import FloatFunctional

from deeplite_like.backends.torch.counting import count_ops
from deeplite_like.backends.torch.params import parameter_stats

from .quantized_models import MobileNetV2, quantize_static

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # torch deprecates quint8 creation


def _q(*size: int) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(torch.randn(*size), 0.05, 64, torch.quint8)


class Mixed(nn.Module):
    """One of each static kernel: conv+relu, depthwise conv, add, add_relu, mul, cat, transposed conv, linear."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.relu = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.add, self.add_relu, self.mul, self.cat = FloatFunctional(), FloatFunctional(), FloatFunctional(), \
            FloatFunctional()
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(4, 5)

    def forward(self, x):
        y = self.relu(self.conv(self.quant(x)))
        z = self.depthwise(y)
        w = self.mul.mul(self.add_relu.add_relu(self.add.add(y, z), z), z)
        w = self.up(self.cat.cat([w, z], 1)[:, :8])
        return self.dequant(self.fc(self.pool(w).flatten(1)))

    def fuse(self):
        tq.fuse_modules(self, [["conv", "relu"]], inplace=True)
        self.up.qconfig = tq.default_qconfig  # (per-channel weights are not supported for transposed convs)


def _quantized_mixed(x):
    model = Mixed().eval()
    model.fuse()
    model.qconfig = tq.get_default_qconfig("fbgemm")
    model.up.qconfig = tq.default_qconfig
    prepared = tq.prepare(model)
    prepared(x)
    return tq.convert(prepared)


def test_each_static_kernel_is_priced_as_its_float_twin():
    # x (1, 3, 16, 16):
    # conv 3->8 3x3 pad 1 + ReLU: out 8*16*16 = 2,048; MACs 2,048*3*9 = 55,296; FLOPs 2*55,296 + 2,048 bias
    #   + 2,048 ReLU = 114,688
    # depthwise 8->8 3x3 groups 8: 2,048*1*9 = 18,432 MACs; FLOPs 36,864 + 2,048 = 38,912
    # add 2,048, add_relu 2*2,048 = 4,096, mul 2,048 FLOPs; cat free
    # transposed 8->4 2x2 stride 2: input 2,048 * 4 * 4 = 32,768 MACs; out 4*32*32 = 4,096; FLOPs 65,536 + 4,096
    # adaptive avg pool to 1x1: 4 planes * 1,024 + 4 divides = 4,100 FLOPs
    # linear 4->5: 20 MACs, 40 + 5 = 45 FLOPs
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16)
    counted = count_ops(_quantized_mixed(x), x)
    ops = {name: (s.macs, s.flops) for name, s in counted.by_operator.items() if s.macs or s.flops}
    assert ops == {"quantized.conv2d_relu": (55_296, 114_688), "quantized.conv2d": (18_432, 38_912),
                   "quantized.add": (0, 2_048), "quantized.add_relu": (0, 4_096), "quantized.mul": (0, 2_048),
                   "quantized.conv_transpose2d": (32_768, 69_632), "aten._adaptive_avg_pool2d": (0, 4_100),
                   "quantized.linear": (20, 45)}
    assert counted.macs == 55_296 + 18_432 + 32_768 + 20 == 106_516
    assert counted.untracked == {}  # quantize_per_tensor, dequantize and cat are free
    float_twin = Mixed().eval()
    assert (count_ops(float_twin, x).macs, count_ops(float_twin, x).flops) == (counted.macs, counted.flops)


@pytest.mark.parametrize("module,x,expected", [
    # Conv1d 4->6 k3 on length 10: out 6*8 = 48; 48*4*3 = 576 MACs; 2*576 + 48 bias = 1,200 FLOPs
    (lambda: nnq.Conv1d(4, 6, 3), (1, 4, 10), (576, 1_200)),
    # Conv3d 4->6 k3 on 5^3: out 6*27 = 162; 162*4*27 = 17,496 MACs; 34,992 + 162 = 35,154 FLOPs
    (lambda: nnq.Conv3d(4, 6, 3), (1, 4, 5, 5, 5), (17_496, 35_154)),
    # Conv2d 8->6 k3 groups 2, stride 2 on 9x9: out 6*4*4 = 96; 96*4*9 = 3,456 MACs; 6,912 + 96 = 7,008
    (lambda: nnq.Conv2d(8, 6, 3, stride=2, groups=2), (1, 8, 9, 9), (3_456, 7_008)),
    # ConvTranspose1d 4->2 k3 stride 2 on length 5: input 20 * 2 * 3 = 120 MACs; out 2*11 = 22; 240 + 22
    (lambda: nnq.ConvTranspose1d(4, 2, 3, stride=2), (1, 4, 5), (120, 262)),
    # ConvRelu2d 3->4 k1 on 5x5: out 100; 100*3 = 300 MACs; 600 + 100 bias + 100 ReLU = 800
    (lambda: nniq.ConvReLU2d(3, 4, 1), (1, 3, 5, 5), (300, 800)),
    # Linear 16->8 on (3, 16): 384 MACs; 768 + 24 = 792 FLOPs
    (lambda: nnq.Linear(16, 8), (3, 16), (384, 792)),
    # LinearReLU 16->8 on (2, 5, 16): 10 rows; 1,280 MACs; 2,560 + 80 bias + 80 ReLU = 2,720
    (lambda: nniq.LinearReLU(16, 8), (2, 5, 16), (1_280, 2_720)),
])
def test_quantized_modules_read_their_packed_weights(module, x, expected):
    counted = count_ops(module(), _q(*x))
    assert (counted.macs, counted.flops) == expected
    assert counted.untracked == {}


def test_dynamic_quantized_linear_counts_as_float():
    # Linear(16, 32) + ReLU + Linear(32, 4) on (3, 16): 3*16*32 + 3*32*4 = 1,536 + 384 = 1,920 MACs;
    # FLOPs 2*1,920 + bias 96 + 12 + ReLU 96 = 4,044: the float model's figures.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    dynamic = tq.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    x = torch.randn(3, 16)
    counted = count_ops(dynamic, x)
    assert (counted.macs, counted.flops) == (1_920, 4_044)
    assert counted.by_operator["quantized.linear_dynamic"].calls == 2
    assert counted.untracked == {}
    assert (count_ops(model, x).macs, count_ops(model, x).flops) == (1_920, 4_044)


@pytest.fixture(scope="module")
def mobilenets():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 224, 224)  # (calibrated on a small image: fully convolutional, faster)
    return MobileNetV2().eval(), quantize_static(MobileNetV2(), torch.randn(1, 3, 32, 32)), x


def test_quantized_mobilenet_v2_counts_its_float_twins_macs(mobilenets):
    # torchvision's mobilenet_v2 at 224x224: 300,774,272 MACs (its convolutions and classifier; the
    # same architecture is built in quantized_models.py). Static int8 quantization changes no MAC.
    float_model, quantized_model, x = mobilenets
    float_count, quantized_count = count_ops(float_model, x), count_ops(quantized_model, x)
    assert float_count.macs == quantized_count.macs == 300_774_272
    assert quantized_count.untracked == {}
    # FLOPs equal those of the float twin with batch norm folded into the convolutions (as converted)
    fused = MobileNetV2().eval()
    fused.fuse()
    assert count_ops(fused, x).flops == quantized_count.flops


def test_quantized_mobilenet_v2_size_is_int8_weights_and_float32_biases(mobilenets):
    # mobilenet_v2 has 3,504,872 parameters: 34,112 of them batch-norm affine (2 x 17,056 channels)
    # and 1,000 the classifier's bias. Folding batch norm leaves 3,504,872 - 34,112 - 1,000 = 3,469,760
    # int8 weights (1 byte each) and 17,056 + 1,000 = 18,056 float32 biases (4 bytes: 72,224).
    float_model, quantized_model, _ = mobilenets
    assert sum(p.numel() for p in float_model.parameters()) == 3_504_872
    stats = parameter_stats(quantized_model)
    assert stats.by_dtype == {"qint8": 3_469_760, "float32": 72_224}
    assert stats.param_bytes == 3_469_760 + 72_224


class Layers(nn.Module):
    """Quantized layers beyond conv/linear: batch norm, hardswish, max pool, upsample, sigmoid, leaky ReLU,
    ReLU6, layer norm, avg pool (eager mode swaps each for its quantized kernel or runs aten on quint8)."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.bn, self.hardswish = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Hardswish()
        self.maxpool, self.up = nn.MaxPool2d(2), nn.Upsample(scale_factor=2, mode="bilinear")
        self.sigmoid, self.leaky, self.relu6 = nn.Sigmoid(), nn.LeakyReLU(0.1), nn.ReLU6()
        self.norm, self.avgpool = nn.LayerNorm([8, 16, 16]), nn.AvgPool2d(2)

    def forward(self, x):
        x = self.maxpool(self.hardswish(self.bn(self.conv(self.quant(x)))))
        x = self.relu6(self.leaky(self.sigmoid(self.up(x))))
        return self.dequant(self.avgpool(self.norm(x)))


def test_every_quantized_layer_counts_as_its_float_twin():
    # x (1, 3, 16, 16), N = 8*16*16 = 2,048 elements after the conv:
    # conv 55,296 MACs, 2*55,296 + 2,048 bias = 112,640; batch norm (running stats) 2N + 2C + 2N = 8,208;
    # hardswish 5N = 10,240; max pool 2x2: 512 outputs * 4 = 2,048; bilinear upsample back to 16x16:
    # 14,336 (vision.py: 7 per output); sigmoid 4N = 8,192; leaky ReLU 2N; ReLU6 2N (4,096 each);
    # layer norm 6N + 4 + 2N = 16,388; avg pool 2x2: 512 * 5 = 2,560. Total 182,804 FLOPs.
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16)
    model = Layers().eval()
    model.qconfig = tq.get_default_qconfig("fbgemm")
    prepared = tq.prepare(model)
    prepared(x)
    counted = count_ops(tq.convert(prepared), x)
    assert (counted.macs, counted.flops) == (55_296, 182_804)
    assert counted.untracked == {}
    float_count = count_ops(Layers().eval(), x)
    assert (float_count.macs, float_count.flops) == (55_296, 182_804)
