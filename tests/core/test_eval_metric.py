"""``ComputeEvalMetric``: user evaluation functions, secondary metrics, timing, splits."""
import pytest

from deeplite_like import Comparative, ComputeEvalMetric
from tests.core.toy import ToyModel, ToyProfiler

SPLITS = {"test": [([1, 2], [1, 0]), ([3], [1])], "train": [([0], [0])]}


def count_correct(model, loader):
    """Share of targets equal to 1, in %: test split has targets 1,0,1 -> 2/3 = 66.67 %."""
    targets = [t for _, batch_targets in loader for t in batch_targets]
    return 100.0 * sum(targets) / len(targets)


def test_primary_metric_and_inference_time():
    p = ToyProfiler(ToyModel([2, 2]), SPLITS)
    p.register_profiler_function(ComputeEvalMetric(count_correct, "top1", unit_name="%"))
    p.compute_network_status()
    assert p.compute_status("top1") == pytest.approx(200 / 3)
    assert p.compute_status("inference_time") > 0
    assert p.get_status("top1").details == {"split": "test"}


def test_split_can_be_chosen_per_call():
    p = ToyProfiler(ToyModel([2, 2]), SPLITS)
    p.register_profiler_function(ComputeEvalMetric(count_correct, unit_name="%"))
    assert p.compute_status("eval_metric", split="train") == 0.0  # the train split's one target is 0


def test_secondary_metrics_from_a_dict_also_after_registration():
    def evaluate(model, loader):
        return {"top1": 70.0, "top5": 91.0, "loss": 0.8}

    fn = ComputeEvalMetric(evaluate, "top1", unit_name="%")
    p = ToyProfiler(ToyModel([2, 2]), SPLITS)
    p.register_profiler_function(fn)
    fn.add_secondary_metric("top5", unit_name="%")
    fn.add_secondary_metric("loss", comparative=Comparative.DIFFERENCE_LOWER)
    p.compute_network_status()
    assert (p.compute_status("top1"), p.compute_status("top5"), p.compute_status("loss")) == (70.0, 91.0, 0.8)
    assert p.get_status("loss").get_comparative() is Comparative.DIFFERENCE_LOWER
    clone = p.clone()
    fn.add_secondary_metric("top10")  # both profilers learn the new key
    assert "top10" in p.status_keys and "top10" in clone.status_keys


def test_missing_dict_entry_names_the_keys():
    fn = ComputeEvalMetric(lambda model, loader: {"acc": 1.0}, "top1")
    p = ToyProfiler(ToyModel([2, 2]), SPLITS)
    p.register_profiler_function(fn)
    with pytest.raises(KeyError, match=r"returned keys \['acc'\].*\['top1'\] were expected"):
        p.compute_status("top1")


def test_non_number_result_is_rejected():
    p = ToyProfiler(ToyModel([2, 2]), SPLITS)
    p.register_profiler_function(ComputeEvalMetric(lambda model, loader: "good", "top1"))
    with pytest.raises(TypeError, match="expected a number"):
        p.compute_status("top1")


def test_missing_split_is_a_data_error_naming_it():
    from deeplite_like.data import DataError

    p = ToyProfiler(ToyModel([2, 2]), SPLITS)
    p.register_profiler_function(ComputeEvalMetric(count_correct, default_split="validation"))
    with pytest.raises(DataError, match="validation"):
        p.compute_status("eval_metric")


def test_two_eval_metrics_side_by_side_without_timing_clash():
    p = ToyProfiler(ToyModel([2, 2]), SPLITS)
    p.register_profiler_function(ComputeEvalMetric(count_correct, "top1", unit_name="%"))
    p.register_profiler_function(ComputeEvalMetric(lambda m, l: 0.5, "loss", time_it=False,
                                                   comparative=Comparative.DIFFERENCE_LOWER))
    p.compute_network_status()
    assert p.compute_status("loss") == 0.5 and p.compute_status("inference_time") > 0
