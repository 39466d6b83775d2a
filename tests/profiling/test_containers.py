"""Containers that are never called (``nn.ModuleList``, ``nn.ModuleDict``) add up: trees have no negative gap.

Stacked: ``blocks`` is an ``nn.ModuleList`` of two ``Linear(8, 8)``, iterated in ``forward``;
``head`` is ``Linear(8, 2)``. Batch 1:
    each block: addmm (1,8)@(8,8): MACs 64; FLOPs 2*64 + bias 8 = 136; params 64 + 8 = 72
    blocks (never called itself): MACs 128, FLOPs 272, params 144, calls 0
    head: MACs 16; FLOPs 2*16 + bias 2 = 34; params 18
    model: MACs 144, FLOPs 306, params 162, and nothing runs directly in it (gap 0)

Decoder (GPT-2's layout, ``transformer.h`` an ``nn.ModuleList``): ``transformer`` is called and
iterates ``h`` (3 blocks of Linear(16, 16) + ReLU), then ``lm_head`` Linear(16, 32, bias=False)
runs at the root. Batch (2, 5) of 16 features = 10 rows:
    each block: MACs 10*16*16 = 2,560; FLOPs 2*2,560 + bias 160 + relu 160 = 5,440
    transformer.h: MACs 7,680, FLOPs 16,320 (sum of 3 blocks)
    lm_head: MACs 10*16*32 = 5,120; FLOPs 10,240
    model: MACs 12,800; FLOPs 26,560
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

import deeplite_like
from deeplite_like.backends.torch import count_ops
from deeplite_like.backends.torch.params import layerwise_summary
from deeplite_like.profiling.views import render_tree
from deeplite_like.results import OpStats, parent_names, roll_up_containers


class Stacked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.h = nn.ModuleList([Block() for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.h:
            x = block(x)
        return x


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.transformer = Transformer()
        self.lm_head = nn.Linear(16, 32, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.transformer(x))


class NestedDict(nn.Module):
    """A ModuleDict of ModuleLists (nested containers): ``stages.a`` holds 2 Linear(4, 4), ``stages.b`` 1.

    Batch 1: each Linear(4, 4): MACs 16, FLOPs 2*16 + 4 = 36. stages.a: 32 / 72; stages.b: 16 / 36;
    stages: 48 / 108 = the model.
    """

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleDict({"a": nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)]),
                                     "b": nn.ModuleList([nn.Linear(4, 4)])})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.stages.values():
            for layer in stage:
                x = layer(x)
        return x


def no_negative_gap(profile) -> None:
    for node in profile.modules():
        assert node.gap.macs >= 0 and node.gap.flops >= 0, (node.name, node.gap)


def test_count_ops_gives_a_never_called_container_the_sum_of_its_children():
    counted = count_ops(Stacked(), torch.randn(1, 8))
    assert counted.by_module["blocks"] == OpStats(128, 272, 0)
    assert counted.by_module["blocks.0"] == OpStats(64, 136, 1)
    assert list(counted.by_module) == ["", "blocks", "blocks.0", "blocks.1", "head"]  # registration order
    assert (counted.macs, counted.flops) == (144, 306)


def test_nested_containers_add_up():
    counted = count_ops(NestedDict(), torch.randn(1, 4))
    assert counted.by_module["stages.a"] == OpStats(32, 72, 0)
    assert counted.by_module["stages.b"] == OpStats(16, 36, 0)
    assert counted.by_module["stages"] == OpStats(48, 108, 0)
    assert (counted.macs, counted.flops) == (48, 108)


def test_model_profile_tree_of_a_module_list_has_no_false_gap():
    profile = deeplite_like.get_model_profile(Stacked(), input_shape=(1, 8), print_profile=False, warm_up=0)
    blocks = profile.module("blocks")
    assert (blocks.params, blocks.macs, blocks.flops, blocks.calls) == (144, 128, 272, 0)
    assert blocks.container and not profile.module("head").container
    assert blocks.latency_s == pytest.approx(profile.module("blocks.0").latency_s + profile.module("blocks.1").latency_s)
    assert profile.root.gap == OpStats(0, 0, 0)
    no_negative_gap(profile)
    text = render_tree(profile, module_depth=1)
    assert "-128" not in text and "not in a child" not in text
    assert "MACs 128 MACs (88.89%)" in text  # 128 / 144
    assert "not called itself: the sum of its children" in text
    assert profile.to_dict()["tree"]["children"][0]["container"] is True


def test_gpt2_layout_transformer_h_adds_up_at_depth_2():
    profile = deeplite_like.get_model_profile(Decoder(), input_shape=(2, 5, 16), print_profile=False, warm_up=0)
    h = profile.module("transformer.h")
    assert (h.macs, h.flops, h.calls) == (7_680, 16_320, 0)
    assert (profile.module("transformer").macs, profile.module("transformer").flops) == (7_680, 16_320)
    assert profile.module("transformer").gap == OpStats(0, 0, 0)
    assert (profile.macs, profile.flops) == (12_800, 26_560)
    no_negative_gap(profile)
    assert "-" not in "".join(line for line in render_tree(profile, module_depth=2).splitlines()
                              if "not in a child" in line)


def test_excluded_child_of_a_container_is_removed_from_it():
    class Skipped(nn.Linear):
        pass

    model = Stacked()
    model.blocks[1] = Skipped(8, 8)
    profile = deeplite_like.get_model_profile(model, input_shape=(1, 8), print_profile=False, warm_up=0,
                                              ignore_modules=[Skipped])
    # blocks = blocks.0 only (64 / 136); model = 64 + head 16 = 80 MACs, 136 + 34 = 170 FLOPs
    assert (profile.module("blocks").macs, profile.module("blocks").flops) == (64, 136)
    assert (profile.macs, profile.flops) == (80, 170)
    no_negative_gap(profile)


def test_layerwise_summary_at_depth_1_includes_the_container_and_adds_up():
    table = layerwise_summary(Stacked(), (torch.randn(1, 8),), max_depth=1)
    rows = {row["module"]: row for row in table.rows}
    assert list(rows) == ["", "blocks", "head"]
    assert (rows["blocks"]["macs"], rows["blocks"]["flops"], rows["blocks"]["calls"]) == (128, 272, 0)
    assert rows["blocks"]["params"] == 144
    assert rows["blocks"]["macs"] + rows["head"]["macs"] == rows[""]["macs"] == 144
    assert rows["blocks"]["macs_share"] == pytest.approx(100 * 128 / 144)


def test_roll_up_is_framework_free_and_skips_subtrees_that_never_ran():
    # Keras-style names with "/": "m/stack" holds "m/stack/a" (ran) and "m/unused" holds nothing that ran.
    by_module = {"": OpStats(10, 20, 1), "m/stack/a": OpStats(10, 20, 1)}
    parents = parent_names(["", "m", "m/stack", "m/stack/a", "m/unused", "m/unused/b"], sep="/")
    assert parents["m/stack/a"] == "m/stack" and parents["m"] == ""
    added = roll_up_containers(by_module, parents)
    assert added == ["m/stack", "m"]  # innermost first
    assert by_module["m"] == OpStats(10, 20, 0)
    assert "m/unused" not in by_module and "m/unused/b" not in by_module
