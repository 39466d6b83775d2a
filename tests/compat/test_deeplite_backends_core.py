"""deeplite-profiler's core calls on both backends: Device, include_weights, enable_forward_pass_data_splits,
ForwardPass(model_input_pattern=...) and its subclass hooks, re-registering defaults (seed 002 spelling)."""
import logging
from copy import deepcopy

import numpy as np
import pytest
import torch
import torch.nn as nn

from deeplite_like import ComputeEvalMetric, Device, ForwardPass
from deeplite_like.backends.torch import ComputeComplexity, ComputeExecutionTime, TorchProfiler

FAST = {"min_run_time": 0.01}


def linear_data():
    torch.manual_seed(0)
    return {"train": [(torch.randn(3, 4), torch.zeros(3))], "test": [(torch.randn(3, 4), torch.zeros(3))]}


# --- Device ---------------------------------------------------------------------------------
def test_device_spellings():
    assert Device('CPU') == Device.CPU == Device('cpu') == Device.parse('Cpu')
    assert Device('GPU') == Device.GPU == Device.CUDA and Device('cuda:1').index == 1
    with pytest.raises(ValueError):
        Device('unknown device')


@pytest.mark.parametrize("device", [Device.CPU, Device('CPU'), "cpu", torch.device("cpu")])
def test_torch_timing_accepts_every_device_spelling(device):
    p = TorchProfiler(nn.Linear(4, 2), linear_data())
    assert p.compute_status("execution_time", device=device, batch_size=1, **FAST) > 0
    assert p.get_status("execution_time").details["device"] == "cpu"


# --- include_weights ------------------------------------------------------------------------
@pytest.mark.parametrize("include_weights, footprint", [
    # Linear(4, 2): (4*2 + 2) fp32 params = 40 B; peak at batch 1: input 4 floats + output 2 floats = 24 B
    (True, 40 + 24),
    (False, 24),
])
def test_torch_include_weights(include_weights, footprint):
    p = TorchProfiler(nn.Linear(4, 2), linear_data())
    status = p.compute_network_status(batch_size=1, device=Device.CPU, include_weights=include_weights, **FAST)
    assert status["peak_activation_memory"] == 24
    assert status["memory_footprint"] == footprint
    assert p.get_status("memory_footprint").details["include_weights"] is include_weights


def test_torch_include_weights_counts_buffers_too():
    # Conv 1->2 3x3 (18 + 2 params) + BatchNorm(2): 4 params, 2 running stats + 1 int64 counter as buffers
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    p = TorchProfiler(model, {"test": [(torch.randn(1, 1, 5, 5), 0)]})
    with_weights = p.compute_network_status(include_weights=True, **FAST)["memory_footprint"]
    peak = p.status_get("peak_activation_memory")
    assert with_weights == (20 + 4) * 4 + (2 + 2) * 4 + 8 + peak
    assert p.compute_network_status(include_weights=False, **FAST)["memory_footprint"] == peak


# --- enable_forward_pass_data_splits and ForwardPass ----------------------------------------
def test_enable_forward_pass_data_splits_defaults_to_x_of_x_y():
    data = TorchProfiler.enable_forward_pass_data_splits(linear_data())
    assert dict(data).keys() == {"train", "test"} and data.forward_pass is None
    p = TorchProfiler(nn.Linear(4, 2), data)
    assert p.compute_status("macs", batch_size=1) == 8  # 4 * 2


@pytest.mark.parametrize("pattern, batch", [
    ((0, '_'), lambda x: (x, torch.zeros(3))),
    (('_', 0), lambda x: (torch.zeros(3), x)),
    (('_', '_', 0), lambda x: ("id", torch.zeros(3), x)),
])
def test_model_input_pattern_picks_the_input(pattern, batch):
    x = torch.randn(3, 4)
    fp = ForwardPass(model_input_pattern=pattern, expecting_common_inputs=True)
    data = TorchProfiler.enable_forward_pass_data_splits({"test": [batch(x)]}, fp)
    p = TorchProfiler(nn.Linear(4, 2), data)
    assert p.forward_pass is fp
    assert p.compute_status("macs", batch_size=2) == 2 * 8


def test_model_input_pattern_orders_several_inputs():
    class Two(nn.Module):
        def forward(self, a, b):
            return a @ b  # (n, 3) @ (3, 5): n*3*5 MACs

    a, b = torch.randn(2, 3), torch.randn(3, 5)
    fp = ForwardPass(model_input_pattern=('_', 1, '_', 0))  # model(batch[3], batch[1])
    assert fp(("y", b, "z", a)) == ((a, b), {})
    p = TorchProfiler(Two(), {"test": [("y", b, "z", a)]}, forward_pass=fp)
    assert p.compute_status("macs", batch_size=2) == 2 * 3 * 5
    assert p.compute_status("macs", batch_size=1) == 1 * 3 * 5  # a's first sample; b (3 rows) is not the batch


@pytest.mark.parametrize("pattern, error", [
    (('&', 1, 2, '_', 0), TypeError),
    ((1, 1, 1, '_', 0), TypeError),
    ((0, 2), TypeError),
])
def test_invalid_model_input_patterns(pattern, error):
    with pytest.raises(error, match="model_input_pattern"):
        ForwardPass(model_input_pattern=pattern)


def test_pattern_longer_than_the_batch_is_a_value_error():
    fp = ForwardPass(model_input_pattern=('_', 1, 2, '_', 0))
    with pytest.raises(ValueError, match="expects 5"):
        fp((None, 'b'))
    assert fp((None, 'b', 'c', None, 'a')) == (('a', 'b', 'c'), {})
    assert ForwardPass(model_input_pattern=(0,))(123) == ((123,), {})
    assert ForwardPass(model_input_pattern=('_',))(123) == ((), {})


def test_enable_forward_pass_with_deeplite_per_split_dict():
    fp = ForwardPass(model_input_pattern=('_', 0))
    data = TorchProfiler.enable_forward_pass_data_splits({"train": [], "test": []}, {"train": fp, "test": None})
    assert data.forward_pass is fp
    with pytest.raises(ValueError, match="one ForwardPass"):
        TorchProfiler.enable_forward_pass_data_splits({"train": [], "test": []},
                                                      {"train": fp, "test": ForwardPass()})


class DictForwardPass(ForwardPass):
    """deeplite's subclass hooks: inputs from a dict batch, and made-up inputs for a batch size."""

    def extract_model_inputs(self, batch):
        return batch

    def model_call(self, model, batch, device):
        return model(**batch)

    def create_random_model_inputs(self, batch_size):
        return {'x': torch.rand(batch_size, 10), 'y': torch.rand(batch_size, 10)}


class DictModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 3)

    def forward(self, x=None, y=None):
        return {'add': self.fc(x + y), 'sub': x - y}


def test_forward_pass_subclass_hooks():
    loader = [{'x': torch.rand(4, 10), 'y': torch.rand(4, 10)}]
    fp = DictForwardPass(expecting_common_inputs=False)
    p = TorchProfiler(DictModule(), TorchProfiler.enable_forward_pass_data_splits({"test": loader}, fp))
    # create_random_model_inputs(batch_size) gives the inputs: batch_size * 10 * 3 MACs of fc
    assert p.compute_status("macs", batch_size=2) == 2 * 30
    assert p.compute_status("macs", batch_size=5) == 5 * 30
    # without a batch size, the data's own batch (4 samples) through extract_model_inputs
    assert fp.inputs_for({"test": loader}, "test") == ((), loader[0])
    out = fp.perform(DictModule(), loader[0], Device.CPU)
    assert out['add'].shape == (4, 3)
    assert fp.random_perform(DictModule(), 3, Device.CPU)['sub'].shape == (3, 10)


def test_base_forward_pass_model_call_and_refusals():
    fp = ForwardPass(model_input_pattern=(0, '_'))
    assert fp.perform(lambda x: x * 2, (3, 'label'), Device.CPU) == 6
    with pytest.raises(TypeError, match="not callable"):
        fp.model_call(None, 1, Device.CPU)
    with pytest.raises(TypeError, match="call infer_sampler"):  # random inputs need a described batch first
        fp.random_perform(lambda x: x, 2, Device.CPU)


# --- re-registering defaults, the manual's torch flow ---------------------------------------
def test_reregistering_a_default_is_silent(caplog):
    p = TorchProfiler(nn.Linear(4, 2), linear_data())
    with caplog.at_level(logging.WARNING, logger="deeplite_like"):
        p.register_profiler_function(ComputeComplexity())
        p.register_profiler_function(ComputeExecutionTime())
    assert caplog.text == ""


def test_manual_torch_flow(caplog):
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
    data_splits = {"train": [(torch.randn(2, 3, 4, 4), torch.tensor([1, 2]))],
                   "test": [(torch.randn(2, 3, 4, 4), torch.tensor([1, 2]))]}

    def get_accuracy(model, data_loader):
        return 50.0

    data_loader = TorchProfiler.enable_forward_pass_data_splits(data_splits)
    profiler = TorchProfiler(model, data_loader, name="Original Model")
    profiler.register_profiler_function(ComputeComplexity())
    profiler.register_profiler_function(ComputeExecutionTime())
    profiler.register_profiler_function(ComputeEvalMetric(get_accuracy, 'accuracy', unit_name='%'))
    with caplog.at_level(logging.DEBUG, logger="deeplite_like"):
        status = profiler.compute_network_status(batch_size=1, device=Device.CPU, short_print=False,
                                                 include_weights=True, print_mode='debug', **FAST)
    # conv: 8 out channels * 16 positions * 27 = 3456 MACs; linear: 128 * 10 = 1280
    assert status['macs'] == 3456 + 1280 and status['eval_metric'] == status['accuracy'] == 50.0
    assert "Original Model (backend: torch)" in caplog.text
    profiler2 = profiler.clone(model=deepcopy(model))
    profiler2.name = "Clone Model"
    report = profiler.compare(profiler2, short_print=False, batch_size=1, device=Device.CPU, print_mode='debug',
                              **FAST)
    assert report.names == ["Original Model", "Clone Model"]
    assert profiler2.status_get('macs') == profiler.status_get('macs')
    assert all(v1 == v2 for (k1, v1), (k2, v2) in zip(profiler.status_items(), profiler2.status_items())
               if k1 not in ('layerwise_summary', 'inference_time', 'execution_time', 'throughput'))


# --- Keras -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keras_dense():
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    data = {"test": [(np.random.rand(3, 4).astype("float32"), np.zeros(3))]}
    return model, data


def test_keras_device_include_weights_and_forward_pass(keras_dense):
    from deeplite_like.backends.keras import KerasProfiler

    model, data = keras_dense
    fp = ForwardPass(model_input_pattern=(0, '_'))
    p = KerasProfiler(model, KerasProfiler.enable_forward_pass_data_splits(data, fp))
    assert p.forward_pass is fp
    status = p.compute_network_status(batch_size=1, device=Device.CPU, include_weights=True, **FAST)
    peak = status["peak_activation_memory"]
    assert status["macs"] == 8 and status["memory_footprint"] == 40 + peak  # Dense(4 -> 2): 10 fp32 = 40 B
    status = p.compute_network_status(batch_size=1, device=Device('CPU'), include_weights=False, **FAST)
    assert status["memory_footprint"] == peak
    assert p.get_status("memory_footprint").details["include_weights"] is False


def test_keras_reregistering_a_default_is_silent(keras_dense, caplog):
    from deeplite_like.backends.keras import ComputeComplexity as KerasComplexity, KerasProfiler

    model, data = keras_dense
    p = KerasProfiler(model, data)
    with caplog.at_level(logging.WARNING, logger="deeplite_like"):
        p.register_profiler_function(KerasComplexity())
    assert caplog.text == ""
