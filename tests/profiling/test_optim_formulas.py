"""Optimizer formulas (formulas/training.py): every implementation of a step costs the same.

The parameters are those of Linear(4, 3): 12 + 3 = 15 elements in 2 tensors. Each step counts
the ops that run inside ``optimizer.step()`` only (the gradients come from an uncounted pass).
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import registry
from deeplite_like.backends.torch.counting.recorder import CountingMode
from deeplite_like.backends.torch.counting.registry import CountOptions

IMPLEMENTATIONS = ({"foreach": False}, {"foreach": True}, {"fused": True})


def counted(fn) -> tuple[int, int, dict]:
    mode = CountingMode(CountOptions())
    mode.set_phase("step")
    with mode:
        fn()
    result = mode.finish()
    return result.macs, result.flops, dict(result.untracked)


def step_flops(make, steps: int = 2) -> list[int]:
    """FLOPs of each of ``steps`` optimizer steps on Linear(4, 3)."""
    torch.manual_seed(0)
    layer = nn.Linear(4, 3)
    optimizer = make(layer.parameters())
    flops = []
    for _ in range(steps):
        optimizer.zero_grad()
        layer(torch.randn(2, 4)).sum().backward()
        macs, value, untracked = counted(optimizer.step)
        assert (macs, untracked) == (0, {})
        flops.append(value)
    return flops


CASES = [
    # SGD: p += -lr * g = 2 per element: 30
    ("sgd", torch.optim.SGD, {"lr": 0.1}, [30, 30]),
    # momentum: step 1 copies g into the buffer (free) then updates: 30; later mul 1 + add 1 + update 2 = 60
    ("sgd momentum", torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, [30, 60]),
    # + weight decay (g + wd*p: 2) + nesterov (g + m*buf: 2): step 1 6 x 15 = 90; later 8 x 15 = 120
    ("sgd nesterov wd", torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
     [90, 120]),
    # dampening != 0: the buffer add has alpha = 1 - dampening: 2 instead of 1 -> 5 x 15 = 75 after step 1
    ("sgd dampening", torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.5}, [30, 75]),
    # Adam: 13 per element + 1 per step counter (2 tensors): 13 x 15 + 2 = 197
    ("adam", torch.optim.Adam, {"lr": 0.1}, [197, 197]),
    # Adam weight decay adds g + wd*p: 15 x 15 + 2 = 227; amsgrad adds a maximum: 14 x 15 + 2 = 212
    ("adam wd", torch.optim.Adam, {"lr": 0.1, "weight_decay": 0.1}, [227, 227]),
    ("adam amsgrad", torch.optim.Adam, {"lr": 0.1, "amsgrad": True}, [212, 212]),
    # AdamW (default weight_decay 0.01): p *= 1 - lr*wd adds 1: 14 x 15 + 2 = 212
    ("adamw", torch.optim.AdamW, {"lr": 0.1}, [212, 212]),
    # Adagrad: addcmul 2 + sqrt, add eps 2 + addcdiv 3 = 7 x 15 + 2 = 107; weight decay + 2: 137
    ("adagrad", torch.optim.Adagrad, {"lr": 0.1}, [107, 107]),
    ("adagrad wd", torch.optim.Adagrad, {"lr": 0.1, "weight_decay": 0.1}, [137, 137]),
]


@pytest.mark.parametrize("name, cls, options, expected", CASES, ids=[c[0] for c in CASES])
def test_every_implementation_counts_the_hand_derived_cost(name, cls, options, expected):
    for impl in IMPLEMENTATIONS:
        assert step_flops(lambda p: cls(p, **options, **impl)) == expected, impl


def test_maximize_negates_the_gradient_once():
    # Adam maximize: 14 x 15 + 2 = 212; SGD maximize: 3 x 15 = 45
    for impl in IMPLEMENTATIONS:
        assert step_flops(lambda p: torch.optim.Adam(p, lr=0.1, maximize=True, **impl), 1) == [212]
        assert step_flops(lambda p: torch.optim.SGD(p, lr=0.1, maximize=True, **impl), 1) == [45]


FOREACH_VS_SINGLE = [
    ("sqrt", lambda xs: torch._foreach_sqrt(xs), lambda x: torch.sqrt(x)),
    ("sigmoid", lambda xs: torch._foreach_sigmoid(xs), lambda x: torch.sigmoid(x)),
    ("mul scalar", lambda xs: torch._foreach_mul(xs, 0.5), lambda x: x * 0.5),
    ("add alpha", lambda xs: torch._foreach_add(xs, xs, alpha=0.5), lambda x: torch.add(x, x, alpha=0.5)),
    ("addcdiv", lambda xs: torch._foreach_addcdiv(xs, xs, xs, value=0.1), lambda x: torch.addcdiv(x, x, x, value=0.1)),
    ("addcmul 1", lambda xs: torch._foreach_addcmul(xs, xs, xs), lambda x: torch.addcmul(x, x, x)),
    ("lerp", lambda xs: torch._foreach_lerp(xs, xs, 0.3), lambda x: torch.lerp(x, x, 0.3)),
    ("pow", lambda xs: torch._foreach_pow(xs, 2.0), lambda x: torch.pow(x, 2.0)),
    ("norm", lambda xs: torch._foreach_norm(xs), lambda x: torch.linalg.vector_norm(x)),
    ("max", lambda xs: torch._foreach_max(xs), lambda x: torch.max(x)),
    ("maximum", lambda xs: torch._foreach_maximum(xs, xs), lambda x: torch.maximum(x, x)),
]


@pytest.mark.parametrize("name, listed, single", FOREACH_VS_SINGLE, ids=[c[0] for c in FOREACH_VS_SINGLE])
def test_a_list_op_costs_the_sum_of_the_single_tensor_op(name, listed, single):
    tensors = [torch.rand(3, 4) + 0.5, torch.rand(5) + 0.5]
    assert counted(lambda: listed(tensors)) == counted(lambda: [single(t) for t in tensors])


def test_foreach_norm_is_priced_like_vector_norm():
    # p=2 over 12 + 5 elements: 2N + 1 per tensor = 25 + 11 = 36
    assert counted(lambda: torch._foreach_norm([torch.rand(3, 4), torch.rand(5)]))[1] == 36


def test_clip_grad_norm_runs_with_no_untracked_op():
    layer = nn.Linear(4, 3)
    layer(torch.randn(2, 4)).sum().backward()
    macs, flops, untracked = counted(lambda: nn.utils.clip_grad_norm_(layer.parameters(), 1.0, foreach=True))
    assert untracked == {} and flops > 0


def test_moves_and_profiler_markers_are_free():
    for op in (torch.ops.aten._foreach_zero_, torch.ops.aten._foreach_copy_,
               torch.ops.profiler._record_function_enter_new, torch.ops.profiler._record_function_exit):
        assert registry.is_free(op) and registry.lookup(op) is None
