"""Stand-ins for what the seeds' examples import but cannot have here (no torchvision, no downloads).

The seed examples in this folder change only their import lines: ``torchvision.models`` becomes
``models`` from here, ``neutrino_torch_zoo``'s loaders become the two functions here. Models have
random weights and data is random (the seeds' pretrained weights and datasets are downloads).
"""
from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn

from deeplite_like.zoo.torch_models import BasicBlock, lenet5

__all__ = ["Model", "data_loader", "get_data_splits_by_name", "get_model_by_name", "lenet5", "models",
           "resnet18_cifar"]


class AlexNet(nn.Module):
    """AlexNet as torchvision builds it (61,100,840 parameters for 1000 classes, 3x224x224 input)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=0.5), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


#: ``import torchvision.models as models`` becomes ``from seed_stand_ins import models``.
models = SimpleNamespace(alexnet=AlexNet)


class ResNet18Cifar(nn.Module):
    """ResNet-18 for 3x32x32 images (3x3 stem, no max pool; 11,220,132 parameters for 100 classes)."""

    def __init__(self, num_classes: int = 100) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True))
        blocks, in_ch = [], 64
        for i, width in enumerate((64, 128, 256, 512)):
            blocks += [BasicBlock(in_ch, width, stride=1 if i == 0 else 2), BasicBlock(width, width)]
            in_ch = width
        self.layers = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def resnet18_cifar(num_classes: int = 100) -> ResNet18Cifar:
    return ResNet18Cifar(num_classes)


def get_model_by_name(model_name: str, dataset_name: str, pretrained: bool = False, progress: bool = False) -> nn.Module:
    """``neutrino_torch_zoo``'s loader, for ``resnet18`` on ``cifar100`` (random weights: nothing is downloaded)."""
    if (model_name, dataset_name) != ("resnet18", "cifar100"):
        raise ValueError(f"this stand-in has resnet18 on cifar100 only, not {model_name} on {dataset_name}")
    torch.manual_seed(0)
    return resnet18_cifar(100)


def get_data_splits_by_name(dataset_name: str, data_root: str = "", batch_size: int = 128,
                            num_torch_workers: int = 0, samples: int = 128) -> dict:
    """Random CIFAR-100-shaped splits ``{'train', 'test'}``: ``samples`` images each, in batches of ``batch_size``."""
    if dataset_name != "cifar100":
        raise ValueError(f"this stand-in has cifar100 only, not {dataset_name}")
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(samples, 3, 32, 32, generator=generator)
    y = torch.randint(0, 100, (samples,), generator=generator)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size)
    return {"train": loader, "test": loader}


class Model(nn.Module):
    """The seeds' training-workflow ``Model``: a small classifier whose forward returns the loss of a batch."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)


_generator = torch.Generator().manual_seed(0)
#: The seeds' ``data_loader``: 8 random batches of 4 samples for ``Model``.
data_loader = [(torch.randn(4, 16, generator=_generator), torch.randint(0, 4, (4,), generator=_generator))
               for _ in range(8)]
