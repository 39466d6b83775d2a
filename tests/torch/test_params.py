"""parameter_stats: element counts and bytes, derived by hand."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.params import ParamStats, parameter_stats


def lenet5() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10),
    )


# conv1 6*1*5*5 + 6 = 156; conv2 16*6*5*5 + 16 = 2416; fc1 400*120 + 120 = 48120;
# fc2 120*84 + 84 = 10164; fc3 84*10 + 10 = 850.  156 + 2416 + 48120 + 10164 + 850 = 61706.
LENET_PARAMS = 61706


def test_lenet_hand_count():
    stats = parameter_stats(lenet5())
    assert stats.total_params == LENET_PARAMS
    assert stats.trainable_params == LENET_PARAMS and stats.non_trainable_params == 0
    assert stats.param_bytes == LENET_PARAMS * 4 == 246824  # float32
    assert stats.by_dtype == {"float32": 246824}
    assert stats.buffer_count == 0 and stats.buffer_bytes == 0
    assert stats.total_bytes == 246824


def test_fp16_and_bf16_sizes():
    half = parameter_stats(lenet5().half())
    assert half.total_params == LENET_PARAMS
    assert half.param_bytes == LENET_PARAMS * 2 == 123412
    assert half.by_dtype == {"float16": 123412}
    mixed = lenet5()
    mixed[-1].to(torch.bfloat16)  # fc3: 850 params at 2 bytes; the other 60856 at 4 bytes
    stats = parameter_stats(mixed)
    assert stats.by_dtype == {"float32": 60856 * 4, "bfloat16": 850 * 2}
    assert stats.param_bytes == 243424 + 1700


def test_meta_model_counts_without_allocating():
    with torch.device("meta"):
        model = lenet5()
    assert next(model.parameters()).device.type == "meta"
    stats = parameter_stats(model)
    assert (stats.total_params, stats.param_bytes) == (LENET_PARAMS, LENET_PARAMS * 4)


class _TiedLM(nn.Module):
    def __init__(self, tie: str) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 16)  # 100*16 = 1600
        self.head = nn.Linear(16, 100, bias=False)  # 16*100 = 1600 when untied
        if tie == "same":
            self.head.weight = self.emb.weight  # the same Parameter object
        elif tie == "storage":
            self.head.weight = nn.Parameter(self.emb.weight.data)  # another Parameter, same storage
        elif tie == "transposed":
            self.emb.weight = nn.Parameter(self.head.weight.data.t())  # a transposed view of it


@pytest.mark.parametrize("tie", ["same", "storage", "transposed"])
def test_tied_weights_counted_once(tie):
    assert parameter_stats(_TiedLM("none")).total_params == 3200  # 1600 + 1600, untied
    stats = parameter_stats(_TiedLM(tie))
    assert stats.total_params == 1600
    assert stats.param_bytes == 1600 * 4


def test_tied_on_meta_device():
    with torch.device("meta"):
        model = _TiedLM("storage")
    assert parameter_stats(model).total_params == 1600


def test_views_of_one_flat_storage_are_all_counted():
    flat = torch.zeros(20)
    module = nn.Module()
    module.a = nn.Parameter(flat[:12].view(3, 4))  # elements 0..11
    module.b = nn.Parameter(flat[12:])  # elements 12..19: disjoint, so 12 + 8 = 20
    stats = parameter_stats(module)
    assert stats.total_params == 20 and stats.param_bytes == 80


def test_frozen_layers_split_trainable():
    model = lenet5()
    for p in (*model[0].parameters(), *model[3].parameters()):
        p.requires_grad_(False)
    stats = parameter_stats(model)
    # frozen: conv1 156 + conv2 2416 = 2572; trainable: 61706 - 2572 = 59134
    assert stats.non_trainable_params == 2572
    assert stats.trainable_params == 59134
    assert stats.total_params == LENET_PARAMS


def test_buffers_reported_apart():
    stats = parameter_stats(nn.BatchNorm2d(16))
    assert stats.total_params == 32  # weight 16 + bias 16
    assert stats.param_bytes == 128
    # running_mean 16 + running_var 16 float32, num_batches_tracked 1 int64: 32*4 + 8 = 136
    assert stats.buffer_count == 33
    assert stats.buffer_bytes == 136
    assert stats.buffer_by_dtype == {"float32": 128, "int64": 8}
    assert stats.by_dtype == {"float32": 128}
    assert stats.total_bytes == 264


def test_rejects_non_module():
    with pytest.raises(TypeError, match="expects a torch.nn.Module"):
        parameter_stats(torch.zeros(3))


def _quantized_engine_available() -> bool:
    engines = torch.backends.quantized.supported_engines
    return any(e in engines for e in ("x86", "fbgemm", "qnnpack"))


quantized = pytest.mark.skipif(not _quantized_engine_available(),
                               reason="no quantized CPU engine (x86/fbgemm/qnnpack) in this torch build")


@quantized
def test_quantized_linear_and_conv_packed_weights():
    import torch.ao.nn.quantized as nnq

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that quantized tensor creation is deprecated
        model = nn.Sequential(nnq.Linear(8, 4), nnq.Conv2d(3, 5, 3))
        stats = parameter_stats(model)
    assert list(model.parameters()) == []  # the packed weights are not parameters()
    # Linear: weight 4*8 = 32 qint8 (32 B) + bias 4 fp32 (16 B)
    # Conv2d: weight 5*3*3*3 = 135 qint8 (135 B) + bias 5 fp32 (20 B)
    assert stats.total_params == 32 + 4 + 135 + 5 == 176
    assert stats.trainable_params == 0 and stats.non_trainable_params == 176
    assert stats.by_dtype == {"qint8": 32 + 135, "float32": 16 + 20}
    assert stats.param_bytes == 203
    # each module's output scale (fp32 scalar, 4 B) and zero_point (int64 scalar, 8 B): 2 * 12
    assert stats.buffer_count == 4 and stats.buffer_bytes == 24


@quantized
def test_dynamic_quantization_keeps_count_and_shrinks_bytes():
    from torch.ao.quantization import quantize_dynamic

    float_model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = quantize_dynamic(float_model, {nn.Linear}, dtype=torch.qint8)
        stats = parameter_stats(qmodel)
    # float: 10*20 + 20 + 20*5 + 5 = 325 params, 1300 B; int8 weights 200 + 100 = 300 B,
    # fp32 biases (20 + 5) * 4 = 100 B.
    assert parameter_stats(float_model).param_bytes == 1300
    assert stats.total_params == 325
    assert stats.by_dtype == {"qint8": 300, "float32": 100}
    assert stats.param_bytes == 400
    # The dynamic Linear inherits the static one's state_dict: an unused output scale (fp32
    # scalar, 4 B) and zero_point (int64 scalar, 8 B) per module; 2 modules: 4 elements, 24 B.
    assert stats.buffer_count == 4 and stats.buffer_bytes == 24


def test_result_type():
    assert isinstance(parameter_stats(nn.Linear(2, 2)), ParamStats)
