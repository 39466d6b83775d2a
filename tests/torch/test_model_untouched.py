"""Every torch measurement leaves the model's values as found: buffers in any mode, QAT state, RNG.

A forward writes buffers in eval mode too: a counter, a cache, and a QAT model's observers and
FakeQuantize ``scale``/``zero_point`` (``observer_enabled`` does not follow ``.eval()``). Each
measurement (counting, memory, timing, layer timing, evaluation, the layerwise summary,
``get_model_profile``, ``FlopsProfiler``'s counting of the model) must put every buffer back,
bit for bit, and leave the random generators as found.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like import ComputeEvalMetric
from deeplite_like.backends.torch import TorchProfiler, accuracy, count_ops
from deeplite_like.backends.torch.compute import evaluate
from deeplite_like.backends.torch.latency import measure_execution_time, module_forward_times
from deeplite_like.backends.torch.memory import peak_activation_memory
from deeplite_like.backends.torch.params import layerwise_summary
from deeplite_like.profiling import get_model_profile

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Counting(nn.Module):
    """Eval-mode state written by every forward: a buffer counter, a buffer cache, a plain tensor attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.register_buffer("last", torch.zeros(6))
        self.seen = torch.zeros(())  # a plain attribute, not a registered buffer

    def forward(self, x):
        self.calls += 1
        self.seen += x.shape[0]
        out = self.fc(x)
        self.last.copy_(out.detach()[0])
        self.scratch = out.detach().clone()  # an attribute added by the forward
        return out


def splits(batch: int = 4) -> dict:
    torch.manual_seed(1)
    batches = [(torch.randn(batch, 4), torch.randint(0, 6, (batch,))) for _ in range(2)]
    return {"train": batches, "test": batches}


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in model.state_dict().items()}


def assert_identical(model: nn.Module, before: dict[str, torch.Tensor]) -> None:
    after = model.state_dict()
    assert after.keys() == before.keys()
    changed = [name for name, value in after.items() if not torch.equal(value, before[name])]
    assert changed == []


def assert_counting_untouched(model: Counting) -> None:
    assert int(model.calls) == 0 and float(model.seen) == 0.0
    assert torch.equal(model.last, torch.zeros(6))
    assert "scratch" not in model.__dict__


# -- the buffer counter in eval mode --------------------------------------------------------------
def test_full_compute_network_status_leaves_an_eval_counter_at_zero():
    model = Counting().eval()
    profiler = TorchProfiler(model, splits())
    profiler.register_profiler_function(ComputeEvalMetric(accuracy, "top1", unit_name="%"))
    report = profiler.compute_network_status(batch_size=2, min_run_time=0.02)
    keys = {row["key"] for row in report.to_dict()["metrics"]}
    # every default metric ran, execution time and the eval metric included; then the per-layer table
    assert {"macs", "execution_time", "peak_activation_memory", "top1"} <= keys
    summary = profiler.compute_status("layerwise_summary", batch_size=2)
    assert [row["module"] for row in summary.rows] == ["", "fc"]
    # the forward ran thousands of times (timing) yet the counter, the cache and the attribute are as found
    assert_counting_untouched(model)
    assert not model.training


@pytest.mark.parametrize("measure", [
    "count", "count_backward", "count_meta", "memory", "memory_grad", "timing", "timing_train", "layer_timing",
    "evaluate", "layerwise", "model_profile", "model_profile_backward",
])
def test_each_measurement_restores_eval_buffers_and_plain_attributes(measure):
    model = Counting().eval()
    x = torch.randn(2, 4)
    run = {
        "count": lambda: count_ops(model, x),
        "count_backward": lambda: count_ops(model, x, backward=True),
        "count_meta": lambda: count_ops(model, x, meta=True),
        "memory": lambda: peak_activation_memory(model, (x,)),
        "memory_grad": lambda: peak_activation_memory(model, (x,), grad=True),
        "timing": lambda: measure_execution_time(model, (x,), min_run_time=0.01, warmup=1),
        "timing_train": lambda: measure_execution_time(model, (x,), min_run_time=0.01, warmup=1, train=True),
        "layer_timing": lambda: module_forward_times(model, (x,)),
        "evaluate": lambda: evaluate(model, splits()["test"], metrics=("top1",)),
        "layerwise": lambda: layerwise_summary(model, (x,)),
        "model_profile": lambda: get_model_profile(model, args=[x], print_profile=False),
        "model_profile_backward": lambda: get_model_profile(model, args=[x], print_profile=False, backward=True),
    }[measure]
    run()
    assert_counting_untouched(model)


# -- a QAT model --------------------------------------------------------------------------------
def qat_model(backend: str) -> nn.Module:
    """Conv-BN-ReLU + Linear prepared for QAT, observers populated by one train-mode forward, then eval."""
    torch.manual_seed(0)
    model = nn.Sequential(torch.ao.quantization.QuantStub(), nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 6 * 6, 5), torch.ao.quantization.DeQuantStub())
    model.train()
    model.qconfig = torch.ao.quantization.get_default_qat_qconfig(backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ao.quantization.prepare_qat(model, inplace=True)
    model(torch.randn(2, 3, 8, 8))
    return model.eval()


@pytest.mark.parametrize("backend", ["fbgemm", "x86"])
def test_qat_model_buffers_are_bit_identical_after_every_measurement(backend):
    from deeplite_like.profiling import FlopsProfiler

    model = qat_model(backend)
    before = snapshot(model)
    # the fake-quant state is really there and a plain eval forward does rewrite it (else this test proves nothing)
    assert any(name.endswith("scale") for name in before) and any("min_val" in name for name in before)
    probe = qat_model(backend)
    probe(torch.randn(2, 3, 8, 8) * 10)
    assert any(not torch.equal(value, before[name]) for name, value in probe.state_dict().items())

    x = torch.randn(2, 3, 8, 8) * 10  # a range the observers have not seen: they would move
    data = {"train": [(x, torch.tensor([0, 1]))], "test": [(x, torch.tensor([0, 1]))]}
    TorchProfiler(model, data).compute_network_status(batch_size=2, min_run_time=0.02)
    assert_identical(model, before)
    count_ops(model, x)
    count_ops(model, x, backward=True)
    assert_identical(model, before)
    get_model_profile(model, args=[x], print_profile=False)
    assert_identical(model, before)
    assert not model.training and not any(m.training for m in model.modules())


def test_flops_profiler_on_a_qat_model_counts_a_forward_that_changes_it_as_the_user_asked():
    # Inside a FlopsProfiler window the user's own step runs (and may legitimately change buffers);
    # the profiler itself adds no change: the same forward outside a window gives the same state.
    from deeplite_like.profiling import FlopsProfiler

    x = torch.randn(2, 3, 8, 8) * 10
    plain, profiled = qat_model("fbgemm"), qat_model("fbgemm")
    with torch.no_grad():
        plain(x)
        profiler = FlopsProfiler(profiled)
        profiler.start_profile()
        profiled(x)
        profiler.end_profile()
    expected = plain.state_dict()
    assert all(torch.equal(value, expected[name]) for name, value in profiled.state_dict().items())


# -- random generators --------------------------------------------------------------------------
def dropout_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2)).train()


@pytest.mark.parametrize("measure", ["count", "count_backward", "memory", "timing", "model_profile", "layerwise"])
def test_a_train_mode_dropout_leaves_the_random_generator_as_found(measure):
    model = dropout_model()
    x = torch.randn(3, 4)
    run = {
        "count": lambda: count_ops(model, x),
        "count_backward": lambda: count_ops(model, x, backward=True),
        "memory": lambda: peak_activation_memory(model, (x,)),
        "timing": lambda: measure_execution_time(model, (x,), min_run_time=0.01, warmup=1),
        "model_profile": lambda: get_model_profile(model, args=[x], print_profile=False),
        "layerwise": lambda: layerwise_summary(model, (x,)),
    }[measure]
    state = torch.get_rng_state()
    expected_next = torch.rand(3)  # what the generator gives next when nothing drew in between
    torch.set_rng_state(state)
    run()
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(torch.rand(3), expected_next)
    assert model.training


def test_counting_a_dropout_model_twice_gives_the_same_masks_as_not_counting():
    # the dropout draws inside the count, and the generator is put back: the user's next forward
    # gets the same mask it would have got without the count
    model, x = dropout_model(), torch.randn(3, 4)
    torch.manual_seed(5)
    expected = model(x)
    torch.manual_seed(5)
    count_ops(model, x)
    assert torch.equal(model(x), expected)


class _DrawsEverywhere(nn.Module):
    """A train-mode dropout (torch's generator) and a layer drop with Python's and NumPy's."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        import random

        import numpy as np

        if random.random() < 2 and np.random.rand() < 2:  # always true: only the draws matter
            x = self.drop(self.fc(x))
        return x


@pytest.mark.parametrize("meta", [False, True])
@pytest.mark.parametrize("backward", [False, True])
def test_count_ops_leaves_every_global_generator_as_found(meta, backward):
    import random

    import numpy as np

    from deeplite_like.backends.torch import count_ops

    model, x = _DrawsEverywhere().train(), torch.randn(2, 4)

    def draws():
        return torch.rand(3).tolist(), random.random(), float(np.random.rand())

    torch.manual_seed(0), random.seed(0), np.random.seed(0)
    expected = draws()
    torch.manual_seed(0), random.seed(0), np.random.seed(0)
    counted = count_ops(model, x, meta=meta, backward=backward)
    assert counted.macs >= 2 * 4 * 4  # the forward ran its Linear (32 MACs)
    assert draws() == expected


# -- issue 29: models our code used to change or refuse ----------------------------------------------
def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("kind", ["script", "trace", "export"])
@pytest.mark.parametrize("meta", [True, False])
def test_training_memory_of_a_torchscript_or_exported_module_leaves_it_working(kind, meta):
    from deeplite_like.backends.torch.training.estimate import estimate_training_memory

    x = torch.randn(3, 4)
    plain = estimate_training_memory(_mlp(), x, meta=meta)
    eager = _mlp()
    if kind == "script":
        model = torch.jit.script(eager)
    elif kind == "trace":
        model = torch.jit.trace(eager, x)
    else:
        model = torch.export.export(eager, (x,)).module()
    before, expected = _state(model), model(x).detach()
    ours = estimate_training_memory(model, x, meta=meta)
    assert ours.peak_bytes == plain.peak_bytes  # the same step as the eager module's
    after = model.state_dict()
    assert {v.device.type for v in after.values()} == {"cpu"}  # nothing left on meta
    assert all(torch.equal(before[k], after[k]) for k in before)  # and never stepped
    assert torch.equal(model(x), expected)


@pytest.mark.parametrize("guard", [torch.no_grad, torch.inference_mode])
def test_training_figures_under_the_callers_no_grad_or_inference_mode(guard):
    # Linear(4, 8) -> ReLU -> Linear(8, 2) on 3 rows, backward with the input needing no grad:
    # forward 3*4*8 + 3*8*2 = 144 MACs; backward dW of both (144) and dX of the second (48) -> 336
    from deeplite_like.backends.torch import count_ops
    from deeplite_like.backends.torch.training.estimate import estimate_training_memory

    model = _mlp()
    plain = estimate_training_memory(model, torch.randn(3, 4))
    with guard():
        x = torch.randn(3, 4)
        assert estimate_training_memory(model, x) == plain
        assert count_ops(model, x, backward=True).macs == 336
        assert count_ops(model, x, backward=True, meta=True).macs == 336
        built_inside = _mlp()
    if guard is torch.inference_mode:  # its parameters are inference tensors: named, with what to do
        with pytest.raises(ValueError, match="parameter '0.weight' .* made under torch.inference_mode"):
            count_ops(built_inside, torch.randn(3, 4), backward=True)


class _RunningStat(nn.Module):
    """Keeps a running statistic as a parameter and writes it in place in every forward."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.running = nn.Parameter(torch.zeros(4), requires_grad=False)

    def forward(self, x):
        with torch.no_grad():
            self.running.add_(1)
        return self.fc(x) + self.running


@pytest.mark.parametrize("how", ["network_status", "model_profile", "count"])
def test_a_parameter_written_in_place_by_the_forward_is_put_back(how):
    from deeplite_like.backends.torch import TorchProfiler, count_ops
    from deeplite_like.profiling import get_model_profile

    model, x = _RunningStat(), torch.randn(2, 4)
    if how == "network_status":  # about a hundred forwards (timing included)
        profiler = TorchProfiler(model, {"test": [(x, torch.zeros(2, dtype=torch.long))]})
        profiler.compute_network_status(batch_size=2, short_print=True)
    elif how == "model_profile":
        get_model_profile(model, args=[x], print_profile=False)
    else:
        count_ops(model, x)
    assert torch.equal(model.running, torch.zeros(4))
