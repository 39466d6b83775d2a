import pytest
from hypothesis import given, strategies as st

from deeplite_like import Comparative
from deeplite_like.metrics import (BUILTIN_KEYS, ExecutionTime, Macs, ModelSize, Throughput, TotalParams,
                                   make_eval_metric)
from deeplite_like.units import format_bytes, pick_scale


@pytest.mark.parametrize("metric, value, shown, units", [
    (Macs, 4_100_000_000, 4.1, "GMACs"),          # 4.1e9 / 1e9
    (Macs, 999, 999, "MACs"),
    (TotalParams, 61_706, 61.706, "k params"),    # 61706 / 1e3
    (ModelSize, 3 * 2**20, 3.0, "MiB"),           # binary: 3 * 2**20 / 2**20
    (ModelSize, 1536, 1.5, "KiB"),                # 1536 / 1024
    (ExecutionTime, 0.0025, 2.5, "ms"),           # 0.0025 s / 1e-3
    (ExecutionTime, 2.0, 2.0, "s"),
    (ExecutionTime, 4e-6, 4.0, "us"),
    (Throughput, 12_500.0, 12_500.0, "samples/s"),  # never prefixed: k-samples/s flipped between runs
])
def test_display_scaling(metric, value, shown, units):
    m = metric(value)
    assert m.get_value() == pytest.approx(shown) and m.get_units() == units


def test_values_stay_raw():
    m = ModelSize(3 * 2**20)
    m.get_value()
    assert m.value == 3 * 2**20


def test_format_bytes_and_not_computed():
    assert format_bytes(3 * 2**20) == "3.000 MiB"
    assert Macs().format() == "not computed"


@given(st.floats(min_value=1e-3, max_value=1e15))
def test_scaled_value_is_between_one_and_the_next_prefix(value):
    for kind, step in (("count", 1e3), ("bytes", 1024.0)):
        scale = pick_scale(value, kind)
        shown = value / scale.factor
        assert shown < step or scale.prefix in ("T", "Ti")
        assert shown >= 1 or scale.factor == 1.0


def test_builtin_keys_have_names_units_and_directions():
    assert set(BUILTIN_KEYS) == {"macs", "flops", "total_params", "trainable_params", "model_size",
                                 "memory_footprint", "peak_activation_memory", "activation_arena", "execution_time",
                                 "throughput", "eval_metric", "inference_time", "layerwise_summary"}
    assert Macs.friendly_name() == "Computational complexity" and Macs.description()
    assert Macs().get_comparative() is Comparative.LOWER_IS_BETTER
    assert Throughput().get_comparative() is Comparative.HIGHER_IS_BETTER


def test_eval_metrics_are_user_named():
    top5 = make_eval_metric("top5", unit_name="%")
    loss = make_eval_metric("loss", comparative=Comparative.DIFFERENCE_LOWER)
    assert top5.NAME == "top5" and top5(91.5).get_units() == "%" and top5(91.5).get_value() == 91.5
    assert loss().get_comparative() is Comparative.DIFFERENCE_LOWER
    with pytest.raises(ValueError):
        make_eval_metric("")
