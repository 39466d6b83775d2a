"""Eager-mode quantizable models for the quantized-kernel tests (torchvision is not importable here).

``mobilenet_v2`` is torchvision's MobileNetV2 architecture (its ``QuantizableMobileNetV2``:
ReLU instead of ReLU6, skip adds through ``FloatFunctional``), built from scratch.
"""
from __future__ import annotations

import warnings

import torch
import torch.ao.quantization as tq
from torch import nn
from torch.ao.nn.quantized import FloatFunctional

# (expansion t, output channels c, repeats n, first stride s): torchvision's inverted_residual_setting
MOBILENET_V2_SETTING = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                        (6, 160, 3, 2), (6, 320, 1, 1)]


def conv_bn_relu(cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1, relu: bool = True):
    layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers = [conv_bn_relu(cin, hidden, 1)] if expand != 1 else []
        layers += [conv_bn_relu(hidden, hidden, 3, stride, groups=hidden), conv_bn_relu(hidden, cout, 1, relu=False)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout
        self.skip_add = FloatFunctional()

    def forward(self, x):
        return self.skip_add.add(x, self.conv(x)) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000, width: int = 32, last: int = 1280):
        super().__init__()
        layers, cin = [conv_bn_relu(3, width, 3, 2)], width
        for t, c, n, s in MOBILENET_V2_SETTING:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn_relu(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(last, num_classes)
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()

    def forward(self, x):
        x = self.features(self.quant(x))
        return self.dequant(self.classifier(torch.flatten(self.pool(x), 1)))

    def fuse(self) -> None:
        for module in list(self.modules()):
            if isinstance(module, nn.Sequential) and len(module) in (2, 3) and isinstance(module[0], nn.Conv2d):
                tq.fuse_modules(module, [[str(i) for i in range(len(module))]], inplace=True)


def quantize_static(model: nn.Module, *calibration: torch.Tensor) -> nn.Module:
    """Eager-mode static quantization (fbgemm): fuse, prepare, calibrate, convert."""
    model.eval()
    model.fuse()
    model.qconfig = tq.get_default_qconfig("fbgemm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = tq.prepare(model)
        with torch.no_grad():
            prepared(*calibration)
        return tq.convert(prepared)
