"""describe_change: the direction of a change in words, and unit conversion between metrics."""
from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deeplite_like import metrics as M
from deeplite_like.metrics import make_eval_metric
from deeplite_like.metrics.status_keys import Comparative, Metric, StatusKey
from deeplite_like.reports.changes import Change, conversion_factor, describe_change

MiB = 2**20


class Latency(Metric):
    NAME = "latency"
    BASE_UNIT = "s"
    UNIT_KIND = "seconds"
    COMPARATIVE = Comparative.LOWER_IS_BETTER
    DECREASE_WORD = "faster"
    INCREASE_WORD = "slower"


class LatencyMs(Latency):
    BASE_UNIT = "ms"
    UNIT_KIND = "plain"


class LatencyDrift(Latency):
    """A time compared by difference, lower is better."""

    NAME = "latency_drift"
    COMPARATIVE = Comparative.DIFFERENCE_LOWER


class SizeGiB(Metric):
    NAME = "size"
    BASE_UNIT = "GiB"
    COMPARATIVE = Comparative.LOWER_IS_BETTER
    DECREASE_WORD = "smaller"
    INCREASE_WORD = "larger"


class SizeMB(SizeGiB):
    BASE_UNIT = "MB"


class MacsG(M.Macs):
    BASE_UNIT = "GMACs"


class MacsM(M.Macs):
    BASE_UNIT = "MMACs"


Accuracy = M.EvalMetricDefault  # "%", DIFFERENCE (higher is better)
Fraction = make_eval_metric("eval_metric", unit_name="", comparative=Comparative.DIFFERENCE)
Loss = make_eval_metric("loss", unit_name="nat", comparative=Comparative.DIFFERENCE_LOWER)
Score = make_eval_metric("score", comparative=Comparative.NONE)


# ----------------------------------------------------------------------------- ratio wording
def test_model_size_smaller_is_better():
    # 42 MiB -> 8.75 MiB: 42 / 8.75 = 4.8 -> "4.80x smaller"; ratio 8.75 / 42 = 0.208333...
    change = describe_change(M.ModelSize(42 * MiB), M.ModelSize(int(8.75 * MiB)))
    assert change == Change("4.80x smaller", "better", 8.75 / 42, int(8.75 * MiB) - 42 * MiB)


def test_model_size_larger_is_worse():
    # swapped: 42 / 8.75 = 4.8 again, the other word
    change = describe_change(M.ModelSize(int(8.75 * MiB)), M.ModelSize(42 * MiB))
    assert (change.text, change.verdict) == ("4.80x larger", "worse")


def test_latency_slower_is_worse():
    # reference 1 ms, other 2.1 ms: 2.1 / 1 = 2.10 -> "2.10x slower"
    change = describe_change(M.ExecutionTime(0.001), M.ExecutionTime(0.0021))
    assert (change.text, change.verdict) == ("2.10x slower", "worse")
    assert change.ratio == pytest.approx(2.1)
    assert change.difference == pytest.approx(0.0011)


def test_macs_more_is_worse():
    # 1.0e9 -> 1.3e9: 1.3 / 1.0 -> "1.30x more"
    change = describe_change(M.Macs(1_000_000_000), M.Macs(1_300_000_000))
    assert change == Change("1.30x more", "worse", 1.3, 300_000_000)


def test_params_fewer_is_better():
    # 11,220,132 -> 2,805,033 params: exactly 4x -> "4.00x fewer"
    change = describe_change(M.TotalParams(11_220_132), M.TotalParams(2_805_033))
    assert (change.text, change.verdict) == ("4.00x fewer", "better")


def test_throughput_higher_is_better_and_lower_is_worse():
    # 100 -> 210 samples/s: 210 / 100 = 2.10 -> "2.10x higher" (better); swapped "2.10x lower" (worse)
    up = describe_change(M.Throughput(100.0), M.Throughput(210.0))
    down = describe_change(M.Throughput(210.0), M.Throughput(100.0))
    assert (up.text, up.verdict) == ("2.10x higher", "better")
    assert (down.text, down.verdict) == ("2.10x lower", "worse")


def test_huge_ratio_uses_thousands_separators():
    # 556,700,000 / 2 = 278,350,000 -> "278,350,000x fewer" (two decimals would be noise)
    assert describe_change(M.Macs(556_700_000), M.Macs(2)).text == "278,350,000x fewer"


def test_equal_values_are_same():
    assert describe_change(M.Macs(5), M.Macs(5)) == Change("same", "same", 1.0, 0)
    assert describe_change(M.Macs(0), M.Macs(0)) == Change("same", "same", None, 0)


def test_zero_and_negative_values_have_no_ratio():
    # 5 / 0 is undefined: the text says which side is 0, the difference is still given
    assert describe_change(M.Macs(0), M.Macs(5)) == Change("n/a (reference is 0)", "n/a", None, 5)
    assert describe_change(M.Macs(5), M.Macs(0)) == Change("n/a (compared value is 0)", "n/a", 0.0, -5)
    change = describe_change(Latency(-1.0), Latency(2.0))
    assert change.text == "n/a (negative values have no ratio)" and change.verdict == "n/a"


def test_non_numeric_and_non_finite_values():
    assert describe_change(Score("abc"), Score("abd")) == Change("n/a (not a number)", "n/a")
    assert describe_change(Score("abc"), Score("abc")) == Change("same", "same")
    assert describe_change(M.ExecutionTime(0.1), M.ExecutionTime(math.nan)).text == "n/a (not finite)"
    assert describe_change(M.ExecutionTime(True), M.ExecutionTime(1.0)).text == "n/a (not a number)"


def test_not_computed_is_never_an_error():
    for reference, other in [(None, M.Macs(5)), (M.Macs(5), None), (M.Macs(), M.Macs(5)),
                             (M.Macs(5), M.Macs()), (None, None)]:
        assert describe_change(reference, other) == Change("not computed", "n/a")


def test_non_metric_status_key_is_refused_with_the_reason():
    with pytest.raises(TypeError, match="other must be a Metric"):
        describe_change(M.Macs(5), M.LayerwiseSummary("table"))


def test_numpy_scalars_are_numbers():
    np = pytest.importorskip("numpy")
    # 10 -> 4 MACs: 10 / 4 = 2.5 -> "2.50x fewer"
    assert describe_change(M.Macs(np.int64(10)), M.Macs(np.int64(4))).text == "2.50x fewer"


# ----------------------------------------------------------------------------- difference wording
def test_accuracy_difference_in_points():
    # 76.83 % -> 76.13 %: 76.13 - 76.83 = -0.70 pts, worse (higher is better)
    change = describe_change(Accuracy(76.83), Accuracy(76.13))
    assert (change.text, change.verdict) == ("-0.70 pts", "worse")
    assert change.difference == pytest.approx(-0.70)
    # 75.0 -> 76.2: +1.20 pts, better
    up = describe_change(Accuracy(75.0), Accuracy(76.2))
    assert (up.text, up.verdict) == ("+1.20 pts", "better")


def test_tiny_points_change_keeps_two_significant_digits():
    # 76.000 -> 76.001: 0.001 rounds to "+0.00" at 2 decimals, so 2 significant digits: 0.0010
    assert describe_change(Accuracy(76.0), Accuracy(76.001)).text == "+0.0010 pts"


def test_loss_difference_lower_is_better():
    # 0.5 -> 0.47 nat: -0.03, 4 significant digits -> "-0.03000 nat", better (lower is better)
    change = describe_change(Loss(0.5), Loss(0.47))
    assert (change.text, change.verdict) == ("-0.03000 nat", "better")
    assert describe_change(Loss(0.47), Loss(0.5)).verdict == "worse"


def test_difference_in_seconds_is_scaled():
    # 1.00 ms -> 1.03 ms: +3e-5 s = +30.00 us; lower is better so worse
    change = describe_change(LatencyDrift(0.001), LatencyDrift(0.00103))
    assert (change.text, change.verdict) == ("+30.00 us", "worse")


def test_none_comparative_shows_difference_without_verdict():
    # 10 -> 12.5: +2.5, unitless -> "+2.500", never judged
    assert describe_change(Score(10.0), Score(12.5)) == Change("+2.500", "n/a", 1.25, 2.5)
    assert describe_change(Score(10.0), Score(10.0)).verdict == "same"


# ----------------------------------------------------------------------------- units
@pytest.mark.parametrize("source, target, factor", [
    ("ms", "s", 1e-3), ("s", "ms", 1e3), ("us", "ms", 1e-3), ("ns", "s", 1e-9), ("min", "s", 60.0),
    ("\u00b5s", "us", 1.0),
    ("MB", "B", 1e6), ("KB", "kB", 1.0), ("GB", "MB", 1e3),
    ("KiB", "B", 1024.0), ("MiB", "KiB", 1024.0), ("GiB", "MB", 2**30 / 1e6), ("MiB", "MB", 1.048576),
    ("bytes", "KiB", 1 / 1024),
    ("GMACs", "MACs", 1e9), ("MMACs", "GMACs", 1e-3), ("kFLOPs", "FLOPs", 1e3),
    ("samples/ms", "samples/s", 1e3), ("pts", "%", 1.0), ("%", "%", 1.0), ("", "", 1.0),
])
def test_conversion_factor(source, target, factor):
    assert conversion_factor(source, target) == pytest.approx(factor, rel=1e-12)


@pytest.mark.parametrize("source, target", [
    ("%", ""),  # a percentage and a bare number: 76.8 or 0.768? refuse to guess
    ("MACs", "FLOPs"), ("s", "B"), ("samples/s", "s"),
    ("mAP", "AP"),  # sub-unit prefixes are read for seconds only
])
def test_unrelated_units_do_not_convert(source, target):
    assert conversion_factor(source, target) is None


def test_change_converts_other_units_first():
    # reference 1 ms stored in s (0.001), other 2.1 stored in ms: 2.1 ms = 0.0021 s -> 2.10x slower
    change = describe_change(Latency(0.001), LatencyMs(2.1))
    assert (change.text, change.verdict) == ("2.10x slower", "worse")
    assert change.difference == pytest.approx(0.0011)  # in the reference's unit (s)
    # reference 1 GiB, other 1000 MB: 1.073741824e9 B / 1e9 B = 1.0737 -> "1.07x smaller"
    assert describe_change(SizeGiB(1), SizeMB(1000)).text == "1.07x smaller"
    # 2 GMACs vs 500 MMACs: 2000 / 500 = 4 -> "4.00x fewer"
    assert describe_change(MacsG(2), MacsM(500)).text == "4.00x fewer"


def test_change_with_unrelated_units_says_so():
    change = describe_change(Accuracy(76.8), Fraction(0.77))
    assert change == Change("n/a (units '%' and '' differ)", "n/a")


# ----------------------------------------------------------------------------- general rules
positive = st.floats(min_value=1e-6, max_value=1e12, allow_nan=False, allow_infinity=False)
_RATIO_TEXT = re.compile(r"^(\d[\d,]*(?:\.\d\d)?)x (\w+)$")


@given(positive, positive)
def test_ratio_text_is_symmetric(a, b):
    forward = describe_change(M.ModelSize(a), M.ModelSize(b))
    backward = describe_change(M.ModelSize(b), M.ModelSize(a))
    if a == b:
        assert forward.text == backward.text == "same"
        return
    f, g = _RATIO_TEXT.match(forward.text), _RATIO_TEXT.match(backward.text)
    assert f and g, (forward.text, backward.text)
    assert f.group(1) == g.group(1)  # same factor
    assert {f.group(2), g.group(2)} == {"smaller", "larger"}
    assert {forward.verdict, backward.verdict} == {"better", "worse"}
    assert float(f.group(1).replace(",", "")) >= 1.0
    # the word follows the raw direction: b < a means b is smaller, which is better
    assert (f.group(2) == "smaller") == (b < a) == (forward.verdict == "better")


@given(st.integers(min_value=0, max_value=10**15), st.integers(min_value=0, max_value=10**15))
def test_same_iff_equal(a, b):
    change = describe_change(M.Macs(a), M.Macs(b))
    assert (change.verdict == "same") == (a == b)
    assert (change.text == "same") == (a == b)


@given(st.floats(min_value=0, max_value=100), st.floats(min_value=0, max_value=100))
def test_points_difference_is_antisymmetric(a, b):
    forward = describe_change(Accuracy(a), Accuracy(b))
    backward = describe_change(Accuracy(b), Accuracy(a))
    if a == b:
        assert forward.verdict == backward.verdict == "same"
        return
    assert forward.text.endswith(" pts") and backward.text.endswith(" pts")
    assert forward.text[0] in "+-" and backward.text[0] in "+-" and forward.text[0] != backward.text[0]
    assert forward.text[1:] == backward.text[1:]
    assert {forward.verdict, backward.verdict} == {"better", "worse"}
    assert (forward.verdict == "better") == (b > a)


UNITS = ["s", "ms", "us", "ns", "min", "B", "kB", "MB", "GB", "KiB", "MiB", "GiB", "MACs", "GMACs", "kMACs"]


@given(st.sampled_from(UNITS), st.sampled_from(UNITS), st.sampled_from(UNITS))
def test_conversion_factors_compose(x, y, z):
    xy, yz, xz = conversion_factor(x, y), conversion_factor(y, z), conversion_factor(x, z)
    if xy is None or yz is None:
        return
    assert xz == pytest.approx(xy * yz, rel=1e-12)
    assert conversion_factor(y, x) == pytest.approx(1 / xy, rel=1e-12)


def test_status_key_base_is_not_a_metric():
    class Plain(StatusKey):
        NAME = "plain"

    with pytest.raises(TypeError, match="reference must be a Metric"):
        describe_change(Plain(1), M.Macs(1))
