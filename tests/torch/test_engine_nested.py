"""Nested tensors (``torch.nested``, strided and jagged layouts) are counted, never crash the engine.

Issue 10: ``nn.TransformerEncoder`` called under ``no_grad`` with ``src_key_padding_mask`` turned
its input nested and the engine crashed (``NestedTensorImpl doesn't support sizes``), even in
the error-message builder. Counting turns the fused fast path off (``fastpath.py``), so the
encoder no longer nests; inputs that are nested already are priced per component
(``counting/nested.py``) and keep the fused kernels, the only ones that accept them.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import count_ops
from deeplite_like.backends.torch.tensors import describe_args

LAYOUTS = [torch.strided, torch.jagged]


def _nested(*lengths: int, layout: torch.layout = torch.strided, width: int = 64) -> torch.Tensor:
    with warnings.catch_warnings():  # (the strided layout warns that it is a prototype)
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor([torch.randn(n, width) for n in lengths], layout=layout)


def _layer_macs(length: int, embed: int = 64, heads: int = 4, ffn: int = 128) -> int:
    """One TransformerEncoderLayer on one sequence of ``length`` tokens (batch 1).

    in-proj L*E*3E + QK^T H*L*L*(E/H) + PV H*L*L*(E/H) + out-proj L*E*E + FFN 2*L*E*F.
    """
    return (length * embed * 3 * embed + 2 * heads * length * length * (embed // heads)
            + length * embed * embed + 2 * length * embed * ffn)


def test_layer_macs_helper_matches_the_hand_derivation():
    # L=12: 147,456 + 2 * 9,216 + 49,152 + 196,608 = 411,648
    assert _layer_macs(12) == 411_648
    # L=8: 98,304 + 2 * 4,096 + 32,768 + 131,072 = 270,336
    assert _layer_macs(8) == 270_336


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("padded", [(8, 12), (12, 12), (1, 5)])  # valid lengths per sequence
def test_encoder_with_padding_mask_counts_the_same_with_and_without_grad(grad, padded):
    # The model: 2 layers, x (2, 12, 64). Unfused, every position is computed (padding
    # too): per layer 24 tokens: in-proj 24*64*192 = 294,912; QK^T and PV 2*(2*4*12*12*16) = 36,864;
    # out-proj 24*64*64 = 98,304; FFN 2*24*64*128 = 393,216 -> 823,296; x 2 layers = 1,646,592.
    torch.manual_seed(0)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2,
                                    enable_nested_tensor=True).eval()
    x = torch.randn(2, 12, 64)
    mask = torch.zeros(2, 12, dtype=torch.bool)
    for row, valid in enumerate(padded):
        mask[row, valid:] = True
    with torch.set_grad_enabled(grad):
        counted = count_ops(encoder, x, kwargs={"src_key_padding_mask": mask})
    assert counted.macs == 1_646_592 == 2 * 2 * _layer_macs(12)
    assert counted.untracked == {}
    assert counted.by_module["layers.0.self_attn"].calls == 1  # unfused: the children ran and are attributed
    assert torch.backends.mha.get_fastpath_enabled()  # the switch is back


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("grad", [True, False])
def test_nested_input_through_linear_layers_is_priced_per_component(layout, grad):
    # Components of 12 and 8 rows: 20 rows.
    # Linear(64, 32): 20*64*32 = 40,960 MACs; FLOPs 2*40,960 + 20*32 (bias) = 82,560.
    # + ReLU 20*32 = 640 FLOPs; Linear(32, 16): 20*32*16 = 10,240 MACs, 2*10,240 + 20*16 = 20,800 FLOPs.
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    with torch.set_grad_enabled(grad):
        counted = count_ops(model, _nested(12, 8, layout=layout))
    assert counted.macs == 40_960 + 10_240
    assert counted.flops == 82_560 + 640 + 20_800
    assert counted.by_module["0"].macs == 40_960
    assert counted.batch_size == 2
    assert counted.untracked == {}


@pytest.mark.parametrize("lengths", [(12, 8), (5,), (3, 7, 1)])
def test_nested_input_sums_the_dense_counts_of_its_components(lengths):
    # Any per-sequence model: the nested count is the sum of the dense counts of each sequence alone.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 48), nn.GELU(), nn.LayerNorm(48), nn.Linear(48, 64), nn.Softmax(-1))
    nested = count_ops(model, _nested(*lengths))
    dense = [count_ops(model, torch.randn(1, n, 64)) for n in lengths]
    assert (nested.macs, nested.flops) == (sum(d.macs for d in dense), sum(d.flops for d in dense))
    assert nested.macs == sum(lengths) * (64 * 48 + 48 * 64)


def test_nested_input_to_an_encoder_layer_runs_its_fused_kernel_priced_per_sequence():
    # A nested input runs only on the fused fast path (eval, no_grad): counting keeps it on.
    # Per sequence (batch 1): L=12 -> 411,648 MACs, L=8 -> 270,336 MACs; 681,984 together.
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).eval()
    with torch.no_grad():
        counted = count_ops(layer, _nested(12, 8))
        dense = [count_ops(layer, torch.randn(1, n, 64)) for n in (12, 8)]
    assert counted.macs == 681_984 == _layer_macs(12) + _layer_macs(8)
    assert counted.flops == sum(d.flops for d in dense)
    assert counted.untracked == {}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_describe_args_shows_the_components_of_a_nested_tensor(layout):
    nested = _nested(12, 8, layout=layout)
    assert describe_args((nested,), {"mask": None}) == "(NestedTensor[float32, 12x64, 8x64], mask=None)"


def test_a_forward_error_on_nested_inputs_names_the_components():
    # torch's unfused MultiheadAttention rejects nested inputs (grad on: no fast path): the error
    # is ours (ForwardError naming the module and the nested shapes), not a crash in the message.
    from deeplite_like.backends.torch.counting import ForwardError

    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).eval()
    with pytest.raises(ForwardError) as info:
        count_ops(layer, _nested(12, 8))
    assert "'self_attn'" in str(info.value) and "NestedTensor[float32, 12x64, 8x64]" in str(info.value)


@pytest.mark.parametrize("batch_size,macs", [
    # components 12 and 8 tokens: batch 1 takes the first (411,648); 2 both (681,984); 3 cycles: 12, 8, 12
    (1, 411_648), (2, 681_984), (3, 2 * 411_648 + 270_336),
])
def test_profiler_takes_batches_of_a_nested_input(batch_size, macs):
    # Every metric runs on a nested input (no single shape): batches are components, the fast path stays on.
    from deeplite_like.backends.torch import TorchProfiler

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).eval()
    with torch.no_grad():
        profiler = TorchProfiler.from_inputs(layer, _nested(12, 8))
        profiler.compute_network_status(batch_size=batch_size, min_run_time=0.01)
    status = profiler.status_to_dict()
    assert status["macs"] == macs
    assert status["peak_activation_memory"] > 0
    assert "nested(12x64" in str(status["layerwise_summary"].rows[0]["input_shapes"])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_meta_counting_refuses_nested_inputs_and_says_what_to_do(layout):
    with pytest.raises(ValueError, match=r"no meta nested tensors.*meta=False") as info:
        count_ops(nn.Linear(64, 8), _nested(12, 8, layout=layout), meta=True)
    assert "NestedTensor[float32, 12x64, 8x64]" in str(info.value)


def test_a_formula_failing_on_the_components_is_reported_with_the_nested_shapes():
    from deeplite_like.backends.torch.counting import FormulaError, ForwardError, register_formula
    from deeplite_like.backends.torch.counting.registry import lookup

    relu = torch.ops.aten.relu
    original = lookup(relu.default)

    def broken(call):
        raise KeyError("oops")

    register_formula(relu, override=True)(broken)
    try:
        with pytest.raises(ForwardError) as info:
            count_ops(nn.ReLU(), _nested(12, 8))
    finally:
        register_formula(relu, override=True)(original)
    error = info.value.__cause__
    assert isinstance(error, FormulaError) and isinstance(error.__cause__, KeyError)
    assert "components of nested tensors (NestedTensor[float32, 12x64, 8x64])" in str(error)
    assert lookup(relu.default) is original
