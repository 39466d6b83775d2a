"""FlopsProfiler around a real torch training step: forward, backward and optimizer measured apart.

mlp(bias=True) = Linear(4, 8), ReLU, Linear(8, 2); batch 3; loss = out.sum().
  forward   L1 addmm: 3*4*8 = 96 MACs, 2*96 + bias 24 = 216 FLOPs; relu 24; L2 addmm: 3*8*2 = 48 MACs,
            96 + bias 6 = 102 FLOPs.  Total 144 MACs, 342 FLOPs.
  other     the loss: sum of the (3, 2) output = 6 FLOPs (its backward, an expand, is free).
  backward  L2: dX2 = 3*2*8 = 48 MACs, dW2 = 2*3*8 = 48 MACs, db2 = sum of (3, 2) = 6 FLOPs;
            relu backward (threshold_backward) 24 FLOPs;
            L1: dW1 = 8*3*4 = 96 MACs, db1 = sum of (3, 8) = 24 FLOPs, dX1 = 3*8*4 = 96 MACs only when
            the input requires grad.
            input needs no grad: 48 + 48 + 96 = 192 MACs; 2*192 + 6 + 24 + 24 = 438 FLOPs
            input requires grad: 288 MACs = 2 x 144 exactly; 576 + 54 = 630 FLOPs
mlp(bias=False) = Linear(4, 8), Linear(8, 2) without bias: forward 144 MACs = 288 FLOPs; with the
  input requiring grad backward is 288 MACs = 576 FLOPs = 2 x forward exactly, in MACs and FLOPs.
Parameters of mlp(bias=True): 32 + 8 + 16 + 2 = 58 elements in 4 tensors.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.optim import optimizer as optim_module
from torch.utils._python_dispatch import _get_current_dispatch_mode

import deeplite_like
from deeplite_like.backends.torch.model_profile import TorchFlopsProfiler
from deeplite_like.profiling import FlopsProfiler

from .models import Net, mlp


def phase(profile, name):
    stats = profile.phase(name)
    return stats.macs, stats.flops


def train_step(model, optimizer, x):
    optimizer.zero_grad()
    loss = model(x).sum()
    loss.backward()
    optimizer.step()


def profiled_step(model, optimizer, x, **kwargs):
    prof = FlopsProfiler(model, **kwargs)
    prof.start_profile()
    train_step(model, optimizer, x)
    prof.stop_profile()
    return prof


def test_factory_picks_the_torch_backend():
    prof = deeplite_like.FlopsProfiler(mlp())
    assert isinstance(prof, TorchFlopsProfiler) and isinstance(prof, FlopsProfiler)


def test_linear_only_backward_is_exactly_twice_the_forward():
    model = mlp(bias=False)
    x = torch.randn(3, 4, requires_grad=True)
    prof = profiled_step(model, torch.optim.SGD(model.parameters(), lr=0.1), x)
    profile = prof.get_profile()
    assert phase(profile, "forward") == (144, 288)
    assert phase(profile, "backward") == (288, 576)  # dX1 96 + dW1 96 + dX2 48 + dW2 48
    # SGD: p.add_(grad, alpha=-lr) = 2 FLOPs per element, 32 + 16 = 48 elements
    assert phase(profile, "optimizer") == (0, 96)
    assert phase(profile, "other") == (0, 6)
    assert prof.get_total_flops() == 288 + 576 + 96 + 6
    assert prof.get_total_flops(phase="backward") == 2 * prof.get_total_flops(phase="forward")
    assert x.grad is not None  # the user's step ran as written


def test_backward_is_not_twice_the_forward_when_the_first_input_needs_no_grad():
    model = mlp()
    prof = profiled_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(3, 4))
    profile = prof.get_profile()
    assert phase(profile, "forward") == (144, 342)
    assert phase(profile, "backward") == (192, 438)
    assert phase(profile, "optimizer") == (0, 116)  # 2 FLOPs x 58 elements
    assert (prof.get_total_macs(), prof.get_total_flops()) == (144 + 192, 342 + 438 + 116 + 6)
    assert prof.get_total_params() == 58
    # per module: L1 backward is dW1 (96 MACs, 192 FLOPs) + db1 24; L2 backward is dX2 + dW2 + db2
    first, last = profile.module("0"), profile.module("2")
    assert (phase(first, "forward"), phase(first, "backward")) == ((96, 216), (96, 216))
    assert (phase(last, "forward"), phase(last, "backward")) == ((48, 102), (96, 198))
    assert phase(profile.module("1"), "backward") == (0, 24)
    # the loss, its backward and the optimizer ran outside the model: not in the root module
    assert (profile.root.macs, profile.root.flops) == (144 + 192, 342 + 438)
    assert set(profile.outside) == {"aten.sum", "aten.add_"}


def test_backward_with_input_requiring_grad():
    model = mlp()
    prof = profiled_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(3, 4, requires_grad=True))
    assert phase(prof.get_profile(), "backward") == (288, 630)


def test_adam_step_is_counted_from_the_ops_that_run():
    model = mlp()
    # Adam per element: lerp 3 + mul 1 + addcmul 3 + sqrt 1 + div 1 + add eps 1 + addcdiv 3 = 13;
    # plus step += 1 on each of the 4 step counters: 13 * 58 + 4 = 758 FLOPs
    for impl in ({"foreach": False}, {"foreach": True}, {"fused": True}):
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, **impl)
        prof = profiled_step(model, optimizer, torch.randn(3, 4))
        assert phase(prof.get_profile(), "optimizer") == (0, 758), impl
        assert prof.get_profile().untracked == {}


def test_repeat_profiling_gives_the_same_numbers_for_the_same_step():
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    prof = FlopsProfiler(model)
    x = torch.randn(3, 4)
    figures = []
    for step in range(4):
        if step >= 1:
            prof.start_profile()
        train_step(model, optimizer, x)
        if step >= 1:
            prof.stop_profile()
            profile = prof.get_profile(profile_step=step)
            figures.append(({k: (v.macs, v.flops, v.calls) for k, v in profile.phases.items()},
                            [(n.name, n.macs, n.flops, n.calls) for n in profile.modules()]))
            prof.end_profile()
    # SGD with momentum, after the first step: mul_ 1 + add_ 1 (buffer) + add_ 2 (update) = 4 x 58 = 232
    assert figures[0][0]["optimizer"][:2] == (0, 232)
    assert figures[0] == figures[1] == figures[2]


def test_end_profile_leaves_nothing_attached():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hooks_before = dict(optim_module._global_optimizer_pre_hooks)
    prof = FlopsProfiler(model)
    prof.start_profile()
    assert _get_current_dispatch_mode() is not None
    train_step(model, optimizer, torch.randn(3, 4))
    prof.stop_profile()
    assert prof.get_total_flops() > 0  # readable after stop
    prof.end_profile()
    assert _get_current_dispatch_mode() is None
    assert dict(optim_module._global_optimizer_pre_hooks) == hooks_before
    assert not optim_module._global_optimizer_post_hooks
    for module in model.modules():
        assert "forward" not in module.__dict__
        assert not module._forward_hooks and not module._forward_pre_hooks
        assert not [k for k in vars(module) if "flops" in k.lower() or "profile" in k.lower()]
    with pytest.raises(RuntimeError, match="nothing profiled"):
        prof.get_total_flops()


def test_life_cycle_errors():
    prof = FlopsProfiler(mlp())
    with pytest.raises(RuntimeError, match="not profiling"):
        prof.stop_profile()
    prof.start_profile()
    try:
        with pytest.raises(RuntimeError, match="already profiling"):
            prof.start_profile()
    finally:
        prof.end_profile()
    with pytest.raises(ValueError, match="unknown phase"):
        FlopsProfiler(mlp()).get_total_flops(phase="fwd")


def test_phase_latencies_and_achieved_flops():
    model = mlp()
    prof = profiled_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(3, 4))
    profile = prof.get_profile()
    for name in ("forward", "backward", "optimizer"):
        assert profile.phase(name).latency_s > 0, name
    duration = prof.get_total_duration()
    assert duration >= profile.phase("forward").latency_s + profile.phase("backward").latency_s
    assert profile.flops_per_s == pytest.approx(profile.flops / duration)
    assert prof.get_total_duration(phase="forward") == profile.forward_latency_s
    assert prof.get_total_flops(as_string=True) == "902 FLOPs"  # 342 + 438 + 116 + 6
    assert all(node.latency_s is not None for node in profile.modules())


def test_gradient_accumulation_counts_every_micro_batch():
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    prof = FlopsProfiler(model, module_latency=False)
    prof.start_profile()
    for _ in range(2):
        model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    prof.stop_profile()
    profile = prof.get_profile()
    assert profile.root.calls == 2
    assert phase(profile, "forward") == (288, 684)
    # 2 x 438, plus the second backward accumulating into .grad: add_ on 58 elements
    assert phase(profile, "backward") == (384, 876 + 58)
    assert profile.root.latency_s is None and "module timing: off" in profile.to_text()


def test_autograd_grad_is_counted_as_backward():
    model = mlp(bias=False)
    x = torch.randn(3, 4, requires_grad=True)
    with FlopsProfiler(model) as prof:
        (grad,) = torch.autograd.grad(model(x).sum(), x)
    # only dX: dX2 48 + dX1 96 = 144 MACs (no weight gradient was asked for)
    assert phase(prof.get_profile(), "backward") == (144, 288)


def test_print_model_profile(capsys, tmp_path):
    model = mlp()
    prof = profiled_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(3, 4))
    prof.print_model_profile(profile_step=5, top_modules=2)
    out = capsys.readouterr().out
    assert "Flops profile of Sequential (torch) at step 5" in out
    assert "| backward  | 192 MACs | 438 FLOPs |" in out
    assert "backward is measured operator by operator (not estimated as 2x forward)" in out
    prof.print_model_profile(output_file=tmp_path / "step.json")
    assert capsys.readouterr().out == ""
    assert '"optimizer"' in (tmp_path / "step.json").read_text()


def test_model_parallel_size_scales_the_whole_model_figures():
    model = mlp()
    prof = profiled_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(3, 4),
                         model_parallel_size=4)
    profile = prof.get_profile()
    assert (profile.model_params, profile.model_flops) == (4 * 58, 4 * profile.flops)
    assert prof.get_total_params() == 58  # per device
    text = profile.summary_text()
    assert "params of model = params per device * mp_size (4):" in text and "232" in text
    with pytest.raises(ValueError, match="model_parallel_size"):
        FlopsProfiler(model, model_parallel_size=0)


def test_model_parallel_size_from_a_process_group(tmp_path):
    dist = torch.distributed
    with pytest.raises(RuntimeError, match="not initialized"):
        FlopsProfiler(mlp(), process_group=object()).start_profile()
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        model = mlp()
        prof = profiled_step(model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(3, 4),
                             process_group=dist.group.WORLD)
        profile = prof.get_profile()
        assert (profile.model_parallel_size, profile.world_size, profile.data_parallel_size) == (1, 1, 1)
    finally:
        dist.destroy_process_group()


def test_ignore_list_excludes_modules_from_the_step():
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    prof = FlopsProfiler(model)
    prof.start_profile(ignore_list=[nn.ReLU])
    train_step(model, optimizer, torch.randn(3, 4))
    prof.stop_profile()
    profile = prof.get_profile()
    # the ReLU's forward 24 and backward 24 FLOPs leave the totals
    assert phase(profile, "forward") == (144, 318) and phase(profile, "backward") == (192, 414)
    assert [n.name for n in profile.excluded] == ["1"]


def test_matches_torch_flop_counter_on_a_training_step():
    from torch.utils.flop_counter import FlopCounterMode
    torch.manual_seed(0)
    model, x = mlp(), torch.randn(3, 4, requires_grad=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    prof = profiled_step(model, optimizer, x)
    with FlopCounterMode(display=False) as counter:
        train_step(model, optimizer, x)
    assert counter.get_total_flops() == 2 * prof.get_total_macs()  # the peer prices matmuls only, 2 per MAC


# -- threads ------------------------------------------------------------------------------------
def _in_thread(fn, name):
    import threading

    outcome: dict = {}

    def target():
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed back to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=name)
    thread.start()
    thread.join()
    return outcome


def _assert_nothing_attached(model):
    from deeplite_like.backends.torch.counting import recorder

    for name, module in model.named_modules():
        assert "forward" not in module.__dict__, name
        assert not hasattr(type(module).forward, "__counted_original__"), name
        assert not module._forward_hooks and not module._forward_pre_hooks, name
    assert not torch.nn.modules.module._has_any_global_hook()
    assert not optim_module._global_optimizer_pre_hooks and not optim_module._global_optimizer_post_hooks
    assert _get_current_dispatch_mode() is None and torch._C._len_torch_dispatch_stack() == 0


@pytest.mark.parametrize("finish", ["stop_profile", "end_profile"])
def test_stop_from_another_thread_while_the_starting_thread_runs_is_refused_and_leaves_the_profile_whole(finish):
    model = mlp(bias=True)
    x = torch.randn(3, 4)
    profiler = FlopsProfiler(model)
    profiler.start_profile()
    model(x)
    outcome = _in_thread(getattr(profiler, finish), "stopper")
    error = outcome["error"]
    assert isinstance(error, RuntimeError)
    assert "'stopper'" in str(error) and "'MainThread'" in str(error) and "only 'MainThread' can exit it" in str(error)
    # refused whole: still profiling, still counting this thread's forward
    assert profiler.started
    model(x)
    assert profiler.get_total_macs(phase="forward") == 2 * 144  # two forwards of 144 MACs (module docstring)
    getattr(profiler, finish)()  # from the thread that started it: fine
    _assert_nothing_attached(model)


@pytest.mark.parametrize("finish", ["stop_profile", "end_profile"])
def test_a_profile_started_in_a_thread_that_has_ended_is_stopped_from_another(finish):
    model = mlp(bias=True)
    x = torch.randn(3, 4)
    profiler = FlopsProfiler(model)

    def step():
        profiler.start_profile()
        model(x).sum().backward()  # counted in the starting thread

    assert _in_thread(step, "worker") == {"value": None}
    getattr(profiler, finish)()  # the worker has ended: its dispatch mode ended with it
    _assert_nothing_attached(model)
    if finish == "stop_profile":
        # forward 144 MACs / 342 FLOPs; loss 6 FLOPs; backward (input needs no grad) 192 MACs / 438 FLOPs
        assert phase(profiler.get_profile(), "forward") == (144, 342)
        assert phase(profiler.get_profile(), "backward") == (192, 438)
        assert profiler.get_total_flops() == 342 + 6 + 438
        profiler.end_profile()
    # everything runs uncounted and unwrapped in this thread, and a new profile works here
    model(x)
    profiler.start_profile()
    model(x)
    profiler.stop_profile()
    assert profiler.get_total_macs() == 144
    profiler.end_profile()
    _assert_nothing_attached(model)
