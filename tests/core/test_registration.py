"""The registration table of ``Profiler.register_profiler_function``."""
import logging

import pytest

from deeplite_like import ExternalProfilerFunction, Profiler, ProfilerFunction, StatusKey
from deeplite_like.metrics import Flops, Macs, ModelSize, TotalParams
from tests.core.toy import ToyComplexity, ToyModel, ToyParams, ToyProfiler


class Fixed(ProfilerFunction):
    """Returns fixed values for its keys, to see which function computed a key."""

    def __init__(self, tag, *keys):
        self.tag, self.keys = tag, keys

    def get_bounded_status_keys(self):
        return self.keys

    def __call__(self):
        return {k.NAME: self.tag for k in self.keys} if len(self.keys) > 1 else self.tag

    def __repr__(self):
        return f"Fixed({self.tag!r})"


def owner_of(profiler, key):
    return profiler.compute_status(key, recompute=True)


def test_newer_non_override_replaces_older_with_warning(caplog):
    p = Profiler(ToyModel([2, 2]))
    p.register_profiler_function(Fixed("old", Macs))
    with caplog.at_level(logging.WARNING, logger="deeplite_like"):
        p.register_profiler_function(Fixed("new", Macs))
    assert owner_of(p, "macs") == "new"
    assert "Fixed('new') replaces Fixed('old') for status key 'macs'" in caplog.text


def test_override_wins_over_non_override_registered_before_and_after():
    p = Profiler(ToyModel([2, 2]))
    p.register_profiler_function(Fixed("before", Macs))
    p.register_profiler_function(Fixed("override", Macs), override=True)
    p.register_profiler_function(Fixed("after", Macs))
    assert owner_of(p, "macs") == "override"


def test_two_overrides_on_one_key_raise_naming_both_and_the_key():
    p = Profiler(ToyModel([2, 2]))
    p.register_profiler_function(Fixed("first", Macs), override=True)
    with pytest.raises(RuntimeError) as info:
        p.register_profiler_function(Fixed("second", Macs), override=True)
    message = str(info.value)
    assert "'macs'" in message and "Fixed('first')" in message and "Fixed('second')" in message
    assert owner_of(p, "macs") == "first"


def test_registration_is_atomic():
    p = Profiler(ToyModel([2, 2]))
    p.register_profiler_function(Fixed("sizer", ModelSize), override=True)
    p.register_profiler_function(Fixed("counter", Macs))
    # Claims macs (would take it) and model_size (clashes with an override): nothing may change.
    both = Fixed("both", Macs, ModelSize)
    with pytest.raises(RuntimeError):
        p.register_profiler_function(both, override=True)
    assert owner_of(p, "macs") == "counter"
    assert owner_of(p, "model_size") == "sizer"
    assert both not in p.functions


def test_partial_ownership_when_an_override_keeps_one_key():
    p = Profiler(ToyModel([2, 2]))
    p.register_profiler_function(Fixed("sizer", ModelSize), override=True)
    p.register_profiler_function(Fixed("both", Macs, ModelSize))
    assert owner_of(p, "macs") == "both"
    assert owner_of(p, "model_size") == "sizer"


def test_function_that_lost_all_keys_is_dropped():
    p = Profiler(ToyModel([2, 2]))
    old = Fixed("old", Macs)
    p.register_profiler_function(old)
    p.register_profiler_function(Fixed("new", Macs))
    assert old not in p.functions and len(p.functions) == 1


def test_star_args_and_kwargs_are_rejected_with_an_explanation():
    class Star(ProfilerFunction):
        def get_bounded_status_keys(self):
            return (Macs,)

        def __call__(self, model, **options):
            return 1

    p = Profiler(ToyModel([2, 2]))
    with pytest.raises(TypeError, match=r"\*\*options.*passes each function only the keyword arguments"):
        p.register_profiler_function(Star())
    with pytest.raises(TypeError, match=r"\*args"):
        p.register_profiler_function(ExternalProfilerFunction(lambda *args: 1, Macs))
    assert p.status_keys == ()


def test_non_function_and_bad_keys_are_rejected():
    p = Profiler(ToyModel([2, 2]))
    with pytest.raises(TypeError, match="ExternalProfilerFunction"):
        p.register_profiler_function(lambda model: 1)
    with pytest.raises(TypeError, match="not a StatusKey subclass"):
        p.register_profiler_function(Fixed("x", "macs"))
    with pytest.raises(ValueError, match="twice"):
        p.register_profiler_function(Fixed("x", Macs, Macs))


def test_external_function_pipes_its_parameters():
    p = Profiler(ToyModel([4, 3]))
    # ToyModel([4, 3]): params = 4*3 + 3 = 15
    p.register_profiler_function(ExternalProfilerFunction(lambda model: model.params(), TotalParams))
    assert p.compute_status("total_params") == 15


def test_custom_status_key_without_display():
    class Notes(StatusKey):
        NAME = "notes"

    p = Profiler(ToyModel([2]))
    p.register_profiler_function(ExternalProfilerFunction(lambda: ["a"], Notes))
    assert p.compute_status(Notes) == ["a"]
    shown = [row["key"] for row in p.compute_network_status().to_dict()["metrics"]]
    assert shown == []  # a StatusKey that is not a Metric is no row of the table


def test_toy_profiler_registers_defaults():
    p = ToyProfiler(ToyModel([4, 3, 2]))
    assert set(p.status_keys) == {"macs", "flops", "total_params"}
    assert {type(f) for f in p.functions} == {ToyComplexity, ToyParams}
