"""The bundled model zoo: specs, builds, data, and hand-derived parameter and MAC counts.

Every expected number below is derived by hand, layer by layer (the same derivations are in
docs/zoo.rst). Conventions (DESIGN.md): a conv layer costs
``out_channels * H_out * W_out * (in_channels / groups) * kH * kW`` MACs, a linear layer
``in * out`` MACs per row; attention ``Q.K^T`` and ``P.V`` each cost ``L * L * D`` per sample;
an LSTM costs ``4 * H * (I + H)`` per timestep per direction. Bias adds, BN, pooling,
activations, residual adds and embedding look-ups are not MACs. BatchNorm has 2 parameters
per channel (its running statistics are buffers, not parameters).
"""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from deeplite_like import zoo

REPO = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------------------------------
# Hand derivations (batch 1). "p" = parameters, "m" = MACs.
#
# lenet5, input 1x32x32:
#   conv1 1->6 5x5     p = 6*1*25 + 6          =    156   out 6x28x28  m = 6*28*28*(1*25)   = 117,600
#   maxpool 2                                                out 6x14x14
#   conv2 6->16 5x5    p = 16*6*25 + 16        =  2,416   out 16x10x10 m = 16*10*10*(6*25)  = 240,000
#   maxpool 2                                                out 16x5x5 = 400
#   fc1 400->120       p = 400*120 + 120       = 48,120                m = 400*120          =  48,000
#   fc2 120->84        p = 120*84 + 84         = 10,164                m = 120*84           =  10,080
#   fc3 84->10         p = 84*10 + 10          =    850                m = 84*10            =     840
#   total              p = 156+2,416+48,120+10,164+850 = 61,706
#                      m = 117,600+240,000+48,000+10,080+840 = 416,520
LENET5_LAYER_MACS = {"features.0": 117_600, "features.3": 240_000, "classifier.1": 48_000,
                     "classifier.3": 10_080, "classifier.5": 840}
#
# resnet_small, widths (w1, w2, w3) = (16, 32, 64), input 3x32x32; convs have no bias, each
# is followed by BN (2*C params):
#   stem conv3x3 3->16      p = 3*16*9 = 432, bn 32                   -> 464
#                           out 16x32x32 = 16,384 outputs  m = 16,384*27         =   442,368
#   block1 (16->16, s1, identity shortcut)
#     conv1 3x3 16->16      p = 16*16*9 = 2,304, bn 32    m = 16,384*(16*9)   = 2,359,296
#     conv2 3x3 16->16      p = 2,304, bn 32              m = 16,384*144      = 2,359,296
#                           p = 4,672                     m =                   4,718,592
#   block2 (16->32, s2, 1x1 projection), out 32x16x16 = 8,192 outputs
#     conv1 3x3/2 16->32    p = 16*32*9 = 4,608, bn 64    m = 8,192*(16*9)    = 1,179,648
#     conv2 3x3 32->32      p = 32*32*9 = 9,216, bn 64    m = 8,192*(32*9)    = 2,359,296
#     shortcut 1x1/2 16->32 p = 16*32 = 512, bn 64        m = 8,192*16        =   131,072
#                           p = 14,528                    m =                   3,670,016
#   block3 (32->64, s2, 1x1 projection), out 64x8x8 = 4,096 outputs
#     conv1 3x3/2 32->64    p = 32*64*9 = 18,432, bn 128  m = 4,096*(32*9)    = 1,179,648
#     conv2 3x3 64->64      p = 64*64*9 = 36,864, bn 128  m = 4,096*(64*9)    = 2,359,296
#     shortcut 1x1/2 32->64 p = 32*64 = 2,048, bn 128     m = 4,096*32        =   131,072
#                           p = 57,728                    m =                   3,670,016
#   avgpool, fc 64->10      p = 64*10 + 10 = 650          m = 640
#   total p = 464 + 4,672 + 14,528 + 57,728 + 650 = 78,042
#         m = 442,368 + 4,718,592 + 3,670,016 + 3,670,016 + 640 = 12,501,632
#
# resnet_small_student, widths (8, 16, 32):
#   stem 3->8               p = 216 + 16 = 232            m = (8*1,024)*27     =   221,184
#   block1 8->8             p = 2*(8*8*9 + 16) = 1,184    m = 2*(8,192*72)     = 1,179,648
#   block2 8->16 /2 (16x16x16 = 4,096 outputs)
#                           p = (1,152+32) + (2,304+32) + (128+32) = 3,680
#                           m = 4,096*72 + 4,096*144 + 4,096*8 = 294,912+589,824+32,768 = 917,504
#   block3 16->32 /2 (32x8x8 = 2,048 outputs)
#                           p = (4,608+64) + (9,216+64) + (512+64) = 14,528
#                           m = 2,048*144 + 2,048*288 + 2,048*16 = 294,912+589,824+32,768 = 917,504
#   fc 32->10               p = 330                       m = 320
#   total p = 232 + 1,184 + 3,680 + 14,528 + 330 = 19,954
#         m = 221,184 + 1,179,648 + 917,504 + 917,504 + 320 = 3,236,160
#
# mobilenet_small, width 1.0 (c0, c1, c2) = (16, 32, 64), expansion 4 (hidden 256), input 3x32x32:
#   stem conv3x3/2 3->16    p = 432 + 32 = 464            out 16x16x16 = 4,096  m = 4,096*27 = 110,592
#   ds1 dw3x3 16            p = 16*9 = 144, bn 32         m = 4,096*9   =  36,864
#       pw1x1 16->32        p = 16*32 = 512, bn 64        out 32x16x16 = 8,192  m = 8,192*16 = 131,072
#                           p = 752                       m = 167,936
#   ds2 dw3x3/2 32          p = 32*9 = 288, bn 64         out 32x8x8 = 2,048    m = 2,048*9  =  18,432
#       pw1x1 32->64        p = 32*64 = 2,048, bn 128     out 64x8x8 = 4,096    m = 4,096*32 = 131,072
#                           p = 2,528                     m = 149,504
#   ir  expand 1x1 64->256  p = 16,384, bn 512            out 256x8x8 = 16,384  m = 16,384*64 = 1,048,576
#       dw3x3 256           p = 2,304, bn 512                                   m = 16,384*9  =   147,456
#       project 1x1 256->64 p = 16,384, bn 128            out 64x8x8 = 4,096    m = 4,096*256 = 1,048,576
#                           p = 36,224                    m = 2,244,608
#   avgpool, fc 64->10      p = 650                       m = 640
#   total p = 464 + 752 + 2,528 + 36,224 + 650 = 40,618
#         m = 110,592 + 167,936 + 149,504 + 2,244,608 + 640 = 2,673,280
#
# mobilenet_small_student, width 0.5 (8, 16, 32), hidden 128:
#   stem 3->8 /2            p = 216 + 16 = 232            m = (8*256)*27 = 55,296
#   ds1 dw 8, pw 8->16      p = (72+16) + (128+32) = 248  m = 2,048*9 + 4,096*8 = 18,432+32,768 = 51,200
#   ds2 dw 16 /2, pw 16->32 p = (144+32) + (512+64) = 752 m = 1,024*9 + 2,048*16 = 9,216+32,768 = 41,984
#   ir 32->128->32          p = (4,096+256) + (1,152+256) + (4,096+64) = 9,920
#                           m = 8,192*32 + 8,192*9 + 2,048*128 = 262,144+73,728+262,144 = 598,016
#   fc 32->10               p = 330                       m = 320
#   total p = 232 + 248 + 752 + 9,920 + 330 = 11,482
#         m = 55,296 + 51,200 + 41,984 + 598,016 + 320 = 746,816
#
# transformer_encoder: vocab V=1000, seq L=16 (= max_len), D=64, 4 heads, F=128, 2 layers, C=4:
#   token embedding         p = V*D = 64,000              m = 0 (look-up)
#   positional embedding    p = L*D = 1,024               m = 0 (add)
#   per encoder layer:
#     attn in_proj          p = 3*D*D + 3*D = 12,288 + 192 = 12,480   m = 3*L*D*D = 196,608
#     Q.K^T (4 heads x 16x16x16)                                       m = L*L*D   =  16,384
#     P.V                                                              m = L*L*D   =  16,384
#     attn out_proj         p = D*D + D = 4,160                        m = L*D*D   =  65,536
#     linear1 D->F          p = D*F + F = 8,320                        m = L*D*F   = 131,072
#     linear2 F->D          p = F*D + D = 8,256                        m = L*F*D   = 131,072
#     norm1, norm2          p = 2*(2*D) = 256
#                           p = 33,472                                 m = 557,056
#   2 layers                p = 66,944                                 m = 1,114,112
#   mean pool, classifier   p = D*C + C = 260                          m = D*C = 256
#   total p = 64,000 + 1,024 + 66,944 + 260 = 132,228
#         m = 1,114,112 + 256 = 1,114,368
#
# transformer_encoder_student: D=32, 4 heads, F=64, 1 layer:
#   embeddings              p = 1000*32 + 16*32 = 32,512
#   layer                   p = (3,072+96) + (1,024+32) + (2,048+64) + (2,048+32) + 128 = 8,544
#                           m = 3*16*32*32 + 2*(16*16*32) + 16*32*32 + 2*(16*32*64)
#                             = 49,152 + 16,384 + 16,384 + 65,536 = 147,456
#   classifier              p = 32*4 + 4 = 132            m = 128
#   total p = 32,512 + 8,544 + 132 = 41,188;  m = 147,456 + 128 = 147,584
#
# lstm_tagger: V=1000, embedding E=32, hidden H=32 per direction, bidirectional, L=16, T=17 tags:
#   embedding               p = 1000*32 = 32,000
#   LSTM, per direction     p = W_ih 4H*E + W_hh 4H*H + b_ih 4H + b_hh 4H
#                             = 4,096 + 4,096 + 128 + 128 = 8,448; 2 directions -> 16,896
#                           m = 4*H*(E+H) per step = 128*64 = 8,192; x 16 steps x 2 = 262,144
#   head 2H->T per token    p = 64*17 + 17 = 1,105        m = 16*64*17 = 17,408
#   total p = 32,000 + 16,896 + 1,105 = 50,001;  m = 262,144 + 17,408 = 279,552
#
# lstm_tagger_student: H=16:
#   LSTM per direction      p = 64*32 + 64*16 + 64 + 64 = 3,200; x2 -> 6,400
#                           m = 4*16*(32+16) = 3,072 per step; x 16 x 2 = 98,304
#   head 32->17             p = 32*17 + 17 = 561          m = 16*32*17 = 8,704
#   total p = 32,000 + 6,400 + 561 = 38,961;  m = 98,304 + 8,704 = 107,008
# ------------------------------------------------------------------------------------------
HAND = {
    #  name:                        (params,    MACs at batch 1)
    "lenet5":                      (61_706,      416_520),
    "resnet_small":                (78_042,   12_501_632),
    "resnet_small_student":        (19_954,    3_236_160),
    "mobilenet_small":             (40_618,    2_673_280),
    "mobilenet_small_student":     (11_482,      746_816),
    "transformer_encoder":         (132_228,   1_114_368),
    "transformer_encoder_student": (41_188,      147_584),
    "lstm_tagger":                 (50_001,      279_552),
    "lstm_tagger_student":         (38_961,      107_008),
}

# MACs outside matmul/conv that torch.utils.flop_counter does not see, per model at batch 1:
# it has no formula for the CPU attention kernel nor for aten.lstm. From the derivations above:
#   transformer_encoder: layers x (Q.K^T + P.V) = 2 * (16,384 + 16,384) = 65,536
#   transformer_encoder_student: 1 * (8,192 + 8,192) = 16,384
#   lstm_tagger: the LSTM's 262,144;  lstm_tagger_student: 98,304
PEER_BLIND = {"transformer_encoder": 65_536, "transformer_encoder_student": 16_384,
              "lstm_tagger": 262_144, "lstm_tagger_student": 98_304}


def _params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


TORCH_NAMES = [name for name in zoo.names() if zoo.get(name).framework == "torch"]


@pytest.fixture(scope="module")
def built() -> dict[str, torch.nn.Module]:
    return {name: zoo.get(name).build() for name in TORCH_NAMES}


def _count_ops_or_skip():
    """``count_ops``, or a skip when the counting engine does not provide it yet.

    Skips only when the engine module or its ``count_ops`` is missing; an import error raised
    inside an existing engine fails the test.
    """
    engine = "deeplite_like.backends.torch.counting"
    try:
        counting = importlib.import_module(engine)
    except ModuleNotFoundError as exc:
        if exc.name != engine:
            raise
        pytest.skip(f"{engine} does not exist yet")
    if not hasattr(counting, "count_ops"):
        pytest.skip(f"{engine} does not define count_ops yet")
    from deeplite_like.backends.torch import count_ops

    return count_ops


# ----------------------------------------------------------------------------------- registry
def test_import_does_not_import_torch():
    code = "import sys, deeplite_like.zoo as z; z.names(); z.get('lenet5'); print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_names_cover_the_hand_derivations():
    assert set(TORCH_NAMES) == set(HAND)
    assert zoo.names()[0] == "lenet5"  # registration order, not alphabetical
    assert zoo.get("lenet5") is zoo.ZOO["lenet5"]


def test_unknown_name_suggests_close_ones():
    with pytest.raises(ValueError, match=r"no zoo model named 'resnet_smal'; did you mean 'resnet_small'"):
        zoo.get("resnet_smal")


def test_register_refuses_a_taken_name():
    with pytest.raises(ValueError, match="already has a model named 'lenet5'"):
        zoo.register(zoo.get("lenet5"))


def test_kwargs_are_read_only():
    with pytest.raises(TypeError):
        zoo.get("resnet_small").kwargs["widths"] = (1,)  # type: ignore[index]


@pytest.mark.parametrize("name", [n for n in HAND if zoo.get(n).student])
def test_student_pairs_are_consistent(name):
    teacher = zoo.get(name)
    student = zoo.get(teacher.student)
    assert student.teacher == name
    for attribute in ("task", "input_shape", "input_dtype", "num_classes", "output_shape", "vocab_size"):
        assert getattr(student, attribute) == getattr(teacher, attribute), attribute
    assert HAND[student.name][0] < HAND[name][0] and HAND[student.name][1] < HAND[name][1]


# -------------------------------------------------------------------------- build and forward
@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("name", list(HAND))
def test_forward_shape(built, name, batch_size):
    entry = zoo.get(name)
    model = built[name]
    x = entry.example_input(batch_size=batch_size)
    assert tuple(x.shape) == (batch_size, *entry.input_shape)
    assert x.dtype == getattr(torch, entry.input_dtype)
    with torch.no_grad():
        y = model(x)
    assert tuple(y.shape) == (batch_size, *entry.output_shape)
    assert y.shape[-1] == entry.num_classes
    assert torch.isfinite(y).all()


@pytest.mark.parametrize("name", list(HAND))
def test_build_is_eval_and_deterministic(built, name):
    entry = zoo.get(name)
    model = built[name]
    assert not any(m.training for m in model.modules())
    again = entry.build()
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), k
    other = entry.build(seed=1)
    assert not all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), other.state_dict().values()))


def test_build_leaves_the_global_rng_untouched():
    torch.manual_seed(1234)
    state = torch.get_rng_state()
    expected_next = torch.rand(3)
    torch.set_rng_state(state)
    for name in TORCH_NAMES:
        zoo.get(name).build(seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(torch.rand(3), expected_next)


def test_build_overrides_and_refuses_unknown_kwargs():
    model = zoo.get("resnet_small").build(num_classes=100)
    assert tuple(model(zoo.get("resnet_small").example_input()).shape) == (1, 100)
    with pytest.raises(TypeError, match=r"zoo model 'lenet5' does not take width_mult; .*accepts: num_classes"):
        zoo.get("lenet5").build(width_mult=0.5)


def test_transformer_refuses_too_long_input():
    model = zoo.get("transformer_encoder").build()
    with pytest.raises(ValueError, match="got 17 tokens per sample but max_len is 16"):
        model(torch.zeros(1, 17, dtype=torch.int64))


# ------------------------------------------------------------------------------------- params
@pytest.mark.parametrize("name", list(HAND))
def test_params_match_hand_derivation(built, name):
    assert _params(built[name]) == HAND[name][0]


# -------------------------------------------------------------------------------------- MACs
@pytest.mark.parametrize("name", list(HAND))
def test_macs_peer_flop_counter(built, name):
    """torch.utils.flop_counter (2 FLOPs per MAC) agrees with the hand MACs it can see.

    Grad mode stays on so the transformer takes its unfused path (the fused eval fast path is
    invisible to flop_counter); the peer is blind to attention and LSTM (``PEER_BLIND``).
    """
    entry = zoo.get(name)
    counter = FlopCounterMode(display=False)
    with counter:
        built[name](entry.example_input())
    assert counter.get_total_flops() == 2 * (HAND[name][1] - PEER_BLIND.get(name, 0))


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("name", list(HAND))
def test_macs_match_hand_derivation(built, name, grad):
    """count_ops at batch 1 and 4 equals the hand derivation (x 4 at batch 4).

    Under no_grad the transformer runs its fused fast path, which must count the same.
    """
    count_ops = _count_ops_or_skip()
    entry = zoo.get(name)
    for batch_size in (1, 4):
        with torch.set_grad_enabled(grad):
            count = count_ops(built[name], entry.example_input(batch_size=batch_size))
        assert count.macs == batch_size * HAND[name][1], (name, batch_size, count.by_operator)


@pytest.mark.parametrize("name", list(HAND))
def test_zoo_models_have_no_untracked_ops(built, name):
    count_ops = _count_ops_or_skip()
    count = count_ops(built[name], zoo.get(name).example_input())
    assert count.untracked == {}


def test_lenet5_macs_per_layer():
    count_ops = _count_ops_or_skip()
    count = count_ops(zoo.get("lenet5").build(), zoo.get("lenet5").example_input())
    assert {k: count.by_module[k].macs for k in LENET5_LAYER_MACS} == LENET5_LAYER_MACS


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_transformer_macs_per_layer(grad):
    # One encoder layer: 196,608 + 16,384 + 16,384 + 65,536 + 131,072 + 131,072 = 557,056.
    count_ops = _count_ops_or_skip()
    entry = zoo.get("transformer_encoder")
    with torch.set_grad_enabled(grad):
        count = count_ops(entry.build(), entry.example_input())
    assert count.by_module["encoder.layers.0"].macs == 557_056
    assert count.by_module["encoder.layers.1"].macs == 557_056
    assert count.by_module["classifier"].macs == 256


# --------------------------------------------------------------------------------------- data
@pytest.mark.parametrize("name", list(HAND))
def test_synthetic_splits(name):
    entry = zoo.get(name)
    state = torch.get_rng_state()
    splits = entry.synthetic_splits(batch_size=3, batches=2, seed=5)
    assert torch.equal(torch.get_rng_state(), state)
    assert set(splits) == {"train", "test"}
    for batches in splits.values():
        assert len(batches) == 2
        for x, y in batches:
            assert tuple(x.shape) == (3, *entry.input_shape) and x.dtype == getattr(torch, entry.input_dtype)
            assert tuple(y.shape) == (3, *entry.output_shape[:-1]) and y.dtype == torch.int64
            assert 0 <= int(y.min()) and int(y.max()) < entry.num_classes
            if entry.vocab_size is not None:
                assert 0 <= int(x.min()) and int(x.max()) < entry.vocab_size
    again = entry.synthetic_splits(batch_size=3, batches=2, seed=5)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(splits["train"], again["train"]))
    assert not torch.equal(splits["train"][0][0], splits["test"][0][0])
    assert not torch.equal(splits["train"][0][0], splits["train"][1][0])


def test_synthetic_splits_by_name_and_seed_are_disjoint():
    from deeplite_like.zoo.torch_models import synthetic_splits

    by_name = synthetic_splits("lenet5", batch_size=2, batches=1, seed=0)
    by_entry = zoo.get("lenet5").synthetic_splits(batch_size=2, batches=1, seed=0)
    assert torch.equal(by_name["test"][0][0], by_entry["test"][0][0])
    # split seeds are 2*seed + i: seed 0 -> (0, 1), seed 1 -> (2, 3); no split is shared
    seed1 = synthetic_splits("lenet5", batch_size=2, batches=1, seed=1)
    assert not torch.equal(seed1["train"][0][0], by_name["test"][0][0])


def test_synthetic_splits_refuse_bad_sizes():
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        zoo.get("lenet5").synthetic_splits(batch_size=0)
    with pytest.raises(ValueError, match="batches must be a positive int, got -1"):
        zoo.get("lenet5").synthetic_splits(batches=-1)


def test_example_input_is_deterministic_and_seedable():
    entry = zoo.get("transformer_encoder")
    a, b = entry.example_input(batch_size=2), entry.example_input(batch_size=2)
    assert torch.equal(a, b)
    assert not torch.equal(a, entry.example_input(batch_size=2, seed=1))
