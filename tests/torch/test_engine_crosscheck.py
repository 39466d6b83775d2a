"""Cross-check the engine against torch.utils.flop_counter (a peer that counts the same way).

``FlopCounterMode`` counts only contractions (matmul family, convolutions, and their backward),
as 2 FLOPs per MAC, and attributes them to modules. On a model whose arithmetic is conv and
linear only (+ free ops and ReLU, which it does not count), our MACs x 2 must equal its
FLOPs, in total and for every module, forward and backward. This uses the real formula table.
The convolutions are dense: the peer's grouped-convolution weight-gradient formula ignores
``groups`` and overcounts by that factor.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from deeplite_like.backends.torch.counting import count_ops

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def conv_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                         nn.Sequential(nn.Conv2d(8, 4, 3, stride=2)),
                         nn.Flatten(), nn.Linear(4 * 7 * 7, 5))


def peer_counts(model: nn.Module, x: torch.Tensor, backward: bool) -> dict[str, int]:
    """FlopCounterMode's FLOPs per module, renamed to our qualified names ("" is the root)."""
    with FlopCounterMode(display=False) as counter:
        out = model(x)
        if backward:
            out.sum().backward()
    for p in model.parameters():
        p.grad = None
    root = type(model).__name__
    return {("" if name in ("Global", root) else name[len(root) + 1:]): sum(ops.values())
            for name, ops in counter.get_flop_counts().items()}


@pytest.mark.parametrize("backward", [False, True])
def test_macs_match_flop_counter_per_module(backward):
    torch.manual_seed(0)
    model = conv_net()
    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    peer = peer_counts(model, x, backward)
    ours = count_ops(model, x, backward=backward)
    # forward by hand: conv0 = 2*8*16*16 * 3*3*3 = 110592 MACs; conv2.0 = 2*4*7*7 * 8*3*3 = 28224 MACs;
    # linear = 2*196*5 = 1960 MACs; total 140776 MACs. Backward (the input requires grad): each layer
    # computes grad-input and grad-weight, each as many MACs as its forward: 2 * 140776 = 281552.
    assert ours.phases["forward"].macs == 140776
    if backward:
        assert ours.phases["backward"].macs == 281552
    assert 2 * ours.macs == peer[""]
    for name, flops in peer.items():
        assert 2 * ours.by_module[name].macs == flops, name
