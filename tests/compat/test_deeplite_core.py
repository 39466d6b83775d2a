"""deeplite-profiler's core API, in its own spelling, on the framework-free core (seed 002 and its source)."""
import csv
import io
import json
import logging

import pytest

from deeplite_like import (Comparative, ComputeEvalMetric, ExternalProfilerFunction, Metric, Profiler,
                           ProfilerFunction, StatusKey)
from deeplite_like.metrics import TotalParams
from deeplite_like.reports import CompareReport, StatusReport
from deeplite_like.reports.changes import describe_change
from deeplite_like.reports.status import make_display_filter_function
from tests.core.toy import ToyModel, ToyProfiler


# --- the seed manual's example metric, verbatim ----------------------------------------------
class Flops(Metric):
    NAME = 'flops'

    @staticmethod
    def description():
        return "Summation of Multiply-Add Cumulations (MACs) per single image (batch_size=1)"

    @staticmethod
    def friendly_name():
        return 'Computational Complexity'

    def get_comparative(self):
        return Comparative.RECIPROCAL

    def get_value(self):
        if self.value > 1e-3:
            return self.value
        if self.value > 1e-6:
            return self.value * 1024
        return self.value * (1024 ** 2)

    def get_units(self):
        if self.value > 1e-3:
            return 'GigaMACs'
        if self.value > 1e-6:
            return 'MegaMACs'
        return 'KiloMACs'


class FixedFlops(ProfilerFunction):
    """deeplite's style: the keys come back as an instance, ``return Flops()``."""

    def __init__(self, value):
        self.value = value

    def get_bounded_status_keys(self):
        return Flops()

    def __call__(self, model, data_splits):
        return self.value


def flops_profiler(value, name="model"):
    p = Profiler(ToyModel([2, 2]), {"test": [1]}, name=name)
    p.register_profiler_function(FixedFlops(value))
    return p


# value -> (get_value(), get_units()) by the manual's own rule (deeplite's mixed 1000/1024 kept: it is
# the user's metric, and reports must show what it says)
MANUAL_FLOPS = [
    (0.5567, 0.5567, "GigaMACs"),          # > 1e-3: as is
    (2e-4, 0.2048, "MegaMACs"),            # 2e-4 * 1024 = 0.2048
    (5e-7, 0.524288, "KiloMACs"),          # 5e-7 * 1024**2 = 0.524288
]


@pytest.mark.parametrize("value, shown, units", MANUAL_FLOPS)
def test_manual_flops_metric_displays_its_own_value_and_units_in_every_format(value, shown, units):
    report = flops_profiler(value).compute_network_status()
    row = report.to_dict()["metrics"][0]
    assert (row["name"], row["value"], row["display_value"], row["display_unit"]) == \
        ("Computational Complexity", value, pytest.approx(shown), units)
    assert row["comparative"] == "lower is better"  # RECIPROCAL: value / ref, lower is better
    text = report.to_text()
    line = next(line for line in text.splitlines() if "Computational Complexity" in line)
    assert f"{shown:.4g}"[:5] in line and units in line
    record = next(csv.DictReader(io.StringIO(report.to_csv())))
    assert (float(record["display_value"]), record["display_unit"]) == (pytest.approx(shown), units)
    assert units in report.to_markdown() and units in report.to_html()
    assert json.loads(report.to_json())["metrics"][0]["display_unit"] == units


def test_manual_flops_metric_in_a_compare_report():
    teacher, student = flops_profiler(0.6, "teacher"), flops_profiler(2e-4, "student")
    report = teacher.compare(student)
    row = report.to_dict()["metrics"][0]
    assert row["display_unit"] == "GigaMACs"
    assert row["values"]["teacher"]["display"] == "0.6000"
    assert row["values"]["student"]["display"] == "0.2048 MegaMACs"  # its own unit, shown where it differs
    # RECIPROCAL = lower is better: 0.6 / 0.0002 = 3000 -> "3,000x lower", better
    assert row["changes"]["student"]["text"] == "3,000x lower"
    assert row["changes"]["student"]["verdict"] == "better"


class Energy(Metric):
    """A metric that scales itself with our signature: 0.25 J is shown as 250 mJ."""

    NAME = "energy"
    BASE_UNIT = "J"
    COMPARATIVE = Comparative.LOWER_IS_BETTER

    def get_value(self, scale=None):
        return self.value * 1000

    def get_units(self, scale=None):
        return "mJ"


@pytest.mark.parametrize("joules, shown", [(0.25, "250.0"), (0.0125, "12.50"), (2.0, "2000")])
def test_overridden_get_value_with_scale_is_used_with_its_units(joules, shown):
    p = Profiler(ToyModel([2]), name="m")
    p.register_profiler_function(ExternalProfilerFunction(lambda model: joules, Energy))
    report = p.compute_network_status()
    assert report._display_rows() == [["Energy", shown, "mJ"]]  # not "0.2500 mJ"
    assert report.to_dict()["metrics"][0]["display_value"] == pytest.approx(joules * 1000)
    assert Energy(joules).format() == f"{shown} mJ"


# --- Comparative ----------------------------------------------------------------------------
def test_deeplite_comparatives_are_our_members():
    assert Comparative.DIFF is Comparative.DIFFERENCE
    assert Comparative.DIV is Comparative.HIGHER_IS_BETTER
    assert Comparative.RECIPROCAL is Comparative.LOWER_IS_BETTER
    assert Comparative.NONE.value == "none"
    for text, member in [("diff", Comparative.DIFF), ("DIV", Comparative.DIV), ("reciprocal", Comparative.RECIPROCAL),
                         ("none", Comparative.NONE), ("Lower is better", Comparative.LOWER_IS_BETTER)]:
        assert Comparative(text) is member
    with pytest.raises(ValueError):
        Comparative("coverage")


def _metric(value, comparative, unit=""):
    cls = type("M", (Metric,), {"NAME": "m", "BASE_UNIT": unit, "COMPARATIVE": comparative})
    return cls(value)


@pytest.mark.parametrize("comparative, ref, value, text, verdict", [
    # DIFF: compared by the difference (deeplite: ref - value = 0.7); the text says the change of the other model
    (Comparative.DIFF, 76.8, 76.1, "-0.70 pts", "worse"),
    (Comparative.DIFF, 70.0, 72.5, "+2.50 pts", "better"),
    # DIV: ratio ref / value, higher is better: 8 / 2 = 4 -> the other model is 4x lower, worse
    (Comparative.DIV, 8.0, 2.0, "4.00x lower", "worse"),
    (Comparative.DIV, 2.0, 8.0, "4.00x higher", "better"),
    # RECIPROCAL: value / ref, lower is better: 2 / 8 -> 4x lower, better
    (Comparative.RECIPROCAL, 8.0, 2.0, "4.00x lower", "better"),
    (Comparative.RECIPROCAL, 2.0, 3.0, "1.50x higher", "worse"),
    (Comparative.NONE, 2.0, 3.0, "+1.000", "n/a"),
])
def test_deeplite_comparatives_judge_in_words(comparative, ref, value, text, verdict):
    unit = "%" if comparative is Comparative.DIFF else ""
    change = describe_change(_metric(ref, comparative, unit), _metric(value, comparative, unit))
    assert (change.text, change.verdict) == (text, verdict)
    assert change.difference == pytest.approx(value - ref)


def test_a_comparative_given_as_deeplite_string_or_unknown():
    class StrComp(Metric):
        NAME = "s"

        def get_comparative(self):
            return "reciprocal"

    assert describe_change(StrComp(4.0), StrComp(2.0)).text == "2.00x lower"

    class Bad(StrComp):
        def get_comparative(self):
            return "coverage"

    change = describe_change(Bad(4.0), Bad(2.0))
    assert (change.text, change.verdict) == ("n/a (unknown comparative 'coverage')", "n/a")
    report = CompareReport([("a", "toy", {"s": Bad(4.0)}), ("b", "toy", {"s": Bad(2.0)})])
    assert report.to_dict()["metrics"][0]["comparative"] == "unknown ('coverage')"


# --- get_bounded_status_keys: classes or instances, alone or in a tuple ----------------------
@pytest.mark.parametrize("declared", [
    TotalParams, TotalParams(), (TotalParams,), (TotalParams(),), [TotalParams()],
])
def test_bounded_status_keys_as_class_or_instance(declared):
    class Params(ProfilerFunction):
        def get_bounded_status_keys(self):
            return declared

        def __call__(self, model, data_splits):
            return model.params()

    p = Profiler(ToyModel([4, 3]), {})
    p.register_profiler_function(Params())
    assert p.compute_status("total_params") == 15  # 4*3 weights + 3 biases
    assert p.status_keys == ("total_params",)


def test_instance_keys_keep_their_settings_and_stay_apart():
    class Scored(Metric):
        NAME = "score"

        def __init__(self, unit_name=""):  # deeplite's EvalMetric(unit_name=...) style
            super().__init__()
            self.unit_name = unit_name

        def get_units(self):
            return self.unit_name

    class Score(ProfilerFunction):
        def get_bounded_status_keys(self):
            return Scored(unit_name="%")

        def __call__(self, model, data_splits):
            return 12.5

    p = Profiler(ToyModel([2]), {})
    p.register_profiler_function(Score())
    assert p.compute_network_status()._display_rows() == [["Score", "12.50", "%"]]
    clone = p.clone(model=ToyModel([3]))
    assert clone.status_get("score") is None and p.status_get("score") == 12.5
    p.reset_status()
    assert p.get_status("score").unit_name == "%"


def test_keys_that_are_not_status_keys_are_refused():
    class Wrong(ProfilerFunction):
        def get_bounded_status_keys(self):
            return "flops"

        def __call__(self, model):
            return 1

    with pytest.raises(TypeError, match="get_bounded_status_keys returned 'flops'"):
        Profiler(ToyModel([2])).register_profiler_function(Wrong())


# --- ProfilerFunction.__call__: the first two parameters by position ---------------------------
class Renamed(ProfilerFunction):
    def __init__(self):
        self.seen = None

    def get_bounded_status_keys(self):
        return TotalParams()

    def __call__(self, net, loaders, dummy_arg=1):
        self.seen = (net, loaders, dummy_arg)
        return net.params() * dummy_arg


def test_first_two_parameters_get_model_and_data_splits_whatever_their_names():
    model, splits = ToyModel([4, 3]), {"train": [1]}
    p = Profiler(model, splits)
    fn = Renamed()
    p.register_profiler_function(fn)
    assert p.compute_status("total_params", dummy_arg=2) == 30
    assert fn.seen[0] is model and fn.seen[1] is splits and fn.seen[2] == 2
    with pytest.raises(TypeError, match="'net'"):  # bound by position: not an argument the caller passes
        p.compute_status("total_params", recompute=True, net=model)


def test_external_function_with_keys_from_an_overridden_method():
    class External(ExternalProfilerFunction):
        def __init__(self):
            def count(x, y, scale=1):
                return x.params() * scale
            super().__init__(count)

        def get_bounded_status_keys(self):
            return TotalParams()

    p = Profiler(ToyModel([4, 3]), {})
    p.register_profiler_function(External())
    assert p.compute_status("total_params", scale=3) == 45

    class NoKeys(ExternalProfilerFunction):
        def __init__(self):
            super().__init__(lambda model: 1)

    with pytest.raises(TypeError, match="declares no status keys"):
        p.register_profiler_function(NoKeys())

    class Starred(ExternalProfilerFunction):
        def __init__(self):
            super().__init__(lambda x, y, **kwargs: 1)

        def get_bounded_status_keys(self):
            return TotalParams()

    with pytest.raises(TypeError, match=r"\*\*kwargs"):
        p.register_profiler_function(Starred())


# --- compute_network_status: a report that is also a mapping of raw values --------------------
def test_status_report_is_a_read_only_mapping_of_raw_values():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    status = p.compute_network_status(batch_size=2)
    assert isinstance(status, StatusReport)
    # macs = 2 * (4*3 + 3*2) = 36; flops = 2*36 + 2*(3+2) = 82; params = 15 + 8 = 23
    assert (status["macs"], status["flops"], status["total_params"]) == (36, 82, 23)
    assert "flops" in status and "coverage" not in status
    assert dict(status) == {"macs": 36, "flops": 82, "total_params": 23} == p.status_to_dict()
    assert len(status) == 3 and sorted(status.keys()) == ["flops", "macs", "total_params"]
    with pytest.raises(KeyError, match="'coverage' is not a status key"):
        status["coverage"]
    with pytest.raises(TypeError):
        status["macs"] = 1
    assert "Computational complexity" in str(status)  # still the report it is
    assert status.to_dict()["metrics"][0]["value"] == 36
    assert status != dict(status) and hash(status)  # an object, not a value


def test_status_report_lists_keys_not_computed_as_none():
    p = ToyProfiler(ToyModel([4, 3]))
    p.compute_status("macs")
    status = p.report()
    assert status["total_params"] is None and status["macs"] == 12


# --- deeplite's profiler methods --------------------------------------------------------------
def test_status_methods():
    p = ToyProfiler(ToyModel([4, 3]))
    p.compute_network_status()
    assert p.status_get("macs") == 12 and p.status_get(TotalParams) == 15
    assert p.status_contains("flops") and p.status_contains(TotalParams()) and not p.status_contains("coverage")
    assert tuple(p.status_keys()) == p.status_keys == ("macs", "flops", "total_params")
    assert p.status_items() == [("macs", 12), ("flops", 27), ("total_params", 15)]  # flops: 2*12 + 3
    assert p.status_values() == [12, 27, 15]
    statuses = p.status_values(to_value=False)
    assert [type(s).__name__ for s in statuses] == ["Macs", "Flops", "TotalParams"] and statuses[0].value == 12
    statuses[0].value = 0  # a copy: the profiler's value is untouched
    assert p.status_get("macs") == 12
    assert p._profiling_functions_register["macs"].overriding is False
    assert p.backend == "toy"
    p.backend = "Toy backend"
    assert p.report().title == "toy (backend: Toy backend)" and ToyProfiler.backend_name == "toy"
    with pytest.raises(ValueError, match="unknown status key 'coverage'"):
        p.status_get("coverage")


def test_status_dict_round_trip_with_status_objects():
    p = ToyProfiler(ToyModel([4, 3]))
    p.compute_network_status(batch_size=2)
    saved = p.status_to_dict(to_value=False)
    clone = p.clone(model=ToyModel([1]))
    clone.load_from_dict(saved, to_value=False)
    assert clone.status_to_dict() == {"macs": 24, "flops": 54, "total_params": 15}  # 2*12; 2*24 + 2*3
    with pytest.raises(TypeError, match="reads StatusKey objects"):
        clone.load_from_dict({"macs": 1}, to_value=False)


def test_display_status_logs_and_returns_the_report(caplog):
    p = ToyProfiler(ToyModel([4, 3]), name="tiny")
    p.compute_network_status()
    with caplog.at_level(logging.DEBUG, logger="deeplite_like"):
        report = p.display_status()
    assert isinstance(report, StatusReport) and "tiny (backend: toy)" in caplog.text
    other = p.clone(model=ToyModel([4, 1]), name="small")
    other.compute_network_status()
    with caplog.at_level(logging.INFO, logger="deeplite_like"):
        compared = p.display_status(other=other, print_mode="info", short_print=False)
    assert isinstance(compared, CompareReport) and compared.names == ["tiny", "small"]
    assert "Comparison: tiny (toy, reference) vs small (toy)" in caplog.text
    # macs 12 -> 4: 3.00x fewer
    assert compared.to_dict()["metrics"][0]["changes"]["small"]["text"] == "3.00x fewer"


def test_display_filter_chooses_the_rows_but_not_the_values():
    p = ToyProfiler(ToyModel([4, 3]))
    p.display_status_filter_func = make_display_filter_function(exclude="flops")
    status = p.compute_network_status()
    assert [row[0] for row in status._display_rows()] == ["Computational complexity", "Total parameters"]
    assert status["flops"] == 27


def test_compare_accepts_deeplite_keywords(caplog):
    p = ToyProfiler(ToyModel([4, 3]), name="Original Model")
    p2 = p.clone(model=ToyModel([4, 3, 2]))
    p2.name = "Clone Model"
    with caplog.at_level(logging.DEBUG, logger="deeplite_like"):
        report = p.compare(p2, short_print=False, batch_size=1, print_mode="debug")
    assert "Comparison: Original Model (toy, reference) vs Clone Model (toy)" in caplog.text
    # macs 12 -> 12 + 6 = 18: 1.50x more
    assert report.to_dict()["metrics"][0]["changes"]["Clone Model"]["text"] == "1.50x more"


def test_replacing_a_default_with_the_same_class_is_silent_another_class_warns(caplog):
    from tests.core.toy import ToyComplexity

    class DefaultsProfiler(Profiler):
        def __init__(self, model):
            super().__init__(model)
            self.register_default_function(ToyComplexity())

    p = DefaultsProfiler(ToyModel([4, 3]))
    with caplog.at_level(logging.WARNING, logger="deeplite_like"):
        p.register_profiler_function(ToyComplexity())
    assert caplog.text == ""

    class OtherComplexity(ToyComplexity):
        pass

    with caplog.at_level(logging.WARNING, logger="deeplite_like"):
        p.register_profiler_function(OtherComplexity())
    assert "replaces" in caplog.text


# --- ComputeEvalMetric -----------------------------------------------------------------------
SPLITS = {"test": [1], "train": [2]}


def get_accuracy(model, data_loader):
    return 76.5


def test_named_eval_metric_also_fills_eval_metric():
    p = Profiler(ToyModel([2]), SPLITS)
    p.register_profiler_function(ComputeEvalMetric(get_accuracy, 'accuracy', unit_name='%'))
    status = p.compute_network_status()
    assert status["accuracy"] == status["eval_metric"] == 76.5 and "inference_time" in status
    names = [row[0] for row in status._display_rows()]
    assert names == ["Evaluation time", "Accuracy"]  # the alias is not shown twice


def test_two_named_eval_metrics_register_without_warning(caplog):
    p = Profiler(ToyModel([2]), SPLITS)
    with caplog.at_level(logging.WARNING, logger="deeplite_like"):
        p.register_profiler_function(ComputeEvalMetric(get_accuracy, 'accuracy', unit_name='%'))
        p.register_profiler_function(ComputeEvalMetric(lambda m, d: 23.5, 'missclass', unit_name='%',
                                                       time_it=False))
    assert caplog.text == ""  # the second's eval_metric alias yields silently
    status = p.compute_network_status()
    assert (status["accuracy"], status["missclass"], status["eval_metric"]) == (76.5, 23.5, 76.5)


def test_a_real_eval_metric_takes_the_key_from_the_alias_silently(caplog):
    p = Profiler(ToyModel([2]), SPLITS)
    p.register_profiler_function(ComputeEvalMetric(get_accuracy, 'accuracy', unit_name='%'))
    with caplog.at_level(logging.WARNING, logger="deeplite_like"):
        p.register_profiler_function(ComputeEvalMetric(lambda m, d: 12.0, unit_name='%', time_it=False))
    assert caplog.text == ""
    assert p.compute_network_status()["eval_metric"] == 12.0


def test_eval_override_takes_the_alias_and_secondary_metrics_in_deeplite_order():
    rval = {'acc': 1, 'b': 2, 'c': 4}
    p = Profiler(ToyModel([2]), SPLITS)
    p.register_profiler_function(ComputeEvalMetric(lambda m, d: 50.0, 'missclass', unit_name='%'))
    eval_profiler = ComputeEvalMetric(lambda model, loader: rval, 'acc', unit_name='%')
    eval_profiler.add_secondary_metric('b')
    eval_profiler.add_secondary_metric('c', 'ms', 'milliseconds', Comparative.DIV)
    p.register_profiler_function(eval_profiler, override=True)
    p.compute_status('eval_metric')
    assert (p.status_get('eval_metric'), p.status_get('b'), p.status_get('c')) == (1, 2, 4)
    c = p.get_status('c')
    assert (c.BASE_UNIT, c.description(), c.get_comparative()) == ("ms", "milliseconds", Comparative.HIGHER_IS_BETTER)
    assert p.get_status('b').BASE_UNIT == ""


def test_add_secondary_metric_none_takes_the_primary_unit_and_comparative():
    fn = ComputeEvalMetric(lambda m, d: {"acc": 1.0, "top5": 2.0}, "acc", unit_name="%",
                           comparative=Comparative.DIFF)
    fn.add_secondary_metric("top5", None, None, None)
    assert (fn.secondary[0].BASE_UNIT, fn.secondary[0].COMPARATIVE) == ("%", Comparative.DIFFERENCE)
    fn.add_secondary_metric("loss", "", Comparative.DIFFERENCE_LOWER)  # our older order still works
    assert fn.secondary[1].COMPARATIVE is Comparative.DIFFERENCE_LOWER


def test_profiler_add_secondary_eval_metric():
    def evaluate(model, data_loader):
        return {'a': 10, 'b': 20, 'c': 30, 'd': 40}

    p = Profiler(ToyModel([2]), SPLITS)
    compute_eval = ComputeEvalMetric(evaluate, key='a', default_split='train')
    compute_eval.add_secondary_metric('b')
    p.register_profiler_function(compute_eval)
    p.add_secondary_eval_metric('c')
    status = p.compute_network_status()
    assert (status['eval_metric'], status['a'], status['b'], status['c']) == (10, 10, 20, 30)
    assert 'd' not in status and 'inference_time' in status
    with pytest.raises(ValueError, match="register ComputeEvalMetric"):
        Profiler(ToyModel([2])).add_secondary_eval_metric('c')


def test_status_key_without_name_is_refused():
    class Nameless(StatusKey):
        pass

    with pytest.raises(TypeError, match="NAME"):
        Nameless()
