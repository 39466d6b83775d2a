"""Where the engine files each op: modules (nested), operators, the gap, shared modules."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from deeplite_like.backends.torch.counting import count_ops

from .engine_fixtures import stats, toy_table  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("toy_table")


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x  # relu and add run directly in Inner


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.head = nn.Linear(4, 2, bias=False)

    def forward(self, x):
        return self.head(self.inner(x) * 2) + 1  # mul and add run in the root itself


def test_nested_attribution_and_root_ops():
    result = count_ops(Outer(), torch.randn(3, 4))
    # inner.fc: Linear(4, 4), batch 3: addmm MACs = 3*4*4 = 48; FLOPs = 2*48 + bias 3*4 = 108
    assert stats(result.by_module["inner.fc"]) == (48, 108, 1)
    # inner: fc + relu (3*4 = 12) + residual add (12): MACs 48, FLOPs 108 + 24 = 132
    assert stats(result.by_module["inner"]) == (48, 132, 1)
    # head: Linear(4, 2, bias=False), batch 3: mm MACs = 3*4*2 = 24; FLOPs = 48
    assert stats(result.by_module["head"]) == (24, 48, 1)
    # root: everything + its own `* 2` (3*4 = 12) and `+ 1` (3*2 = 6): MACs 72, FLOPs 132+48+12+6 = 198
    assert stats(result.by_module[""]) == (72, 198, 1)
    assert (result.macs, result.flops) == (72, 198)
    assert list(result.by_module) == ["", "inner", "inner.fc", "head"]  # in the order they ran


def test_module_ops_hold_the_gap_between_parent_and_children():
    result = count_ops(Outer(), torch.randn(3, 4))
    inner_own = result.module_ops["inner"]
    # only relu (12 FLOPs) and add (12 FLOPs) ran in Inner itself, not in its child fc
    assert {k: stats(v) for k, v in inner_own.items()} == {"aten.relu": (0, 12, 1), "aten.add": (0, 12, 1)}
    gap = result.by_module["inner"].flops - result.by_module["inner.fc"].flops
    assert gap == sum(s.flops for s in inner_own.values()) == 24
    # the root's own ops: mul 12 FLOPs and add 6 FLOPs
    assert {k: stats(v) for k, v in result.module_ops[""].items()} == {"aten.mul": (0, 12, 1),
                                                                        "aten.add": (0, 6, 1)}
    assert {k: stats(v) for k, v in result.module_ops["inner.fc"].items()} == {"aten.addmm": (48, 108, 1)}
    # by operator: add = 12 (inner) + 6 (root) in 2 calls
    assert stats(result.by_operator["aten.add"]) == (0, 18, 2)
    assert stats(result.by_operator["aten.addmm"]) == (48, 108, 1)
    assert stats(result.by_operator["aten.mm"]) == (24, 48, 1)


class SharedThrice(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = self.a  # the same instance under a second name

    def forward(self, x):
        return self.b(self.a(self.a(x)))


def test_shared_module_counted_once_per_call_under_its_first_name():
    result = count_ops(SharedThrice(), torch.randn(1, 2))
    # Linear(2, 2), batch 1: MACs = 1*2*2 = 4; FLOPs = 8 + bias 2 = 10 per call; 3 calls
    assert stats(result.by_module["a"]) == (12, 30, 3)
    assert "b" not in result.by_module
    assert (result.macs, result.flops) == (12, 30)


class EveryWayToMatmul(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        y = F.linear(x, self.w)          # functional: t + mm
        y = torch.mm(y, self.w)          # torch.*
        y = y.matmul(self.w)             # tensor method
        return y @ self.w                # Python operator


def test_every_calling_style_is_seen_once():
    result = count_ops(EveryWayToMatmul(), torch.randn(2, 3))
    # four (2, 3) @ (3, 3) products: 4 calls of 2*3*3 = 18 MACs = 72 MACs, 144 FLOPs
    assert stats(result.by_operator["aten.mm"]) == (72, 144, 4)
    assert (result.macs, result.flops) == (72, 144)


class NestedInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4, bias=False)

    def forward(self, pair, *, mask=None):
        a, extra = pair
        return self.fc(a + extra["b"]) * mask


def test_nested_args_and_kwargs_and_batch_size():
    a, b, mask = torch.randn(5, 4), torch.randn(5, 4), torch.ones(5, 4)
    result = count_ops(NestedInputs(), (a, {"b": b}), kwargs={"mask": mask})
    # add 5*4 = 20; mm 5*4*4 = 80 MACs (160 FLOPs); mul by mask 20: FLOPs = 20 + 160 + 20 = 200
    assert (result.macs, result.flops) == (80, 200)
    assert result.batch_size == 5  # first dim of the first tensor argument


def test_batch_size_unknown_without_a_leading_dimension():
    class Scale(nn.Module):
        def forward(self, s, x):
            return x * s

    result = count_ops(Scale(), torch.tensor(2.0), torch.randn(3))
    assert result.batch_size is None
    assert result.flops == 3  # mul of 3 elements


def test_recursive_module_is_not_counted_twice_in_its_own_total():
    class Recursive(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2, bias=False)

        def forward(self, x, depth=2):
            x = self.fc(x)
            return self(x, depth=depth - 1) if depth > 1 else x

    result = count_ops(Recursive(), torch.randn(1, 2))
    # two calls of the root, each one mm of 1*2*2 = 4 MACs: 8 MACs in total, not 4 + 8
    assert stats(result.by_module[""]) == (8, 16, 2)
    assert stats(result.by_module["fc"]) == (8, 16, 2)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_torchscript_submodule_is_counted_in_its_parent():
    model = nn.Sequential(nn.Linear(4, 4), torch.jit.script(nn.Linear(4, 2)))
    result = count_ops(model, torch.randn(2, 4))
    # Linear(4, 4), batch 2: 2*4*4 = 32 MACs, 64 + 8 = 72 FLOPs
    assert stats(result.by_module["0"]) == (32, 72, 1)
    # the scripted Linear(4, 2) takes no hooks: 2*4*2 = 16 MACs, 32 + 4 = 36 FLOPs, filed under the root
    assert "1" not in result.by_module
    assert {k: stats(v) for k, v in result.module_ops[""].items()} == {"aten.addmm": (16, 36, 1)}
    assert (result.macs, result.flops) == (48, 108)
