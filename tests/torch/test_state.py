"""preserved_model_state: everything a measurement may touch is put back, also on error."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.state import model_device, preserved_model_state


def _net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


class _Boom(RuntimeError):
    pass


def test_restores_modes_requires_grad_hooks_and_grads_after_an_exception():
    net = _net()
    net.train()
    net[1].eval()  # a mixed mode must come back mixed, not flattened by .train()/.eval()
    net[3].weight.requires_grad_(False)
    calls = []
    user_hook = net[0].register_forward_hook(lambda m, i, o: calls.append("user"))
    grad0 = torch.full_like(net[0].weight, 7.0)
    net[0].weight.grad = grad0
    modes = [m.training for m in net.modules()]
    global_hooks = dict(torch.nn.modules.module._global_forward_hooks)

    with pytest.raises(_Boom):
        with preserved_model_state(net):
            assert net[0].weight.grad is None  # grads are set aside for the body
            net.eval()
            net[3].weight.requires_grad_(True)
            net[0].register_forward_hook(lambda m, i, o: calls.append("stray"))
            net[2].register_forward_pre_hook(lambda m, i: None)
            net[0].weight.register_hook(lambda g: g)
            # a global hook registered meanwhile (by another thread, say) is not ours to remove
            other_threads_hook = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
            net(torch.randn(5, 3)).sum().backward()  # fills fresh grads
            raise _Boom

    assert [m.training for m in net.modules()] == modes
    assert net[3].weight.requires_grad is False
    assert net[0].weight.grad is grad0 and torch.equal(grad0, torch.full_like(grad0, 7.0))
    assert net[3].bias.grad is None  # created inside the body, so removed
    assert list(net[0]._forward_hooks) == [user_hook.id]
    assert len(net[2]._forward_pre_hooks) == 0
    assert not net[0].weight._backward_hooks
    assert other_threads_hook.id in torch.nn.modules.module._global_forward_hooks
    other_threads_hook.remove()
    assert dict(torch.nn.modules.module._global_forward_hooks) == global_hooks
    net.eval()
    calls.clear()
    net(torch.randn(2, 3))
    assert calls == ["user"]
    user_hook.remove()  # the user's handle still removes the user's hook
    assert len(net[0]._forward_hooks) == 0


def test_restores_device_dtype_and_replaced_parameters_and_modules():
    net = _net()
    weight = net[0].weight
    ptr = weight.data_ptr()
    relu = net[2]
    with preserved_model_state(net):
        net.half()
        net.to("meta")
        net[0].weight = nn.Parameter(torch.zeros(4, 3))
        net[2] = nn.Tanh()
        net.add_module("extra", nn.Identity())
    assert net[0].weight is weight
    assert weight.dtype == torch.float32 and weight.device.type == "cpu" and weight.data_ptr() == ptr
    assert net[1].running_var.dtype == torch.float32
    assert net[2] is relu
    assert not hasattr(net, "extra") and len(net) == 4


def test_buffer_values_restored_by_default_and_kept_when_opted_out():
    net = _net().train()
    before = net[1].running_mean.clone()
    with preserved_model_state(net):
        net(torch.randn(8, 3) + 5.0)  # a training forward updates BatchNorm running stats
        assert not torch.equal(net[1].running_mean, before)
    assert torch.equal(net[1].running_mean, before)
    assert int(net[1].num_batches_tracked) == 0

    with preserved_model_state(net, restore_buffer_values=False):
        net(torch.randn(8, 3) + 5.0)
    # Opted out: in-place value updates stay (documented); only structure is restored.
    assert not torch.equal(net[1].running_mean, before)
    assert int(net[1].num_batches_tracked) == 1


def test_model_device():
    assert model_device(_net()) == torch.device("cpu")
    assert model_device(nn.ReLU()) == torch.device("cpu")  # no tensors: cpu
    assert model_device(_net().to("meta")) == torch.device("meta")
    split = _net()
    split[3].to("meta")
    with pytest.raises(ValueError, match=r"several devices: cpu \(parameter '0.weight'\), meta \(parameter '3.weight'\)"):
        model_device(split)
    with pytest.raises(TypeError, match="expects a torch.nn.Module"):
        model_device(object())


def test_torchscript_module_is_restored_without_error():
    scripted = torch.jit.script(nn.Sequential(nn.Linear(3, 2), nn.ReLU()))
    scripted.train()
    with preserved_model_state(scripted):
        scripted.eval()
    assert scripted.training
