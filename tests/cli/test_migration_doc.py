"""docs/migration.rst: every figure of its side-by-side table is measured (ours) or re-derived (deeplite's) here."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "migration.rst").read_text(encoding="utf-8")
sys.path.insert(0, str(ROOT / "examples" / "seeds"))
from seed_stand_ins import lenet5, resnet18_cifar  # noqa: E402

from deeplite_like.backends.torch import TorchProfiler  # noqa: E402

KEYS = ("macs", "flops", "total_params", "model_size", "memory_footprint", "peak_activation_memory")


def row(metric: str) -> str:
    """The text of the side-by-side table's row ``metric`` (up to the next row)."""
    table = DOC.split("The same model, side by side", 1)[1]
    start = table.index(f"   * - {metric}\n")
    end = table.find("\n   * - ", start + 1)
    return table[start:end if end != -1 else None]


def ours(model: nn.Module, shape: tuple) -> dict:
    torch.manual_seed(0)
    profiler = TorchProfiler.from_inputs(model, torch.randn(*shape))
    return {key: profiler.compute_status(key) for key in KEYS}


@pytest.fixture(scope="module")
def measured() -> dict:
    return {"lenet": ours(lenet5(), (1, 1, 32, 32)), "resnet": ours(resnet18_cifar(100), (1, 3, 32, 32))}


def test_our_figures_are_the_docs(measured):
    for model in ("lenet", "resnet"):
        values = measured[model]
        assert f"{values['macs']:,} MACs" in row("MACs")
        assert f"{values['flops']:,} FLOPs" in row("FLOPs")
        assert f"{values['total_params']:,}\n" in row("parameters")
        assert f"{values['model_size']:,} bytes" in row("model size")
        assert (f"{values['memory_footprint']:,} bytes (peak activations {values['peak_activation_memory']:,})"
                in row("memory footprint"))
    # LeNet-5 by hand (docs/zoo.rst): 416,520 MACs, 61,706 params, 246,824 bytes of float32 weights
    assert (measured["lenet"]["macs"], measured["lenet"]["total_params"]) == (416_520, 61_706)
    assert measured["lenet"]["model_size"] == 4 * 61_706
    # footprint = params + buffers + peak activations (ResNet-18: 20 BN layers' running stats and counters)
    for model in ("lenet", "resnet"):
        values = measured[model]
        assert values["memory_footprint"] - values["model_size"] - values["peak_activation_memory"] >= 0


def deeplite_macs(model: nn.Module, shape: tuple, our_macs: int) -> int:
    """deeplite's (ptflops') figure: our MACs + bias-add, activation-output and pooling-input elements."""
    extra = []

    def hook(module, inputs, output):
        if isinstance(module, (nn.Conv2d, nn.Linear)) and module.bias is not None:
            extra.append(output.numel())
        elif isinstance(module, nn.ReLU):
            extra.append(output.numel())
        elif isinstance(module, nn.MaxPool2d):
            extra.append(inputs[0].numel())

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model(torch.randn(*shape))
    finally:
        for handle in handles:
            handle.remove()
    return our_macs + sum(extra)


def test_deeplites_figures_follow_from_its_formulas(measured):
    # LeNet-5: 416,520 + biases (4,704 + 1,600 + 120 + 84 + 10) + ReLUs (4,704 + 1,600 + 120 + 84)
    #          + pool inputs (4,704 + 1,600) = 435,850 "MACs" = 0.00043585 GigaMACs
    macs = deeplite_macs(lenet5(), (1, 1, 32, 32), measured["lenet"]["macs"])
    assert macs == 435_850
    assert f"{macs / 1e9:.8f} GigaMACs ({macs:,})" in row("MACs")
    for model, text in (("lenet", "0.0617 Millions"), ("resnet", "11.2201 Millions")):
        params = measured[model]["total_params"]
        assert f"{params / 1e6:.4f} Millions" == text and text in row("parameters")
        # deeplite: params * 4 bytes / 2**20, labelled MB
        assert f"{params * 4 / 2**20:.4f} MB" in row("model size")
    # The manual's ResNet-18 (0.5567 GigaMACs) is ours plus its extra elements: within 0.3 %
    assert abs(0.5567e9 - measured["resnet"]["macs"]) / 0.5567e9 < 0.003
