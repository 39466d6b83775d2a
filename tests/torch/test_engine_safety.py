"""The user's model comes back untouched; errors say where; counting is repeatable and thread-safe."""
from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import ForwardError, count_ops

from .engine_fixtures import stats, toy_table  # noqa: F401  (fixture)

pytestmark = [pytest.mark.usefixtures("toy_table"), pytest.mark.filterwarnings("ignore::UserWarning")]

HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
              "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
        self.head = nn.Linear(4, 2)
        self.grad_enabled_seen = None
        self.training_seen = None

    def forward(self, x):
        self.grad_enabled_seen = torch.is_grad_enabled()
        self.training_seen = self.training
        return self.head(self.block(x))


def snapshot(model: nn.Module) -> dict:
    return {
        "training": {n: m.training for n, m in model.named_modules()},
        "params": {n: (p.device, p.dtype, p.requires_grad, p.detach().clone(), p.grad)
                   for n, p in model.named_parameters()},
        "buffers": {n: (b, b.detach().clone()) for n, b in model.named_buffers()},
        "hooks": {(n, d): dict(getattr(m, d)) for n, m in model.named_modules() for d in HOOK_DICTS},
    }


def assert_same(before: dict, after: dict) -> None:
    assert after["training"] == before["training"]
    assert after["hooks"] == before["hooks"]
    for name, (device, dtype, requires_grad, value, grad) in before["params"].items():
        a_device, a_dtype, a_requires_grad, a_value, a_grad = after["params"][name]
        assert (a_device, a_dtype, a_requires_grad) == (device, dtype, requires_grad), name
        assert torch.equal(a_value, value), name
        assert a_grad is grad, name
    for name, (buf, value) in before["buffers"].items():
        a_buf, a_value = after["buffers"][name]
        assert a_buf is buf and torch.equal(a_value, value), name


def user_model() -> Net:
    model = Net().train()
    model.head.register_forward_hook(lambda m, i, o: None)  # the user's own hooks must survive
    model.block.register_forward_pre_hook(lambda m, i: None)
    model.head.weight.grad = torch.ones_like(model.head.weight)
    model.block[0].requires_grad_(False)
    return model


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_model_untouched_after_counting(backward, train):
    model = user_model().train(train)
    before = snapshot(model)
    count_ops(model, torch.randn(3, 4), backward=backward)
    assert_same(before, snapshot(model))  # includes batch-norm running stats in train mode
    assert model.training_seen is train  # counted in the user's mode, not switched
    assert torch._C._len_torch_dispatch_stack() == 0


def test_counting_uses_the_callers_grad_mode():
    model = Net()
    with torch.no_grad():
        count_ops(model, torch.randn(3, 4))
    assert model.grad_enabled_seen is False
    count_ops(model, torch.randn(3, 4))
    assert model.grad_enabled_seen is True


@pytest.mark.parametrize("backward", [False, True])
def test_model_untouched_after_a_raising_forward(backward):
    model = user_model()
    before = snapshot(model)
    with pytest.raises(ForwardError):
        count_ops(model, torch.randn(3, 5), backward=backward)  # Linear(4, 4) gets 5 features
    assert_same(before, snapshot(model))
    assert torch._C._len_torch_dispatch_stack() == 0


def test_wrong_shape_error_names_the_innermost_module_and_its_inputs():
    model = nn.Sequential(nn.Linear(4, 3), nn.Sequential(nn.ReLU(), nn.Linear(5, 2)))
    with pytest.raises(ForwardError) as info:
        count_ops(model, torch.randn(2, 4))
    message = str(info.value)
    assert "module '1.1' (Linear)" in message
    assert "(Tensor[float32, 2x3])" in message  # what Linear(5, 2) received
    assert isinstance(info.value.__cause__, RuntimeError)  # the original error is chained


def test_error_in_a_kwarg_input_is_described():
    class Masked(nn.Module):
        def forward(self, x, mask=None):
            return x * mask

    with pytest.raises(ForwardError) as info:
        count_ops(Masked(), torch.randn(2, 3), kwargs={"mask": torch.ones(4)})
    assert "the root module (Masked)" in str(info.value)
    assert "mask=Tensor[float32, 4]" in str(info.value)


def test_error_caught_inside_the_model_does_not_confuse_attribution():
    class Fallback(nn.Module):
        def __init__(self):
            super().__init__()
            self.bad = nn.Linear(5, 2)
            self.good = nn.Linear(4, 2)

        def forward(self, x):
            try:
                return self.bad(x)
            except RuntimeError:
                return self.good(x)

    result = count_ops(Fallback(), torch.randn(3, 4))
    # only good runs to completion: Linear(4, 2), batch 3: MACs 24, FLOPs 48 + 6 = 54
    assert stats(result.by_module["good"]) == (24, 54, 1)
    assert stats(result.by_module[""]) == (24, 54, 1)
    assert stats(result.by_module["bad"]) == (0, 0, 1)


def test_counting_twice_gives_identical_results():
    model = user_model()
    x = torch.randn(3, 4, requires_grad=True)
    first = count_ops(model, x, backward=True)
    second = count_ops(model, x, backward=True)
    assert first.as_dict() == second.as_dict()
    assert first.macs > 0


def deep_mlp(width: int, depth: int) -> nn.Module:
    return nn.Sequential(*[nn.Linear(width, width, bias=False) for _ in range(depth)])


def test_two_threads_counting_two_models_at_once():
    # model A: 6 x Linear(8, 8), batch 2: 6 * 2*8*8 = 768 MACs; per layer 128
    # model B: 3 x Linear(16, 16), batch 4: 3 * 4*16*16 = 3072 MACs; per layer 1024
    jobs = {"a": (deep_mlp(8, 6), torch.randn(2, 8), 768, 128), "b": (deep_mlp(16, 3), torch.randn(4, 16), 3072, 1024)}
    barrier = threading.Barrier(len(jobs))
    failures: list[str] = []

    def work(key):
        model, x, macs, per_layer = jobs[key]
        barrier.wait()
        for _ in range(20):
            result = count_ops(model, x, backward=(_ % 2 == 1))
            forward = result.phases["forward"].macs
            if forward != macs or any(result.by_module[str(i)].macs != per_layer * (1 if _ % 2 == 0 else 3)
                                      for i in range(len(model)) if i > 0):
                failures.append(f"{key}: {result.as_dict()}")

    threads = [threading.Thread(target=work, args=(key,)) for key in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    for model, *_ in jobs.values():
        assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_parameters_and_buffers_written_by_the_forward_are_restored():
    class Writer(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.full((2, 2), 3.0))
            self.register_buffer("steps", torch.zeros(()))
            self.register_buffer("scale", torch.ones(2))

        def forward(self, x):
            with torch.no_grad():
                self.w.data.clamp_(-1, 1)  # an in-place write through an alias of the parameter
                self.scale.mul_(2)  # an in-place write of a buffer
            self.steps = self.steps + 1  # a buffer replaced by a new tensor
            return x @ self.w * self.scale

    model = Writer()
    before = snapshot(model)
    result = count_ops(model, torch.randn(1, 2))
    assert_same(before, snapshot(model))
    assert torch.equal(model.w, torch.full((2, 2), 3.0)) and float(model.steps) == 0.0
    # mm (1, 2) @ (2, 2): 4 MACs, 8 FLOPs; `* scale`: 2 FLOPs; `steps + 1`: 1 FLOP.
    # clamp_ and mul_ are not in the toy table: untracked, 0 FLOPs.
    assert (result.macs, result.flops) == (4, 8 + 2 + 1)
    assert result.untracked == {"aten.clamp_": 1, "aten.mul_": 1}
