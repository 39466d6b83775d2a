"""Ctrl-C in the middle of a measurement leaves nothing behind; repeated profiling gives identical numbers.

A ``KeyboardInterrupt`` raised inside the model's forward (what Ctrl-C does while the forward
runs) must propagate as itself (never wrapped in a ``ForwardError``), and leave the model as
found: no dispatch mode still active, every module's ``forward`` its class's own, no hook left,
buffers, modes and the random generator state untouched. Profiling the same model twice gives
the same counts, bit for bit.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

import deeplite_like
from deeplite_like.backends.torch import TorchProfiler, count_ops
from deeplite_like.profiling import FlopsProfiler


class Interruptible(nn.Module):
    """Conv-BN-ReLU then Linear; raises KeyboardInterrupt in forward while ``armed``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 8 * 8, 2)
        self.drop = nn.Dropout(0.5)
        self.armed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x)))
        if self.armed:
            raise KeyboardInterrupt
        return self.fc(self.drop(x.flatten(1)))


def snapshot(model: nn.Module) -> dict:
    return {
        "state": {k: v.clone() for k, v in model.state_dict().items()},
        "training": [m.training for m in model.modules()],
        "forwards": [("forward" in vars(m), type(m).forward) for m in model.modules()],
        "hooks": [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()],
        "rng": torch.get_rng_state(),
    }


def assert_as_found(model: nn.Module, before: dict) -> None:
    after = snapshot(model)
    assert _get_current_dispatch_mode() is None
    assert after["training"] == before["training"] and after["hooks"] == before["hooks"]
    assert after["forwards"] == before["forwards"]
    assert all(type(m).forward is before_forward for m, (_, before_forward) in zip(model.modules(), before["forwards"]))
    for key, value in before["state"].items():
        assert torch.equal(after["state"][key], value), key
    assert torch.equal(after["rng"], before["rng"])


MEASUREMENTS = {
    "count_ops": lambda m, x: count_ops(m, x),
    "count_ops backward": lambda m, x: count_ops(m, x, backward=True),
    "compute_network_status": lambda m, x: TorchProfiler(m, {"test": [(x, torch.tensor([0, 1]))]})
    .compute_network_status(batch_size=2, min_run_time=0.01),
    "get_model_profile": lambda m, x: deeplite_like.get_model_profile(m, args=(x,), print_profile=False, warm_up=0),
}


@pytest.mark.parametrize("name", sorted(MEASUREMENTS))
@pytest.mark.parametrize("train", [False, True])
def test_ctrl_c_inside_the_forward_leaves_the_model_as_found(name, train):
    torch.manual_seed(0)
    model = Interruptible().train(train)
    x = torch.randn(2, 3, 8, 8)
    before = snapshot(model)
    model.armed = True
    with pytest.raises(KeyboardInterrupt):
        MEASUREMENTS[name](model, x)
    model.armed = False
    assert_as_found(model, before)
    MEASUREMENTS[name](model, x)  # and the next measurement works
    assert_as_found(model, before)


def test_ctrl_c_inside_a_flops_profiler_window_then_end_profile_leaves_nothing():
    model = Interruptible().train()
    x = torch.randn(2, 3, 8, 8)
    before = snapshot(model)
    profiler = FlopsProfiler(model)
    profiler.start_profile()
    model.armed = True
    try:
        with pytest.raises(KeyboardInterrupt):
            model(x)
    finally:
        model.armed = False
        profiler.end_profile()
    assert _get_current_dispatch_mode() is None
    assert [("forward" in vars(m), type(m).forward) for m in model.modules()] == before["forwards"]


def test_repeated_counts_are_identical():
    # Conv2d(3, 4, 3) on 2x3x8x8 with padding 1: 2*4*8*8*27 = 13,824 MACs; Linear(256, 2) on 2 rows: 1,024 MACs.
    model = Interruptible().eval()
    x = torch.randn(2, 3, 8, 8)
    first = count_ops(model, x)
    assert first.macs == 13_824 + 1_024
    for _ in range(3):
        again = count_ops(model, x)
        assert again.as_dict() == first.as_dict()
    report = deeplite_like.get_model_profile(model, args=(x,), print_profile=False, warm_up=0)
    assert (report.macs, report.flops) == (first.macs, first.flops)


def test_ctrl_c_on_the_command_line_exits_130_with_one_line(capsys):
    from deeplite_like.cli import main

    code = main(["profile", "tests.cli.fixture_models:interrupted", "--input-shape", "2,4", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 130 and err.strip() == "deeplite-like: interrupted"


@pytest.mark.parametrize("enabled", [True, False])
def test_the_fused_transformer_fast_path_setting_is_put_back(enabled):
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True).eval()
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(enabled)
    try:
        with torch.no_grad():
            count_ops(layer, torch.randn(1, 4, 8))
            deeplite_like.get_model_profile(layer, args=(torch.randn(1, 4, 8),), print_profile=False, warm_up=0)
        assert torch.backends.mha.get_fastpath_enabled() is enabled
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)
