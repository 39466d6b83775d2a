"""DeepSpeed / cli99 spellings (seeds 004 and 001): ``get_model_profile`` unpacks; the legacy API."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import deeplite_like.profiling.legacy as prof
from deeplite_like.profiling import get_model_profile


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


# Linear(4, 8) -> ReLU -> Linear(8, 2), per sample:
#   MACs 4*8 + 8*2 = 48; FLOPs 2*48 + bias adds 8 + 2 + ReLU 8 = 114; params 4*8+8 + 8*2+2 = 58
MACS, FLOPS, PARAMS = 48, 114, 58


def test_get_model_profile_unpacks_as_flops_macs_params_with_every_seed_004_keyword(capsys):
    flops, macs, params = get_model_profile(model=mlp(), input_shape=(3, 4), args=None, kwargs=None,
                                            print_profile=True, detailed=True, module_depth=-1, top_modules=1,
                                            warm_up=10, as_string=True, output_file=None, ignore_modules=None,
                                            func_name="forward")
    # as_string=True given explicitly: DeepSpeed's three strings (its own test suite asserts them)
    assert all(type(v) is str and v for v in (flops, macs, params))
    assert flops == "342 FLOPs"  # 3 * 114
    printed = capsys.readouterr().out
    assert "(0): Linear(in_features=4, out_features=8, bias=True)" in printed  # detailed tree
    assert "342 FLOPs" in printed  # as_string: 3 * 114


def test_profile_stays_the_rich_object_and_indexes_like_the_tuple():
    # without as_string (or with as_string=False) the tuple is the raw ints
    assert tuple(get_model_profile(mlp(), input_shape=(3, 4), print_profile=False, as_string=False)) == (
        3 * FLOPS, 3 * MACS, PARAMS)
    profile = get_model_profile(mlp(), input_shape=(1, 4), print_profile=False)
    assert len(profile) == 3 and tuple(profile) == (FLOPS, MACS, PARAMS)
    assert (profile[0], profile[1], profile[2], profile[-1]) == (FLOPS, MACS, PARAMS, PARAMS)
    assert profile.module("0").macs == 32 and profile.root.type == "Sequential"


def test_output_file_and_ignore_modules(tmp_path):
    out = tmp_path / "profile.txt"
    flops, macs, _ = get_model_profile(mlp(), input_shape=(1, 4), print_profile=True, output_file=str(out),
                                       ignore_modules=[nn.ReLU])
    assert (flops, macs) == (FLOPS - 8, MACS)  # the ReLU's 8 FLOPs left out
    assert "Sequential" in out.read_text()


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)

    def generate(self, x, steps=2):
        for _ in range(steps):
            x = self(x)
        return x


def test_mode_is_deepspeeds_name_for_func_name():
    # Linear(4, 4) twice on one sample: 2 * 16 MACs; FLOPs 2 * (32 + 4)
    flops, macs, params = get_model_profile(Generator(), input_shape=(1, 4), print_profile=False, mode="generate")
    assert (flops, macs, params) == (72, 32, 20)
    with pytest.raises(ValueError, match="func_name='forward2' and mode='generate'"):
        get_model_profile(Generator(), input_shape=(1, 4), print_profile=False, func_name="forward2",
                          mode="generate")


def test_legacy_get_model_profile_returns_macs_and_params(capsys):
    macs, params = prof.get_model_profile(mlp(), (4,), input_constructor=None, print_profile=True,
                                          print_aggregated_profile=True, depth=-1, top_num=3, warm_up=10,
                                          as_strings=True, ignore_modules=None)
    assert (macs, params) == ("48 MACs", "58")  # input_res has no batch axis: one sample
    printed = capsys.readouterr().out
    assert "(2): Linear(in_features=8, out_features=2, bias=True)" in printed
    assert "Aggregated profile per device: Sequential" in printed
    assert prof.get_model_profile(mlp(), (4,), print_profile=False, print_aggregated_profile=False,
                                  as_strings=False) == (MACS, PARAMS)
    assert capsys.readouterr().out == ""


def test_legacy_input_constructor_positional_or_keywords():
    seen = []

    def construct(res):
        seen.append(res)
        return torch.ones(2, *res)

    assert prof.get_model_profile(mlp(), (4,), input_constructor=construct, print_profile=False,
                                  print_aggregated_profile=False, as_strings=False) == (2 * MACS, PARAMS)
    assert seen == [(4,)]

    class Keywords(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 8)

        def forward(self, x=None):
            return self.fc(x)

    assert prof.get_model_profile(Keywords(), (4,), input_constructor=lambda res: {"x": torch.ones(3, *res)},
                                  print_profile=False, print_aggregated_profile=False, as_strings=False) == (96, 40)
    with pytest.raises(ValueError, match=r"without the batch axis, such as \(3, 224, 224\)"):
        prof.get_model_profile(mlp(), 4)


def test_string_helpers():
    assert prof.macs_to_string(429_248) == "429.2 kMACs"
    assert prof.flops_to_string(22_360_000_000) == "22.36 GFLOPs"
    assert prof.params_to_string(61_706) == "61.71 k"
    assert prof.duration_to_string(0.001201) == "1.201 ms"


def test_add_profile_methods_reads_the_forward_and_stop_profile_leaves_the_model_as_it_was(capsys):
    model = mlp()
    before = dict(vars(model))
    assert prof.add_profile_methods(model) is model
    model.start_profile()
    loss = model(torch.randn(3, 4)).sum()
    loss.backward()  # the old API profiles the forward: the backward does not change the figures
    # batch 3: MACs 3 * 48 = 144, FLOPs 3 * 114 = 342
    assert (model.compute_total_flops(), model.compute_total_macs(), model.compute_total_params()) == (342, 144, 58)
    assert (model.get_total_flops(), model.get_total_params()) == (342, 58)
    assert model.compute_total_duration() > 0 and model.get_total_duration() == model.compute_total_duration()
    model.print_model_profile()
    model.print_model_aggregated_profile(depth=-1, top_num=3)
    printed = capsys.readouterr().out
    assert "(1): ReLU()" in printed and "Aggregated profile per device" in printed
    model.stop_profile()
    assert dict(vars(model)).keys() == before.keys()
    assert not hasattr(model, "compute_total_flops")
    model(torch.randn(1, 4))  # runs as before, nothing attached


def test_end_profile_restores_an_instance_attribute_of_the_same_name():
    model = mlp()
    marker = object()
    model.print_model_profile = marker
    prof.add_profile_methods(model)
    assert model.print_model_profile is not marker
    model.end_profile()  # never started: just cleans up
    assert model.print_model_profile is marker
    assert prof.remove_profile_methods(model) is model  # nothing left to remove
