"""backward=True counts the ops that really run in backward, attributed to modules."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import BackwardError, UntrackedOpWarning, count_ops

from .engine_fixtures import stats, toy_table  # noqa: F401  (fixture)

pytestmark = [pytest.mark.usefixtures("toy_table"), pytest.mark.filterwarnings("ignore::UserWarning")]


def two_linears() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))


def test_linear_backward_is_twice_the_forward_when_the_input_requires_grad():
    x = torch.randn(5, 4, requires_grad=True)
    result = count_ops(two_linears(), x, backward=True)
    # forward, batch 5: L0 = 5*4*3 = 60 MACs (120 + bias 15 = 135 FLOPs); L1 = 5*3*2 = 30 MACs (60 + 10 = 70)
    assert stats(result.phases["forward"]) == (90, 205, 2)
    # loss: sum of the (5, 2) output: 10 FLOPs
    assert stats(result.phases["loss"]) == (0, 10, 1)
    # backward: L1 dX = 5*2*3 = 30, dW = 2*5*3 = 30, db = sum of (5, 2) = 10 FLOPs;
    #           L0 dX = 5*3*4 = 60, dW = 3*5*4 = 60, db = sum of (5, 3) = 15 FLOPs
    #           MACs 180 = 2 x 90; FLOPs = 2*180 + 10 + 15 = 385; 4 mm + 2 sum calls
    assert stats(result.phases["backward"]) == (180, 385, 6)
    assert (result.macs, result.flops) == (90 + 180, 205 + 10 + 385)


def test_first_layer_computes_only_dw_when_the_input_does_not_require_grad():
    result = count_ops(two_linears(), torch.randn(5, 4), backward=True)
    # L1: dX 30 (needed by L0) + dW 30; L0: dW 60 only, i.e. 1x its forward: 120 MACs in backward
    assert result.phases["backward"].macs == 120
    assert result.by_module["0"].macs == 60 + 60  # forward 60 + dW 60
    assert result.by_module["1"].macs == 30 + 60  # forward 30 + dX 30 + dW 30


def test_backward_ops_are_attributed_to_the_modules_that_ran_them():
    x = torch.randn(5, 4, requires_grad=True)
    result = count_ops(two_linears(), x, backward=True)
    # module 0: forward addmm (60 MACs, 135 FLOPs) + backward 2 mm (120 MACs, 240 FLOPs) + db sum 15
    assert stats(result.by_module["0"])[:2] == (180, 390)
    assert {k: stats(v) for k, v in result.module_ops["0"].items()} == {
        "aten.addmm": (60, 135, 1), "aten.mm": (120, 240, 2), "aten.sum": (0, 15, 1)}
    # module 1: 30 + 60 MACs; FLOPs 70 + 120 + 10 = 200
    assert stats(result.by_module["1"])[:2] == (90, 200)
    # the root holds the loss reduction (10 FLOPs) and includes both children
    assert {k: stats(v) for k, v in result.module_ops[""].items()} == {"aten.sum": (0, 10, 1)}
    assert stats(result.by_module[""])[:2] == (result.macs, result.flops) == (270, 600)
    assert result.by_module["0"].calls == 1  # backward does not add module calls


def test_custom_loss_fn_is_counted_in_the_loss_phase():
    result = count_ops(two_linears(), torch.randn(5, 4), backward=True, loss_fn=lambda out: (out * out).sum())
    # loss: mul of 5*2 = 10 elements + sum of 10 = 20 FLOPs
    assert stats(result.phases["loss"]) == (0, 20, 2)
    assert result.phases["backward"].macs == 120


def test_gradients_are_not_left_on_the_model_or_the_inputs():
    model = two_linears()
    marker = torch.full_like(model[0].weight, 7.0)
    model[0].weight.grad = marker
    x = torch.randn(5, 4, requires_grad=True)
    count_ops(model, x, backward=True)
    assert model[0].weight.grad is marker and torch.equal(marker, torch.full_like(marker, 7.0))
    assert model[0].bias.grad is None and model[1].weight.grad is None
    assert x.grad is None


def test_backward_does_not_reach_into_the_callers_graph():
    leaf = torch.randn(5, 4, requires_grad=True)
    x = leaf * 2  # the caller's own graph in front of the model
    target = torch.randn(5, 2, requires_grad=True)
    result = count_ops(two_linears(), x, backward=True, loss_fn=lambda out: ((out - target) * 1).sum())
    assert leaf.grad is None and target.grad is None
    # muls counted: the loss's `* 1` (5*2 = 10 elements) and its backward `grad * 1` (10): 20 FLOPs in
    # 2 calls. The backward of the caller's `leaf * 2` (a mul of 5*4 = 20 elements) is not run.
    assert stats(result.by_operator["aten.mul"]) == (0, 20, 2)


def test_backward_runs_under_no_grad_callers():
    with torch.no_grad():
        result = count_ops(two_linears(), torch.randn(5, 4), backward=True)
        assert not torch.is_grad_enabled()
    assert result.phases["backward"].macs == 120


def test_nothing_to_differentiate_is_a_clear_error():
    model = two_linears().requires_grad_(False)
    with pytest.raises(ValueError, match="no input requires grad"):
        count_ops(model, torch.randn(5, 4), backward=True)


def test_output_without_grad_is_a_clear_error():
    class Detached(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x).detach()

    with pytest.raises(BackwardError, match="loss_fn"):
        count_ops(Detached(), torch.randn(1, 2), backward=True)


def test_backward_on_meta_equals_backward_on_real_tensors():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UntrackedOpWarning)
        real = count_ops(model, x, backward=True)
        meta = count_ops(model, x, backward=True, meta=True)
    assert meta.as_dict() == real.as_dict()
    # forward: 3*4*8 = 96 + 3*8*2 = 48 MACs; backward: 2 x 144 (input requires grad) = 288
    assert (real.phases["forward"].macs, real.phases["backward"].macs) == (144, 288)


def test_backward_through_a_residual_block_is_attributed_exactly():
    from .test_engine_attribution import Outer  # Outer(x) = head(inner(x) * 2) + 1, inner(x) = relu(fc(x)) + x

    x = torch.randn(3, 4, requires_grad=True)
    result = count_ops(Outer(), x, backward=True)
    # forward (see test_nested_attribution_and_root_ops): 72 MACs, 198 FLOPs; loss: sum of (3, 2) = 6 FLOPs
    assert stats(result.phases["forward"])[:2] == (72, 198)
    assert stats(result.phases["loss"])[:2] == (0, 6)
    # backward:  head (mm): dX (3,2)@(2,4) = 24 MACs, dW (4,3)@(3,2) = 24 MACs     -> 48 MACs, 96 FLOPs
    #            root: `* 2` backward is grad * 2 on (3, 4)                        -> 12 FLOPs
    #            inner: relu backward (threshold_backward) on (3, 4)               -> 12 FLOPs
    #            inner.fc (addmm): dX 3*4*4 = 48, dW 48 MACs, db = sum of (3, 4)   -> 96 MACs, 192 + 12 FLOPs
    #            x receives two gradients (residual and fc): one add of (3, 4)     -> 12 FLOPs (inside inner)
    #            total: 144 MACs; FLOPs = 96 + 12 + 12 + 204 + 12 = 336
    assert stats(result.phases["backward"])[:2] == (144, 336)
    assert stats(result.by_module["head"])[:2] == (24 + 48, 48 + 96)
    # inner: forward 48 MACs, 132 FLOPs + backward 96 MACs, 12 + 204 + 12 = 228 FLOPs
    assert stats(result.by_module["inner"])[:2] == (144, 360)
    assert result.by_module["inner.fc"].macs == 48 + 96
    assert stats(result.by_module[""])[:2] == (result.macs, result.flops) == (216, 540)
    # the root's own ops: `* 2` (12) and `+ 1` (6) forward, the loss sum (6), the `* 2` backward (12)
    assert sum(s.flops for s in result.module_ops[""].values()) == 36


# -- checkpointing and inputs written in place (issue 22) ---------------------------------------
class ReentrantCheckpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        return self.b(torch.utils.checkpoint.checkpoint(self.a, x, use_reentrant=True))


@pytest.mark.parametrize("meta", [False, True])
def test_reentrant_checkpointing_counts_the_recomputation(meta):
    # x (4, 8) requires grad. Forward: a 4*8*8 = 256, b 256 -> 512 MACs. Backward: b's dX and dW
    # 512; reentrant checkpointing re-runs a (256) and back-propagates through it: dX and dW 512
    # -> 1280. Per module: a = 256 + 256 + 512 = 1024, b = 256 + 512 = 768.
    model = ReentrantCheckpointed()
    x = torch.randn(4, 8, requires_grad=True)
    target = torch.randn(4, 8, requires_grad=True)  # a tensor of the caller's, in the loss (real run)
    loss_fn = (lambda out: out.sum()) if meta else (lambda out: (out * target).sum())
    counted = count_ops(model, x, backward=True, meta=meta, loss_fn=loss_fn)
    assert {k: v.macs for k, v in counted.phases.items()} == {"forward": 512, "loss": 0, "backward": 1280}
    assert counted.by_module["a"].macs == 1024 and counted.by_module["b"].macs == 768
    # the full backward reentrant checkpointing needs reached the caller's tensor: its .grad is put back
    assert target.grad is None and x.grad is None
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("meta", [False, True])
def test_a_non_leaf_input_written_in_place_runs_as_in_plain_torch(meta):
    # x.relu_() on a non-leaf that requires grad is legal torch (on a leaf it raises): Linear(3, 3)
    # on (3,): forward 9 MACs; backward dW 9 and dX 9 (the input requires grad) -> 27 MACs.
    class Inplace(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x.relu_())

    x = torch.randn(3, requires_grad=True).clone()
    before = x.detach().clone()
    counted = count_ops(Inplace(), x, backward=True, meta=meta)
    assert counted.phases["forward"].macs == 9 and counted.phases["backward"].macs == 18
    assert torch.equal(x.detach(), before)  # the caller's tensor is not written


def test_get_model_profile_backward_with_reentrant_checkpointing():
    # the same model as test_reentrant_checkpointing_counts_the_recomputation: 512 + 1280 MACs
    from deeplite_like.profiling import get_model_profile

    profile = get_model_profile(ReentrantCheckpointed(), args=[torch.randn(4, 8, requires_grad=True)],
                                backward=True, print_profile=False, as_string=False)
    assert profile.phase("forward").macs == 512 and profile.phase("backward").macs == 1280
