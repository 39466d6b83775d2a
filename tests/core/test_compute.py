"""Computing, piping, caching and persistence of ``Profiler`` status."""
import pytest

from deeplite_like import Detailed, ExternalProfilerFunction, Profiler, ProfilerFunction
from deeplite_like.metrics import ExecutionTime, Macs, TotalParams
from tests.core.toy import ToyModel, ToyProfiler

# ToyModel([4, 3, 2]) at batch b: MACs = b*(4*3 + 3*2) = 18b; FLOPs = 2*18b + b*(3+2) = 41b; params = 15 + 8 = 23.


def test_compute_network_status_computes_every_key_once():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    p.compute_network_status(batch_size=2)
    assert p.status_to_dict() == {"macs": 36, "flops": 82, "total_params": 23}
    complexity = next(f for f in p.functions if hasattr(f, "calls"))
    assert complexity.calls == [2]  # one call filled both macs and flops


def test_kwargs_are_piped_only_to_functions_that_accept_them():
    seen = {}

    def timer(model, repeats=3):
        seen["repeats"] = repeats
        return 0.5

    p = ToyProfiler(ToyModel([4, 3, 2]))
    p.register_profiler_function(ExternalProfilerFunction(timer, ExecutionTime))
    p.compute_network_status(batch_size=3, repeats=7)  # ToyParams accepts neither; no error
    assert seen == {"repeats": 7}
    assert p.compute_status("macs") == 54  # 18 * 3


def test_a_kwarg_no_function_accepts_is_an_error_with_a_hint():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    with pytest.raises(TypeError, match=r"'batchsize' \(did you mean 'batch_size'\?\)"):
        p.compute_network_status(batchsize=4)
    with pytest.raises(TypeError, match="batchsize"):
        p.compute_status("macs", batchsize=4)


def test_context_arguments_cannot_be_passed():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    with pytest.raises(TypeError, match="supplied by the profiler"):
        p.compute_network_status(model=ToyModel([1, 1]))


def test_unknown_key_lists_known_keys():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    with pytest.raises(ValueError, match=r"unknown status key 'mac'.*Did you mean 'macs'\?.*flops, macs, total_params"):
        p.compute_status("mac")


def test_cache_is_used_until_recompute_or_other_arguments():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    complexity = next(f for f in p.functions if hasattr(f, "calls"))
    assert p.compute_status("macs") == 18
    assert p.compute_status("flops") == 41
    assert complexity.calls == [1]  # flops came from the cache
    p.compute_status("macs", recompute=True)
    assert complexity.calls == [1, 1]
    assert p.compute_status("macs", batch_size=2) == 36  # other arguments: not the stale value
    assert complexity.calls == [1, 1, 2]
    p.compute_network_status(batch_size=2)
    assert complexity.calls == [1, 1, 2]


def test_function_may_only_write_declared_keys():
    class Greedy(ProfilerFunction):
        def get_bounded_status_keys(self):
            return Macs, TotalParams

        def __call__(self):
            return {"macs": 1, "total_params": 2, "flops": 3}

    p = Profiler(ToyModel([2]))
    p.register_profiler_function(Greedy())
    with pytest.raises(ValueError, match=r"returned values for \['flops'\], which it does not declare"):
        p.compute_network_status()


def test_multi_key_function_must_return_a_dict():
    class Bad(ProfilerFunction):
        def get_bounded_status_keys(self):
            return Macs, TotalParams

        def __call__(self):
            return 5

    p = Profiler(ToyModel([2]))
    p.register_profiler_function(Bad())
    with pytest.raises(TypeError, match="must return a dict"):
        p.compute_status("macs")


def test_detailed_values_keep_their_details():
    p = Profiler(ToyModel([2]))
    p.register_profiler_function(ExternalProfilerFunction(lambda: Detailed(0.25, {"iqr": 0.01}), ExecutionTime))
    assert p.compute_status("execution_time") == 0.25
    assert p.get_status("execution_time").details == {"iqr": 0.01}


def test_status_round_trips_through_a_dict_and_loaded_values_are_not_recomputed():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    p.compute_network_status()
    saved = p.status_to_dict()
    q = ToyProfiler(ToyModel([4, 3, 2]))
    q.load_from_dict(saved)
    complexity = next(f for f in q.functions if hasattr(f, "calls"))
    assert q.compute_status("macs") == 18 and complexity.calls == []
    assert q.status_to_dict() == saved
    with pytest.raises(ValueError, match="unknown status key 'nope'"):
        q.load_from_dict({"nope": 1})


def test_reset_status_forgets_values():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    p.compute_network_status()
    p.reset_status()
    assert p.status_to_dict() == {"macs": None, "flops": None, "total_params": None}


def test_clone_keeps_name_functions_and_optionally_status():
    p = ToyProfiler(ToyModel([4, 3, 2]), name="teacher")
    p.compute_network_status()
    fresh = p.clone(model=ToyModel([4, 2]))
    assert fresh.name == "teacher" and fresh.status_to_dict()["macs"] is None
    assert fresh.compute_status("macs") == 8  # 4*2
    assert p.compute_status("macs") == 18  # the original is untouched
    kept = p.clone(name="copy", retain_status=True)
    assert kept.name == "copy" and kept.status_to_dict() == p.status_to_dict()
    assert type(kept) is ToyProfiler


def test_missing_required_argument_names_the_function():
    p = Profiler(ToyModel([2]))
    # the third parameter: the first two receive the model and the data splits by position (deeplite's rule)
    p.register_profiler_function(ExternalProfilerFunction(lambda model, data_splits, split: 1, Macs))
    with pytest.raises(TypeError, match=r"needs the argument\(s\) \['split'\]"):
        p.compute_status("macs")


def test_print_mode_logs_the_report(caplog, capsys):
    p = ToyProfiler(ToyModel([4, 3, 2]), name="tiny")
    with caplog.at_level("INFO", logger="deeplite_like"):
        report = p.compute_network_status(print_mode="info")
    assert "tiny" in caplog.text and str(report) in caplog.text
    p.compute_network_status(print_mode="print")
    assert str(report) in capsys.readouterr().out
    with pytest.raises(ValueError, match="not a logging level"):
        p.compute_network_status(print_mode="loud")


def test_print_mode_prints_when_no_logging_is_configured(capsys, monkeypatch):
    # deeplite-profiler's manual calls compute_network_status(print_mode='debug') and shows the table.
    import logging

    monkeypatch.setattr(logging.getLogger("deeplite_like"), "hasHandlers", lambda: False)
    p = ToyProfiler(ToyModel([4, 3, 2]), name="tiny")
    report = p.compute_network_status(print_mode="debug")
    assert str(report) in capsys.readouterr().out
