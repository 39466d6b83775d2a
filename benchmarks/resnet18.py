"""ResNet-18 (He et al., 2016) for the counting benchmarks, defined here: torchvision is not a dependency.

The layer layout is torchvision's ``resnet18``: a 7x7/2 stem conv + BN + ReLU + 3x3/2 max pool,
four stages of two basic blocks (64, 128, 256, 512 channels; stages 2-4 start with a stride-2
block whose shortcut is a 1x1/2 conv + BN), global average pool and a 1000-way linear head.
At 224x224 that is 11,689,512 parameters and 1,814,073,344 MACs per image (torchvision's model
card: 11.7 M parameters, 1.81 GFLOPS counted as multiply-adds).
"""
from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """3x3 conv-BN-ReLU, 3x3 conv-BN, plus the shortcut (identity or 1x1 conv-BN), then ReLU."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18 on (batch, 3, H, W) images (224x224 in the benchmark); output (batch, num_classes) logits."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, in_ch = [], 64
        for out_ch, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages.append(nn.Sequential(BasicBlock(in_ch, out_ch, stride), BasicBlock(out_ch, out_ch)))
            in_ch = out_ch
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))
