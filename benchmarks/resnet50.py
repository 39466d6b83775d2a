"""ResNet-50 (He et al., 2016) for the timing benchmarks, defined here: torchvision is not a dependency.

The layer layout is torchvision's ``resnet50`` (v1.5: the stride sits on the 3x3 conv of a
bottleneck): a 7x7/2 stem conv + BN + ReLU + 3x3/2 max pool, four stages of 3, 4, 6 and 3
bottleneck blocks (1x1 reduce, 3x3, 1x1 expand by 4; widths 64, 128, 256, 512), each stage's
first block with a 1x1 conv + BN shortcut, global average pool and a 1000-way linear head.
At 224x224 that is 25,557,032 parameters and 4,089,184,256 MACs per image (torchvision's model
card: 25.6 M parameters, 4.09 GFLOPS counted as multiply-adds).
"""
from __future__ import annotations

import torch
from torch import nn


class Bottleneck(nn.Module):
    """1x1 conv-BN-ReLU, 3x3 conv-BN-ReLU (stride here), 1x1 conv-BN, plus the shortcut, then ReLU."""

    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50 on (batch, 3, H, W) images (224x224 in the benchmark); output (batch, num_classes) logits."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, in_ch = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layers = [Bottleneck(in_ch, width, stride)]
            in_ch = width * Bottleneck.expansion
            layers += [Bottleneck(in_ch, width) for _ in range(blocks - 1)]
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))
