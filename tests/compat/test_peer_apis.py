"""Our numbers and behaviours beside the peers' ported suites (tests/compat/deeplite, deepspeed, cli99).

The ported suites assert the peers' numbers; where ours differ by a documented convention
(docs/migration.rst), the test here asserts ours, on the same model and data, with the
derivation. The rest are the scenarios of issue 24 in the peers' own spelling: deeplite's
unbatched Keras samples, DeepSpeed's ``FlopsProfiler(model, ds_engine, recompute_fwd_factor)``,
and the names deliberately not provided.
"""
import logging
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import deeplite_like
from deeplite_like import Device, ForwardPass, getLogger, setLogger
from deeplite_like.profiling import FlopsProfiler


# --- deeplite's test_compute_network_status, our numbers ----------------------------------------
def test_torch_compute_network_status_ours():
    """deeplite's torch functional model: Conv2d(3, 32, 5, padding=2), ReLU, MaxPool2d(2), Flatten on 1x3x32x32."""
    from tests.compat.deeplite.torch_tests.functional import get_profiler

    status = get_profiler().compute_network_status(batch_size=1, device=Device.CPU, short_print=False,
                                                   include_weights=True, print_mode='debug')
    conv_outputs = 32 * 32 * 32                       # 32 channels of 32x32 ("same" padding)
    assert status['macs'] == conv_outputs * 3 * 5 * 5  # 2,457,600; deeplite's 'flops' 0.002555904 G adds
    # the bias adds, ReLU outputs and pooling inputs (3 x 32,768) to them
    assert status['flops'] == (2 * 2457600           # the contractions
                               + conv_outputs         # bias adds
                               + conv_outputs         # ReLU, 1 per element
                               + 32 * 16 * 16 * 4)    # max pool: K = 2x2 per output
    assert status['flops'] == 5013504
    assert status['total_params'] == 32 * 3 * 5 * 5 + 32 == 2432   # deeplite: 0.002432 (millions)
    assert status['model_size'] == 2432 * 4 == 9728                 # deeplite: 0.00927734375 MB (= 9728 / 2**20)
    # peak of live activations: the input, the conv output and the ReLU output (not in place) at once
    assert status['peak_activation_memory'] == (3 * 32 * 32 + 2 * conv_outputs) * 4 == 274432
    # + the weights (include_weights=True); deeplite's 0.33349609375 MB (349,696 B) summed every layer's output
    assert status['memory_footprint'] == 274432 + 9728
    assert status['execution_time'] > 0        # measured (deeplite's test mocked it to 2 ms)
    # 8192 random regression targets: the argmax of a row matches the output's with odds of 1 in 8192
    assert status['eval_metric'] == 100


def test_tf_compute_network_status_ours():
    """deeplite's TF functional model: Conv2D(32, 5x5, same), ReLU, MaxPool 2x2, Flatten on one 224x224x3 image
    given without its batch axis."""
    from tests.compat.deeplite.tf_tests.functional import get_profiler

    status = get_profiler().compute_network_status(batch_size=1, device=Device.CPU, short_print=False,
                                                   include_weights=True, print_mode='debug')
    conv_outputs = 224 * 224 * 32
    assert status['macs'] == conv_outputs * 3 * 5 * 5 == 120422400  # deeplite (TF1 graph profiler): 0.122030433 G
    assert status['flops'] == 2 * 120422400 + conv_outputs + conv_outputs + 112 * 112 * 32 * 4 == 245661696
    assert status['total_params'] == 2432 and status['model_size'] == 9728   # as in the torch case
    # input + conv output + ReLU output (a separate Activation layer), float32
    assert status['peak_activation_memory'] == (224 * 224 * 3 + 2 * conv_outputs) * 4 == 13447168
    assert status['memory_footprint'] == 13447168 + 9728   # deeplite: 15.896 MB, the sum of every output + weights


# --- Keras: unbatched samples, as deeplite's TF helpers took them ------------------------------
@pytest.fixture(scope="module")
def keras_classifier():
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(10)])
    kernel, bias = model.layers[-1].get_weights()
    # zero kernel: every sample scores the bias, ranked 3 > 9 > 8 > 7 > 6 > 5 > 4 > 2 > 1 > 0
    model.layers[-1].set_weights([np.zeros_like(kernel), np.array([0, 1, 2, 9, 3, 4, 5, 6, 7, 8], "float32")])
    return model


def unbatched(labels):
    """deeplite's TF data: one (8, 8, 3) image and a (1, 10) one-hot label per item."""
    rng = np.random.default_rng(0)
    return [(rng.random((8, 8, 3), dtype=np.float32), np.eye(10)[[label]]) for label in labels]


def test_keras_helpers_take_unbatched_samples(keras_classifier):
    from deeplite_like.backends.keras import get_accuracy, get_missclass, get_topk

    data = unbatched([3, 3, 9, 3])  # every prediction is class 3: 3 of 4 right; 9 is the 2nd score
    assert get_accuracy(keras_classifier, data) == 75.0
    assert get_missclass(keras_classifier, data) == 25.0
    assert get_topk(keras_classifier, data) == {'top-1': 75.0, 'top-5': 100.0}


def test_keras_data_path_takes_unbatched_samples(keras_classifier):
    from deeplite_like.backends.keras import TFProfiler

    profiler = TFProfiler(keras_classifier, TFProfiler.enable_forward_pass_data_splits({"test": unbatched([3])}))
    # Dense 192 -> 10 per sample (Flatten is free): 1,920 MACs; the batch axis is added first, then 2 samples taken
    assert profiler.compute_status("macs", batch_size=2) == 2 * 8 * 8 * 3 * 10


def test_keras_error_names_shapes_never_tensor_contents(keras_classifier):
    from deeplite_like.backends.keras import get_accuracy

    wrong = [(np.full((8, 8, 4), 0.123456, "float32"), np.eye(10)[[0]])]  # 4 channels where 3 are expected
    with pytest.raises(ValueError) as caught:
        get_accuracy(keras_classifier, wrong)
    text = "\n".join([str(caught.value), *getattr(caught.value, "__notes__", [])])
    assert "0.123456" not in text and "\x1b[" not in text
    assert "8x8x4" in text or "(1, 8, 8, 4)" in text  # the shape given is named


# --- deeplite's data-loader layer ----------------------------------------------------------------
def test_forward_pass_without_pattern_or_extract_hook_is_a_type_error():
    with pytest.raises(TypeError, match="extract_model_inputs"):
        ForwardPass(model_input_pattern=None, expecting_common_inputs=True)
    with pytest.raises(TypeError, match="create_random_model_inputs"):
        ForwardPass(model_input_pattern=(0, '_'), expecting_common_inputs=False)
    x = torch.ones(2)
    args, kwargs = ForwardPass()((x, 'y'))  # our own spelling keeps its default: x of (x, y)
    assert args[0] is x and len(args) == 1 and kwargs == {}


def test_torch_forward_pass_infers_its_sampler_and_makes_random_inputs():
    from deeplite_like.backends.torch import TorchDataLoader, TorchForwardPass

    batches = [(torch.ones(4, 3, 5), torch.zeros(4))]
    loader = TorchDataLoader(batches, TorchForwardPass(model_input_pattern=(0, '_')))  # infers the sampler
    fp = loader.forward_pass
    assert fp.get_model_input_shapes() == (torch.Size([3, 5]),)     # per sample: the batch axis stripped
    (x,) = fp.create_random_model_inputs(7)
    assert x.shape == (7, 3, 5) and x.dtype == torch.float32
    model = nn.Linear(5, 2)
    assert loader.sample_forward(model).shape == (4, 3, 2)
    assert len(loader) == 1 and list(loader) == batches and list(loader) == batches  # re-iterable: a valid split
    with pytest.raises(ValueError, match="never moves a model"):
        fp.model_call(model, (torch.ones(1, 5),), 'meta')


def test_set_logger_redirects_the_profilers_logging(caplog):
    class Warns(deeplite_like.ProfilerFunction):
        def get_bounded_status_keys(self):
            return deeplite_like.Flops()

        def __call__(self, model, data_splits):
            return 1

    class Other(Warns):
        pass

    mine = logging.getLogger("peer_apis_test")
    before = getLogger().logger
    setLogger(mine)
    try:
        profiler = deeplite_like.Profiler(object(), {})
        profiler.register_profiler_function(Warns())
        with caplog.at_level(logging.WARNING, logger="peer_apis_test"):
            profiler.register_profiler_function(Other())  # a second function for 'flops': warned about
        assert [r.name for r in caplog.records] == ["peer_apis_test"]
    finally:
        setLogger(before)
    assert getLogger().logger is before


@pytest.mark.parametrize("module, name, advice", [
    ("deeplite_like", "DynamicEvalMetric", "add_secondary_metric"),
    ("deeplite_like.metrics", "DynamicEvalMetric", "add_secondary_metric"),
    ("deeplite_like.backends.torch", "cudafy", "never move"),
    ("deeplite_like.backends.keras", "get_temp_model", "no temporary copy"),
    ("deeplite_like.profiling", "flops_to_string", "views.count"),
])
def test_names_not_provided_say_what_to_use(module, name, advice):
    with pytest.raises(ImportError, match=advice):
        exec(f"from {module} import {name}", {})


# --- DeepSpeed's FlopsProfiler(model, ds_engine=None, recompute_fwd_factor=0.0) -----------------
def linear_step(prof, model, runs=1):
    prof.start_profile()
    for _ in range(runs):
        model(torch.ones(3, 4))
    prof.stop_profile()


@pytest.mark.parametrize("make", [
    lambda m: FlopsProfiler(m, None, 0.0),                                     # positionally
    lambda m: FlopsProfiler(m, ds_engine=None, recompute_fwd_factor=0.0),      # by keyword
])
def test_flops_profiler_deepspeed_constructor_and_attributes(make, capsys):
    model = nn.Linear(4, 2, bias=False)
    prof = make(model)
    linear_step(prof, model)
    # 3 samples x 4 x 2 multiply-accumulates; 2 FLOPs each; 4 x 2 weights
    assert (prof.get_total_macs(), prof.get_total_flops(), prof.get_total_params()) == (24, 48, 8)
    assert isinstance(prof.get_total_flops(as_string=True), str)
    assert not hasattr(prof, "flops")  # DeepSpeed sets them in print_model_profile
    prof.print_model_profile()
    assert (prof.flops, prof.macs, prof.params) == (48, 24, 8)
    prof.end_profile()
    assert (prof.flops, prof.macs, prof.params) == (48, 24, 8)  # kept after end_profile, as DeepSpeed's engine reads
    for getter in (prof.get_total_flops, prof.get_total_macs, prof.get_total_params, prof.get_total_duration):
        with pytest.raises(AttributeError, match="nothing profiled"):  # DeepSpeed: AttributeError too
            getter()


@pytest.mark.parametrize("factor", [-1.0, "0.5", True])
def test_recompute_fwd_factor_is_checked(factor):
    with pytest.raises(ValueError, match="recompute_fwd_factor"):
        FlopsProfiler(nn.Linear(4, 2), None, factor)


def test_engine_block_with_recompute_factor(capsys):
    milliseconds = {"fwd": 1000.0, "bwd": 2000.0, "step": 1000.0}
    engine = SimpleNamespace(world_size=2, dp_world_size=2, mp_world_size=2, has_moe_layers=False,
                             train_micro_batch_size_per_gpu=lambda: 3, wall_clock_breakdown=lambda: True,
                             timers=lambda name: SimpleNamespace(elapsed=lambda reset: milliseconds[name]))
    model = nn.Linear(4, 2, bias=False)
    prof = FlopsProfiler(model, engine, 1.0)
    linear_step(prof, model)
    assert prof.get_profile().model_parallel_size == 2  # the engine's mp_world_size
    prof.print_model_profile(detailed=False)
    out = capsys.readouterr().out
    assert re.search(r"data parallel size:\s+2\b", out) and re.search(r"batch size per GPU:\s+3\b", out)
    # backward estimated as (2 + 1.0) x the forward's 48 FLOPs over the engine's 2 s: 72 FLOPS
    assert re.search(r"bwd FLOPS per GPU = 3 \* fwd flops per GPU / bwd latency:\s+72 FLOPS", out)
    # the iteration: (3 + 1) x 48 FLOPs over 1 + 2 + 1 s = 48 FLOPS
    assert re.search(r"FLOPS per GPU = 4 \* fwd flops per GPU / iter latency:\s+48 FLOPS", out)
    prof.end_profile()


def test_reset_profile_counts_from_now():
    model = nn.Linear(4, 2, bias=False)
    prof = FlopsProfiler(model)
    prof.start_profile()
    model(torch.ones(3, 4))
    model(torch.ones(3, 4))
    prof.reset_profile()
    model(torch.ones(3, 4))
    prof.stop_profile()
    assert prof.get_total_macs() == 24  # the one call after the reset: 3 x 4 x 2
    prof.end_profile()
