"""Small torch models whose costs are derived by hand in the tests."""
from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """fc (4 -> 4) then ReLU, plus a residual add run directly in the block."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)) + x


class Net(nn.Module):
    """blocks: Sequential(Block, Block); head: Linear(4, 2); the output doubled directly in Net."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x)) * 2


class Generator(nn.Module):
    """A text-model-like entry point: ``generate`` calls the model twice and picks tokens outside it."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)

    def generate(self, x: torch.Tensor, steps: int = 2) -> torch.Tensor:
        for _ in range(steps):
            x = self(x) + 1.0  # the add runs in generate, outside self(...)
        return x


def mlp(bias: bool = True) -> nn.Module:
    """Linear(4, 8), ReLU, Linear(8, 2) (bias) or Linear(4, 8), Linear(8, 2) without bias or ReLU."""
    if bias:
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return nn.Sequential(nn.Linear(4, 8, bias=False), nn.Linear(8, 2, bias=False))
