"""A copy or pickle of the model made while it is profiled is a plain copy of the user's model.

Nothing of ours is stored on the modules while counting or timing (class-level forward
dispatch, global hooks): ``copy.deepcopy`` inside a counted forward, or of the model inside a
``FlopsProfiler`` window (an EMA, a best-model snapshot), gives a module whose ``forward`` runs
on its own weights, and ``torch.save`` of the model works; the copies keep working after the
profile ends.
"""
from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch import count_ops
from deeplite_like.backends.torch.counting import recorder
from deeplite_like.backends.torch.latency import module_forward_times
from deeplite_like.backends.torch.memory import peak_activation_memory
from deeplite_like.backends.torch.params import layerwise_summary
from deeplite_like.profiling import FlopsProfiler, get_model_profile

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

X = torch.ones(2, 4)


def assert_plain(module: nn.Module) -> None:
    """No trace of ours: no instance forward, no hooks, and the class's forward is its own."""
    for name, sub in module.named_modules():
        assert "forward" not in sub.__dict__, name
        assert not sub._forward_hooks and not sub._forward_pre_hooks, name
        assert type(sub).forward is type(sub).__dict__.get("forward", type(sub).forward), name
        assert not hasattr(type(sub).forward, "__counted_original__"), name


def assert_nothing_attached() -> None:
    assert not torch.nn.modules.module._has_any_global_hook()
    assert getattr(recorder._local, "mode", None) is None
    assert torch._C._len_torch_dispatch_stack() == 0
    module_globals = torch.nn.modules.module
    assert not module_globals._global_forward_hooks and not module_globals._global_forward_pre_hooks


def zeroed(module: nn.Module) -> nn.Module:
    with torch.no_grad():
        for p in module.parameters():
            p.zero_()
    return module


class Snapshotting(nn.Module):
    """Deep-copies (and pickles) its own layers inside its forward, as an EMA or a snapshot would."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.block = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
        self.how = how
        self.copies: list = []

    def forward(self, x):
        if self.how == "deepcopy":
            fc, block = copy.deepcopy(self.fc), copy.deepcopy(self.block)
        else:  # a pickle round trip (what torch.save / multiprocessing do)
            fc, block = pickle.loads(pickle.dumps((self.fc, self.block)))
        zeroed(fc)
        zeroed(block)
        # a zeroed copy runs on ITS weights: all zeros, whatever the original's weights are
        self.copies.append((fc, block, fc(x), block(torch.ones(2, 3))))
        return self.block(self.fc(x))


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("measure", ["count", "count_backward", "count_meta_off", "model_profile", "layerwise",
                                     "memory", "layer_timing"])
def test_a_copy_made_inside_a_measured_forward_is_plain(how, measure):
    torch.manual_seed(0)
    model = Snapshotting(how)
    run = {
        "count": lambda: count_ops(model, X),
        "count_backward": lambda: count_ops(model, X, backward=True),
        "count_meta_off": lambda: count_ops(model, X, meta=False),
        "model_profile": lambda: get_model_profile(model, args=[X], print_profile=False),
        "layerwise": lambda: layerwise_summary(model, (X,)),
        "memory": lambda: peak_activation_memory(model, (X,)),
        "layer_timing": lambda: module_forward_times(model, (X,), repeats=1, warmup=0),
    }[measure]
    result = run()
    assert model.copies
    for fc, block, fc_out, block_out in model.copies:
        assert torch.equal(fc_out, torch.zeros(2, 3)) and torch.equal(block_out, torch.zeros(2, 3))
        assert_plain(fc)
        assert_plain(block)
        assert torch.equal(fc(X), torch.zeros(2, 3))  # and still after the measurement
    assert_plain(model)
    assert_nothing_attached()
    if measure == "count":
        # only the model's own modules are attributed: Linear(4, 3) and Linear(3, 3) at batch 2 are
        # 24 + 18 = 42 MACs; the copies' 42 MACs ran inside the root module's call and count there
        assert (result.by_module["fc"].macs, result.by_module["block.0"].macs) == (24, 18)
        assert result.by_module["fc"].calls == 1 and result.macs == 84
        assert set(result.by_module) == {"", "fc", "block", "block.0", "block.1"}


def test_torch_save_inside_a_counted_forward_loads_a_plain_model():
    saved: list[bytes] = []

    class Saving(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            buffer = io.BytesIO()
            torch.save(self.fc, buffer)
            saved.append(buffer.getvalue())
            return self.fc(x)

    model = Saving()
    result = count_ops(model, X)
    assert result.by_module["fc"].macs == 24  # 2*4*3
    loaded = torch.load(io.BytesIO(saved[0]), weights_only=False)
    assert_plain(loaded)
    assert torch.equal(loaded(X), model.fc(X))


# -- FlopsProfiler windows ----------------------------------------------------------------------
def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


@pytest.mark.parametrize("module_latency", [True, False])
def test_deepcopy_and_torch_save_inside_a_flops_profiler_window(module_latency):
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    profiler = FlopsProfiler(model, module_latency=module_latency)
    profiler.start_profile()
    model(X).sum().backward()
    optimizer.step()
    ema = copy.deepcopy(model)  # an EMA / best-model snapshot taken mid-profile
    buffer = io.BytesIO()
    torch.save(model, buffer)  # a checkpoint taken mid-profile
    zeroed(ema[0])
    # the copy runs on its own weights: layer 0 zeroed gives relu(0) = 0, so the output is layer 2's bias
    assert torch.equal(ema(X), ema[2].bias.detach().expand(2, 2))
    model(X)  # the model keeps being profiled; the copy's calls above are not the model's
    profile = profiler.get_profile()
    profiler.stop_profile()
    # Linear(4, 8) at batch 2: 64 MACs per call, 2 calls of the model (the copy's call is not one)
    assert profile.module("0").calls == 2 and profile.module("0").phase("forward").macs == 128
    profiler.end_profile()
    assert_plain(model)
    assert_plain(ema)
    assert_nothing_attached()
    assert torch.equal(ema(X), ema[2].bias.detach().expand(2, 2))  # no KeyError from the timers, ever
    loaded = torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
    assert_plain(loaded)
    assert torch.equal(loaded(X), model(X))


def test_a_users_own_instance_forward_survives_a_copy_inside_the_window():
    model = mlp()
    first = model[0]
    first.forward = lambda x: type(first).forward(first, x) * 2  # the user's own per-instance forward
    profiler = FlopsProfiler(model)
    profiler.start_profile()
    model(X)
    snapshot = copy.deepcopy(model)
    profiler.end_profile()
    assert "forward" in model[0].__dict__ and "forward" not in model[2].__dict__
    assert not model[0]._forward_hooks and not model[0]._forward_pre_hooks
    assert_nothing_attached()
    assert torch.equal(snapshot(X), model(X))
