"""meta=True gets through value-dependent control flow on index tensors, as transformers 5 decoders need.

Small integer and boolean tensors derived from the inputs (position ids, attention masks) keep
their values on meta (``counting/meta_values.py``), so ``.item()``, ``bool(t)`` and ``nonzero``
on them take the branch a real run takes; a read of weights or float data still fails, naming
the op and the module.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import ForwardError, count_ops


class PackedCheck(nn.Module):
    """transformers 5's ``find_packed_sequence_indices``, then one branch or the other.

    Not packed (position ids 0..T-1 in every row): one Linear(8, 8) on B*T rows.
    Packed (the ids restart inside a row): two Linear(8, 8) on B*T rows.
    """

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        if position_ids is None:
            position_ids = torch.arange(x.shape[1], device=x.device).unsqueeze(0).expand(x.shape[0], -1)
        first_dummy = position_ids[:, :1] - 1
        diff = torch.diff(position_ids, prepend=first_dummy, dim=-1)
        packed = (diff != 1).cumsum(-1)
        x = self.first(x)
        if (packed[:, -1] == 0).all():  # bool() of a meta tensor: needs its value
            return x
        return self.second(x)


class PaddedRows(nn.Module):
    """Runs the Linear(8, 4) only on the rows the attention mask keeps (``nonzero``: a data-dependent shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.clone()
        mask.masked_fill_(mask > 1, 1)  # in place on an integer tensor: its values must follow
        kept = torch.nonzero(mask.flatten()).squeeze(-1)
        rows = x.reshape(-1, x.shape[-1]).index_select(0, kept)
        if int(mask.sum().item()) == mask.numel():  # no padding: scale once more
            rows = rows * 2
        return self.proj(rows)


def both(model: nn.Module, *args, **kwargs):
    real = count_ops(model, *args, kwargs=kwargs, warn_untracked=False)
    meta = count_ops(model, *args, kwargs=kwargs, meta=True, warn_untracked=False)
    return real, meta


def test_packed_sequence_check_takes_the_real_branch_on_meta():
    model = PackedCheck()
    x = torch.randn(2, 5, 8)
    # Not packed: one Linear on 2*5 = 10 rows: MACs 10*8*8 = 640; FLOPs 2*640 + bias 80 = 1,360.
    real, meta = both(model, x)
    assert (real.macs, real.flops) == (meta.macs, meta.flops) == (640, 1_360)
    assert "second" not in meta.by_module
    # Packed (row 1 restarts at 0): both Linears: MACs 1,280; FLOPs 2,720.
    packed = torch.tensor([[0, 1, 2, 3, 4], [0, 1, 0, 1, 2]])
    real, meta = both(model, x, position_ids=packed)
    assert (real.macs, real.flops) == (meta.macs, meta.flops) == (1_280, 2_720)
    assert meta.by_module["second"].macs == 640


def test_nonzero_and_in_place_writes_on_an_integer_mask_count_like_the_real_run():
    model = PaddedRows()
    x = torch.randn(2, 4, 8)
    # 5 of the 8 tokens are kept (the 2 becomes 1 in place): MACs 5*8*4 = 160; FLOPs 2*160 + bias 5*4 = 340.
    mask = torch.tensor([[1, 1, 2, 0], [1, 1, 0, 0]])
    real, meta = both(model, x, mask)
    assert (real.macs, real.flops) == (meta.macs, meta.flops) == (160, 340)
    # No padding: 8 rows, and the * 2 on 8*8 = 64 elements: MACs 8*8*4 = 256; FLOPs 512 + 32 + 64 = 608.
    full = torch.ones(2, 4, dtype=torch.long)
    real, meta = both(model, x, full)
    assert (real.macs, real.flops) == (meta.macs, meta.flops) == (256, 608)
    assert mask.tolist() == [[1, 1, 2, 0], [1, 1, 0, 0]]  # the caller's tensor is untouched


def test_a_model_built_on_meta_with_real_integer_inputs():
    with torch.device("meta"):
        model = PackedCheck()
    result = count_ops(model, torch.randn(2, 5, 8), kwargs={"position_ids": torch.tensor([[0, 1, 2, 0, 1]] * 2)},
                       warn_untracked=False)
    assert result.macs == 1_280  # packed: both Linears, 2*5*8*8 each


def test_a_read_of_float_values_names_the_op_and_module():
    class Gate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            y = self.fc(x)
            return y * 2 if bool((y > 0).all()) else y

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = Gate()

        def forward(self, x):
            return self.gate(x)

    with pytest.raises(ForwardError) as info:
        count_ops(Net(), torch.randn(2, 4), meta=True)
    message = str(info.value)
    assert "aten._local_scalar_dense" in message and "module 'gate'" in message
    assert "depend on the weights or on floating-point data" in message and "meta=False" in message


def test_large_integer_tensors_get_no_values():
    from deeplite_like.backends.torch.counting import meta as meta_values

    class Reads(nn.Module):
        def forward(self, ids):
            return ids.float() * (2 if ids.max().item() > 0 else 1)

    big = torch.ones(meta_values.MAX_ELEMENTS + 1, dtype=torch.int32)
    with pytest.raises(ForwardError, match="needs tensor values"):
        count_ops(Reads(), big, meta=True)
    assert count_ops(Reads(), torch.ones(4, dtype=torch.int32), meta=True).flops == 4  # the * 2 on 4 elements


def test_get_model_profile_on_meta_takes_the_real_branch_too():
    import deeplite_like

    packed = torch.tensor([[0, 1, 2, 3, 4], [0, 1, 0, 1, 2]])
    profile = deeplite_like.get_model_profile(PackedCheck(), args=(torch.randn(2, 5, 8),),
                                              kwargs={"position_ids": packed}, meta=True, print_profile=False)
    assert (profile.macs, profile.flops) == (1_280, 2_720)  # both Linears, as in the packed case above
    assert profile.module("second").macs == 640


def test_tensors_made_in_the_forward_land_on_meta_with_their_values():
    from torch.overrides import _get_current_function_mode_stack

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            self.modes = len(_get_current_function_mode_stack())
            keep = torch.tensor([0, 2, 3])  # torch.tensor(data): on meta, with its values
            steps = torch.arange(x.shape[1])  # a factory with no device: on meta, with its values
            self.devices = (keep.device.type, steps.device.type, torch.zeros(2).device.type)
            if int(keep.sum()) == 5 and int(steps[-1]) == 4:  # the branch a real run takes
                x = x[:, keep]  # (2, 3, 8)
            return self.fc(x) * torch.ones(1) + torch.zeros(8)

    x = torch.randn(2, 5, 8)
    model = Model()
    real = count_ops(model, x)
    assert model.devices == ("cpu", "cpu", "cpu")
    meta = count_ops(model, x, meta=True)
    assert model.devices == ("meta", "meta", "meta")
    # fc on the kept rows: 2 * 3 rows * 8 * 8 = 384 MACs; (* ones, + zeros) 2*3*8 FLOPs each
    assert real.macs == meta.macs == 384 and real.flops == meta.flops
    assert model.modes == 0  # no function mode (torch.device("meta")) taxes every torch call of the forward


# -- float tensors built from constants keep their values on meta (issue 22) -----------------------
class _PixelMask(nn.Module):
    """DETR-style: a float mask made with torch.ones, zeroed where padded, then checked with .any()."""

    def forward(self, x):
        mask = torch.ones(x.shape[0], x.shape[2], x.shape[3])
        mask[:, :2, :] = 0
        if (mask == 0).any():  # a value read: needs the mask's values
            return x * mask.unsqueeze(1)
        return x


def test_a_float_mask_built_from_constants_counts_on_meta():
    # x (2, 3, 4, 4) * mask: one multiply per element, 96 FLOPs; the comparison and .any() are free
    x = torch.randn(2, 3, 4, 4)
    real, meta = count_ops(_PixelMask(), x), count_ops(_PixelMask(), x, meta=True)
    assert (meta.macs, meta.flops) == (real.macs, real.flops) == (0, 96)


def test_float_inputs_and_weights_still_have_no_values_on_meta():
    class ReadsTheInput(nn.Module):
        def forward(self, x):
            return x * 2 if (x > 0).any() else x

    with pytest.raises(ForwardError, match="meta"):
        count_ops(ReadsTheInput(), torch.randn(3), meta=True)


def test_bart_with_sdpa_and_no_decoder_mask_counts_on_meta():
    # d_model 32, 4 heads of 8, FFN 64, 8 tokens on each side, one layer each (MACs = tokens x in x out):
    # encoder: q, k, v, o 4 * 8*32*32 = 32,768; Q.K^T and P.V 2 * 4*8*8*8 = 4096; FFN 2 * 8*32*64 =
    #   32,768 -> 69,632;
    # decoder: self-attention 32,768 + 4096; cross-attention (k, v of the 8 encoder states) 32,768 +
    #   4096; FFN 32,768 -> 106,496;  total 176,128
    transformers = pytest.importorskip("transformers")
    config = transformers.BartConfig(vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                     decoder_ffn_dim=64, max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.BartModel(config).eval()
    ids = torch.randint(3, 100, (1, 8))
    real, meta = count_ops(model, ids), count_ops(model, ids, meta=True)
    assert meta.macs == real.macs == 176_128
    assert meta.flops == real.flops
