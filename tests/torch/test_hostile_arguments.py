"""Hostile input, second round (issue 29, sections 2 and 4): arguments that gave wrong numbers silently.

Each test is one scenario of the issue: a clear error naming the argument, raised before the
model runs (a forward hook counts the calls), or the right number.
"""
from __future__ import annotations

import math
import time

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch import TorchProfiler
from deeplite_like.backends.torch.latency import measure_execution_time
from deeplite_like.backends.torch.training import batch_fit
from deeplite_like.backends.torch.training.batch_fit import largest_batch
from deeplite_like.backends.torch.training.estimate import estimate_training_memory
from deeplite_like.errors import check_batch_agrees, check_flag, check_seconds

FAST = {"min_run_time": 0.01}


def counted(model: nn.Module) -> list:
    """``model`` gets a forward hook appending to the returned list: the test sees whether it ran."""
    calls: list = []
    model.register_forward_hook(lambda *_: calls.append(1))
    return calls


def profiler(rows: int = 2) -> tuple[TorchProfiler, list]:
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    return TorchProfiler(model, {"test": [(torch.randn(rows, 4), torch.zeros(rows))]}), counted(model)


# ------------------------------------------------------------------------------ switches
@pytest.mark.parametrize("option", ["backward", "meta", "causal_half", "include_weights"])
@pytest.mark.parametrize("value", ["no", "False", None, 2, 0.0])
def test_compute_network_status_switch_that_is_not_a_bool_is_refused(option, value):
    p, calls = profiler()
    with pytest.raises(TypeError, match=rf"compute_network_status\({option}=\.\.\.\) must be True or False"):
        p.compute_network_status(**{option: value}, **FAST)
    assert calls == []  # refused before the model ran


def test_compute_status_backward_no_is_refused_not_taken_as_true():
    p, calls = profiler()
    with pytest.raises(TypeError, match=r"compute_status\(backward=\.\.\.\) must be True or False, got str 'no'"):
        p.compute_status("macs", backward="no")
    assert calls == []
    # The switch given properly: Linear(4, 3) at the default batch_size=1 is 1 * 4 * 3 = 12 MACs, forward only
    assert p.compute_status("macs", backward=False) == 12


def test_check_flag_accepts_bools_and_0_1():
    assert check_flag(True, "x", "f") is True and check_flag(0, "x", "f") is False and check_flag(1, "x", "f") is True


# ------------------------------------------------------------------------------ batch sizes
@pytest.mark.parametrize("value, error", [(-5, ValueError), (0, ValueError), ("8", TypeError), (2.0, TypeError),
                                          (True, TypeError)])
def test_compute_network_status_batch_size_out_of_range_is_refused(value, error):
    p, calls = profiler()
    with pytest.raises(error, match=r"compute_network_status\(batch_size=\.\.\.\) must be"):
        p.compute_network_status(batch_size=value, **FAST)
    assert calls == []


def test_compute_network_status_batch_size_10_to_the_12_is_refused_without_building_it():
    p, calls = profiler()
    started = time.perf_counter()
    # per sample: the model input, 4 float32 features (16 B; the label is no model input) + an 8 B row
    # index = 24 B; 10**12 samples are 24 TB, more than half of any machine's memory
    with pytest.raises(MemoryError, match=r"batch_size=1000000000000: the inputs alone would take .*"
                                          r"\(1000000000000 samples of 16 B each, plus an 8 B index per sample\)"):
        p.compute_network_status(batch_size=10**12, **FAST)
    assert time.perf_counter() - started < 5  # no list of 10**12 indices was built
    assert calls == []


def test_batch_size_larger_than_the_inputs_still_resizes():
    p, _ = profiler(rows=2)
    # 5 rows taken cyclically from 2: 5 * 4 * 3 = 60 MACs
    assert p.compute_status("macs", batch_size=5) == 60


def test_estimate_training_memory_batch_size_that_disagrees_with_the_inputs_is_refused():
    model = nn.Linear(4, 3)
    x = torch.randn(4, 4)  # 4 rows
    with pytest.raises(ValueError, match=r"estimate_training_memory\(batch_size=64\) disagrees with the inputs \(4x4\)"
                                         r": no input has 64 samples"):
        estimate_training_memory(model, x, batch_size=64)
    # the right label is accepted, and is what is reported
    assert estimate_training_memory(model, x, batch_size=4).batch_size == 4
    assert estimate_training_memory(model, x).batch_size == 4


def test_estimate_training_memory_batch_size_of_a_sequence_first_input_is_accepted():
    """(L, N, E) = (5, 3, 4): the batch, 3, is dimension 1; naming it is not a disagreement."""
    model = nn.Linear(4, 3)
    assert estimate_training_memory(model, torch.randn(5, 3, 4), batch_size=3).batch_size == 3


@pytest.mark.parametrize("value, error", [(-5, ValueError), (0, ValueError), (2.5, TypeError), ("4", TypeError)])
def test_estimate_training_memory_bad_batch_size_is_refused(value, error):
    with pytest.raises(error, match=r"estimate_training_memory\(batch_size=\.\.\.\) must be"):
        estimate_training_memory(nn.Linear(4, 3), torch.randn(4, 4), batch_size=value)


def test_estimate_training_memory_meta_no_is_refused():
    with pytest.raises(TypeError, match=r"estimate_training_memory\(meta=\.\.\.\) must be True or False"):
        estimate_training_memory(nn.Linear(4, 3), torch.randn(4, 4), meta="no")


def test_measure_execution_time_batch_size_that_disagrees_is_refused():
    model = nn.Linear(4, 3)
    calls = counted(model)
    with pytest.raises(ValueError, match=r"measure_execution_time\(batch_size=64\) disagrees"):
        measure_execution_time(model, (torch.randn(4, 4),), batch_size=64, min_run_time=0.01)
    assert calls == []


def test_check_batch_agrees_without_shapes_checks_nothing():
    check_batch_agrees(64, [], "f")  # no tensor input: nothing to compare with
    check_batch_agrees(None, [(4, 4)], "f")


# ------------------------------------------------------------------------------ min_run_time
@pytest.mark.parametrize("value, error, shown", [(math.nan, ValueError, "nan"), (math.inf, ValueError, "inf"),
                                                 (-1.0, ValueError, "-1.0"), ("1", TypeError, "str '1'"),
                                                 (None, TypeError, "NoneType None")])
def test_compute_network_status_min_run_time_nan_inf_str_is_refused(value, error, shown):
    p, calls = profiler()
    with pytest.raises(error, match=r"compute_network_status\(min_run_time=\.\.\.\) must be") as raised:
        p.compute_network_status(min_run_time=value)
    assert shown in str(raised.value)
    assert calls == []


@pytest.mark.parametrize("value, error", [(math.nan, ValueError), (math.inf, ValueError), ("1", TypeError)])
def test_measure_execution_time_min_run_time_nan_inf_str_is_refused(value, error):
    model = nn.Linear(4, 3)
    calls = counted(model)
    with pytest.raises(error, match="min_run_time"):
        measure_execution_time(model, (torch.randn(2, 4),), min_run_time=value)
    assert calls == []


def test_check_seconds_accepts_ints_and_floats():
    assert check_seconds(1, "t") == 1.0 and check_seconds(0.25, "t") == 0.25


# ------------------------------------------------------------------------------ largest_batch
def test_largest_batch_with_a_real_example_probes_on_meta(monkeypatch):
    """Every probed size is built on meta (no host memory), and the answer is the meta example's."""
    seen: list[tuple[int, str]] = []
    measure = batch_fit.estimate_training_memory

    def spy(model, *inputs, **options):
        seen.append((inputs[0].shape[0], inputs[0].device.type))
        return measure(model, *inputs, **options)

    monkeypatch.setattr(batch_fit, "estimate_training_memory", spy)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    real = largest_batch(model, torch.randn(4, 256), fit="80GiB")
    assert seen and all(device == "meta" for _, device in seen)
    assert max(size for size, _ in seen) >= 2**20  # probes of a million samples (1 GiB each), all on meta
    seen.clear()
    meta = largest_batch(model, torch.randn(4, 256, device="meta"), fit="80GiB")
    assert (real.size, real.measured) == (meta.size, meta.measured)


@pytest.mark.parametrize("options, error, message", [
    ({"fit": "0GiB"}, ValueError, "a memory size must be positive"),
    ({"fit": "1e999GiB"}, ValueError, "not a finite memory size"),
    ({"fit": 2.5}, TypeError, "fit=...) takes a size"),
    ({"fit": "1GiB", "axis": 2}, ValueError, "axis=...) is 0"),
    ({"fit": "1GiB", "max_size": 0}, ValueError, "max_size=...) must be >= 1"),
    ({"fit": "1GiB", "batch_size": 8}, TypeError, "sets batch_size itself"),
])
def test_largest_batch_bad_arguments_are_refused_before_measuring(options, error, message):
    model = nn.Linear(4, 3)
    calls = counted(model)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        largest_batch(model, torch.randn(2, 4), **options)
    assert calls == []


# ------------------------------------------------------------------------------ get_model_profile
def test_model_profile_to_text_with_a_str_depth_names_the_argument():
    from deeplite_like.profiling import get_model_profile

    profile = get_model_profile(nn.Linear(4, 3), input_shape=(2, 4), print_profile=False, module_latency=False)
    with pytest.raises(TypeError, match=r"module_depth must be an int >= -1 .*got str '2'; e\.g\. module_depth=2"):
        profile.to_text("2", 3)
    with pytest.raises(TypeError, match="top_modules must be an int >= 1"):
        profile.aggregated(1, "3")
    with pytest.raises(TypeError, match=r"to_text\(detailed=\.\.\.\) must be True or False"):
        profile.to_text(1, 3, detailed="no")
    assert "Linear" in profile.to_text(-1, 3)


@pytest.mark.parametrize("option", ["backward", "meta", "print_profile", "detailed", "as_string", "module_latency"])
def test_get_model_profile_switch_that_is_not_a_bool_is_refused(option):
    from deeplite_like.profiling import get_model_profile

    model = nn.Linear(4, 3)
    calls = counted(model)
    with pytest.raises(TypeError, match=rf"get_model_profile\({option}=\.\.\.\) must be True or False, got str 'no'"):
        get_model_profile(model, input_shape=(2, 4), **{option: "no"})
    assert calls == []


def test_model_profile_json_is_strict():
    import json

    from deeplite_like.profiling import get_model_profile

    profile = get_model_profile(nn.Linear(4, 3), input_shape=(2, 4), print_profile=False, module_latency=False)
    profile.duration_s = float("nan")  # a clock that failed: the strict spelling, not a bare token
    text = profile.to_json()
    data = json.loads(text, parse_constant=lambda token: pytest.fail(f"bare {token} in the JSON"))
    assert data["duration_s"] == "NaN"


def test_compare_with_backward_no_names_compare_before_any_model_runs():
    from deeplite_like import compare

    (a, calls_a), (b, calls_b) = profiler(), profiler()
    with pytest.raises(TypeError, match=r"compare\(backward=\.\.\.\) must be True or False, got str 'no'"):
        compare([a, b], backward="no", **FAST)
    assert calls_a == [] and calls_b == []


def test_compare_of_two_loose_profilers_says_to_pass_a_list():
    from deeplite_like import compare

    (a, _), (b, _) = profiler(), profiler()
    with pytest.raises(TypeError, match=r"compare takes a list of profilers, the reference first"):
        compare(a, b)


def test_peak_activation_memory_batch_size_that_disagrees_is_refused():
    from deeplite_like.backends.torch.memory import peak_activation_memory

    with pytest.raises(ValueError, match=r"peak_activation_memory\(batch_size=64\) disagrees with the inputs \(4x4\)"):
        peak_activation_memory(nn.Linear(4, 3), (torch.randn(4, 4),), batch_size=64)
    with pytest.raises(TypeError, match=r"peak_activation_memory\(grad=\.\.\.\) must be True or False"):
        peak_activation_memory(nn.Linear(4, 3), (torch.randn(4, 4),), grad="no")


@pytest.mark.parametrize("option", ["backward", "meta", "causal_half", "warn_untracked"])
def test_count_ops_switch_that_is_not_a_bool_is_refused(option):
    from deeplite_like.backends.torch import count_ops

    model = nn.Linear(4, 3)
    with pytest.raises(TypeError, match=rf"count_ops\({option}=\.\.\.\) must be True or False, got str 'no'"):
        count_ops(model, torch.randn(1, 4), **{option: "no"})
    assert count_ops(model, torch.randn(1, 4), backward=False).macs == 12  # 1 * 4 * 3
