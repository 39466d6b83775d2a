"""get_model_profile on torch models: the module tree, the gap, aggregation, ignore_modules, views.

Net (tests/profiling/models.py), input (3, 4), batch 3. Per Block:
    fc   addmm (3,4)@(4,4): MACs 3*4*4 = 48; FLOPs 2*48 + bias 3*4 = 108; params 16 + 4 = 20
    act  relu on 12 elements: 12 FLOPs
    + x  residual add on 12 elements: 12 FLOPs, run directly in the Block (its gap)
    Block: MACs 48, FLOPs 108 + 12 + 12 = 132
blocks (Sequential of 2 Blocks): MACs 96, FLOPs 264, params 40, gap 0
head  addmm (3,4)@(4,2): MACs 24; FLOPs 48 + bias 6 = 54; params 8 + 2 = 10
Net: * 2 on the (3, 2) output: 6 FLOPs directly in Net.
Net: MACs 96 + 24 = 120; FLOPs 264 + 54 + 6 = 324; params 50.
"""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode

import deeplite_like
from deeplite_like.profiling import ModelProfile

from .models import Generator, Net, mlp


def figures(node):
    return node.params, node.macs, node.flops


@pytest.fixture(scope="module")
def net_profile() -> ModelProfile:
    torch.manual_seed(0)
    return deeplite_like.get_model_profile(Net(), input_shape=(3, 4), print_profile=False, warm_up=0)


def test_totals(net_profile):
    assert (net_profile.params, net_profile.macs, net_profile.flops) == (50, 120, 324)
    assert net_profile.batch_size == 3
    assert list(net_profile.phases) == ["forward"]
    assert net_profile.forward_latency_s > 0
    assert net_profile.forward_flops_per_s == pytest.approx(324 / net_profile.forward_latency_s)


def test_per_module_figures(net_profile):
    p = net_profile
    assert figures(p.root) == (50, 120, 324)
    assert figures(p.module("blocks")) == (40, 96, 264)
    assert figures(p.module("blocks.0")) == figures(p.module("blocks.1")) == (20, 48, 132)
    assert figures(p.module("blocks.0.fc")) == (20, 48, 108)
    assert figures(p.module("blocks.0.act")) == (0, 0, 12)
    assert figures(p.module("head")) == (10, 24, 54)
    assert [n.depth for n in p.modules()] == [0, 1, 2, 3, 3, 2, 3, 3, 1]
    assert all(n.calls == 1 for n in p.modules())


def test_gap_between_a_parent_and_its_children_is_the_ops_run_directly_in_it(net_profile):
    p = net_profile
    block = p.module("blocks.0")
    # 132 - (108 + 12) = 12: the residual add
    assert (block.gap.macs, block.gap.flops) == (0, 12)
    assert {k: (v.calls, v.flops) for k, v in block.ops.items()} == {"aten.add": (1, 12)}
    # Net: 324 - (264 + 54) = 6: the doubling
    assert (p.root.gap.macs, p.root.gap.flops) == (0, 6)
    assert {k: (v.calls, v.flops) for k, v in p.root.ops.items()} == {"aten.mul": (1, 6)}
    assert (p.module("blocks").gap.flops, p.module("blocks").ops) == (0, {})
    assert {k: (v.calls, v.macs, v.flops) for k, v in p.module("head").ops.items()} == {"aten.addmm": (1, 24, 54)}


def test_tree_text_shows_figures_shares_and_direct_ops(net_profile):
    text = net_profile.tree_text()
    lines = text.splitlines()
    assert lines[0] == "Net("
    assert "  (blocks): Sequential(" in lines
    # head: 10/50 params = 20.00%, 24/120 MACs = 20.00%, 54/324 FLOPs = 16.67%
    head = lines.index("  (head): Linear(in_features=4, out_features=2, bias=True)")
    assert lines[head + 1].startswith("    params 10 (20.00%) | MACs 24 MACs (20.00%) | FLOPs 54 FLOPs (16.67%)")
    assert lines[head + 2] == "    ops: aten.addmm x1 (24 MACs, 54 FLOPs)"
    assert "    not in a child: MACs 0 MACs, FLOPs 12 FLOPs; ops: aten.add x1 (12 FLOPs)" in text
    assert lines[-1] == ")"
    raw = net_profile.tree_text(as_string=False)
    assert "params 10 (20.00%) | MACs 24 (20.00%) | FLOPs 54 (16.67%)" in raw


def test_module_depth_limits_the_tree(net_profile):
    text = net_profile.tree_text(module_depth=1)
    assert "(blocks): Sequential(" in text and "(0): Block(" not in text
    assert "... 6 submodule(s) below depth 1 not shown" in text  # 2 Blocks + 2 x (fc, act)


def test_aggregation_includes_the_deepest_level(net_profile):
    levels = net_profile.aggregated(module_depth=-1, top_modules=3)
    assert [level["depth"] for level in levels] == [0, 1, 2, 3]
    deepest = levels[3]["top"]
    # depth 3: two Linear (fc) = 40 params, 96 MACs, 216 FLOPs; two ReLU = 24 FLOPs
    assert [(e["type"], e["value"], e["modules"]) for e in deepest["flops"]] == [("Linear", 216, 2), ("ReLU", 24, 2)]
    assert [(e["type"], e["value"]) for e in deepest["params"]] == [("Linear", 40), ("ReLU", 0)]
    assert [(e["type"], e["value"]) for e in deepest["macs"]] == [("Linear", 96), ("ReLU", 0)]
    # depth 1: Sequential 264 FLOPs before the head's Linear 54
    assert [(e["type"], e["value"]) for e in levels[1]["top"]["flops"]] == [("Sequential", 264), ("Linear", 54)]
    assert [e["type"] for e in levels[3]["top"]["latency_s"]] and all(
        e["value"] > 0 for e in levels[3]["top"]["latency_s"])


def test_aggregation_depth_and_top_k(net_profile):
    levels = net_profile.aggregated(module_depth=1, top_modules=1)
    assert [level["depth"] for level in levels] == [0, 1]
    assert [(e["type"], e["value"]) for e in levels[1]["top"]["params"]] == [("Sequential", 40)]
    table = net_profile.aggregated_table(module_depth=-1, top_modules=2).to_text()
    assert "Linear x2: 216 FLOPs" in table and "ReLU x2: 24 FLOPs" in table
    with pytest.raises(ValueError, match="top_modules"):
        net_profile.aggregated(top_modules=0)


def test_ignore_modules_excludes_their_cost_instead_of_moving_it_to_the_parent():
    profile = deeplite_like.get_model_profile(Net(), input_shape=(3, 4), print_profile=False, warm_up=0,
                                              ignore_modules=[nn.ReLU])
    # each ReLU's 12 FLOPs leave every ancestor and the total: 324 - 2*12 = 300
    assert (profile.macs, profile.flops) == (120, 300)
    block = profile.module("blocks.0")
    assert (block.macs, block.flops) == (48, 120)
    assert block.gap.flops == 12  # still only the residual add: the ReLU was not moved into the block
    assert profile.module("blocks").flops == 240
    assert [(n.name, n.type, n.flops) for n in profile.excluded] == [("blocks.0.act", "ReLU", 12),
                                                                      ("blocks.1.act", "ReLU", 12)]
    assert profile.module("blocks.0.act").excluded
    assert "aten.relu" not in profile.by_operator
    assert profile.phase("forward").flops == 300
    # the deepest level ranks only what is counted
    assert [e["type"] for e in profile.aggregated()[3]["top"]["flops"]] == ["Linear"]
    text = profile.to_text()
    assert "excluded (ignore_modules, not in the totals): blocks.0.act (ReLU): 0 MACs, 12 FLOPs" in text
    assert "(act): ReLU()  [excluded: not counted in its parents nor the totals]" in text


def test_ignoring_a_parent_type_excludes_its_whole_subtree_once():
    profile = deeplite_like.get_model_profile(Net(), input_shape=(3, 4), print_profile=False, warm_up=0,
                                              ignore_modules=["Block"])
    # only the head (24 MACs, 54 FLOPs) and the doubling (6 FLOPs) remain: 60 FLOPs
    assert (profile.macs, profile.flops) == (24, 60)
    assert [n.name for n in profile.excluded] == ["blocks.0", "blocks.1"]  # the outermost only
    assert profile.module("blocks.0.fc").excluded and profile.module("blocks").flops == 0
    assert profile.params == 50  # parameters still exist; only the cost is excluded


def test_views_as_data_json_and_files(net_profile, tmp_path):
    data = json.loads(net_profile.to_json())
    assert (data["params"], data["macs"], data["flops"]) == (50, 120, 324)
    assert data["tree"]["children"][1]["name"] == "head"
    assert data["tree"]["children"][0]["children"][0]["gap"]["flops"] == 12
    assert data["aggregated"][3]["top"]["flops"][0] == {"type": "Linear", "value": 216, "modules": 2}
    assert data["phases"]["forward"]["flops"] == 324
    assert data["by_operator"]["aten.addmm"] == {"macs": 120, "flops": 270, "calls": 3}  # 108 + 108 + 54
    text_file = net_profile.save(tmp_path / "profile.txt")
    assert "Detailed profile per device" in text_file.read_text()
    assert json.loads(net_profile.save(tmp_path / "profile.json").read_text())["flops"] == 324
    assert "<pre>" in net_profile._repr_html_()


def test_print_profile_and_output_file(capsys, tmp_path):
    deeplite_like.get_model_profile(mlp(), input_shape=(3, 4), warm_up=0)
    out = capsys.readouterr().out
    assert "fwd MACs per device:" in out and "144 MACs" in out
    target = tmp_path / "report.txt"
    deeplite_like.get_model_profile(mlp(), input_shape=(3, 4), warm_up=0, output_file=target, detailed=False)
    assert capsys.readouterr().out == ""
    written = target.read_text()
    assert "Aggregated profile per device" in written and "Detailed profile" not in written


def test_module_latency_off_is_said():
    profile = deeplite_like.get_model_profile(mlp(), input_shape=(3, 4), print_profile=False, warm_up=0,
                                              module_latency=False)
    assert profile.root.latency_s is None and profile.forward_latency_s > 0
    assert "module timing: off" in profile.to_text()
    assert profile.aggregated()[0]["top"]["latency_s"] == []


def test_func_name_profiles_another_entry_point():
    model = Generator()
    profile = deeplite_like.get_model_profile(model, args=(torch.randn(3, 4),), func_name="generate",
                                              print_profile=False, warm_up=0)
    # two model calls: addmm (3,4)@(4,4) = 48 MACs, 96 + 12 bias = 108 FLOPs each
    assert profile.root.calls == 2 and profile.module("proj").calls == 2
    assert (profile.module("proj").macs, profile.module("proj").flops) == (96, 216)
    # + 1.0 on 12 elements, twice, in generate but outside self(...): the root's own operators
    assert {k: (v.calls, v.flops) for k, v in profile.root.ops.items()} == {"aten.add": (2, 24)}
    assert (profile.root.gap.flops, profile.root.flops) == (24, 240)
    assert (profile.phase("forward").flops, profile.flops, profile.outside) == (240, 240, {})


def test_unknown_entry_point_is_named():
    with pytest.raises(AttributeError, match="no method 'generate'"):
        deeplite_like.get_model_profile(mlp(), input_shape=(3, 4), func_name="generate", print_profile=False)


def test_input_shape_is_only_for_float_models():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))
    with pytest.raises(ValueError, match=r"takes integer ids: pass the inputs instead, e\.g\. args="):
        deeplite_like.get_model_profile(model, input_shape=(3, 5), print_profile=False)
    profile = deeplite_like.get_model_profile(model, args=(torch.randint(0, 10, (3, 5)),), print_profile=False,
                                              warm_up=0)
    # Linear on (3, 5, 4): 15 rows * 4 * 2 = 120 MACs
    assert profile.macs == 120
    with pytest.raises(ValueError, match="not both"):
        deeplite_like.get_model_profile(mlp(), input_shape=(3, 4), args=(torch.randn(3, 4),))
    with pytest.raises(ValueError, match="needs the inputs"):
        deeplite_like.get_model_profile(mlp())


def test_meta_counts_the_same_without_running():
    model = Net()
    profile = deeplite_like.get_model_profile(model, input_shape=(3, 4), print_profile=False, meta=True)
    assert (profile.params, profile.macs, profile.flops) == (50, 120, 324)
    assert profile.module("blocks.0").gap.flops == 12
    assert profile.forward_latency_s is None and profile.root.latency_s is None and profile.device == "meta"
    assert all(not p.is_meta for p in model.parameters())


def test_backward_is_measured_and_split_per_module():
    x = torch.randn(3, 4)  # does not require grad
    profile = deeplite_like.get_model_profile(mlp(), args=(x,), backward=True, print_profile=False, warm_up=0)
    # forward: 144 MACs; 216 + 24 + 102 = 342 FLOPs (see test_torch_flops_profiler for the derivation)
    assert (profile.phase("forward").macs, profile.phase("forward").flops) == (144, 342)
    # backward without input grad: dW1 96 + dX2 48 + dW2 48 = 192 MACs; 384 + db 24 + 6 + relu 24 = 438 FLOPs
    assert (profile.phase("backward").macs, profile.phase("backward").flops) == (192, 438)
    assert profile.phase("other").flops == 6  # the default loss: sum of the (3, 2) output
    first = profile.module("0")
    assert (first.phase("forward").macs, first.phase("backward").macs) == (96, 96)  # no dX for the input
    assert profile.phase("backward").latency_s > 0
    assert "[fwd 216, bwd 216]" in profile.tree_text()


def test_model_is_left_as_found():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5))
    model.train()
    grad = torch.ones_like(model[0].weight)
    model[0].weight.grad = grad
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    deeplite_like.get_model_profile(model, input_shape=(8, 4), print_profile=False, backward=True, warm_up=2)
    assert model.training and all(m.training for m in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # running stats restored
    assert model[0].weight.grad is grad and model[0].bias.grad is None
    assert torch.equal(torch.get_rng_state(), rng)
    for module in model.modules():
        assert "forward" not in module.__dict__
        assert not module._forward_hooks and not module._forward_pre_hooks
    assert _get_current_dispatch_mode() is None


def test_matches_torch_flop_counter_on_contractions():
    from torch.utils.flop_counter import FlopCounterMode
    model, x = Net(), torch.randn(3, 4)
    profile = deeplite_like.get_model_profile(model, args=(x,), print_profile=False, warm_up=0)
    with FlopCounterMode(display=False) as counter:
        model(x)
    assert counter.get_total_flops() == 2 * profile.macs  # the peer counts 2 FLOPs per MAC, matmuls only
