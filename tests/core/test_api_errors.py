"""One clear error per bad input on the framework-free API: each names the argument, the value and the fix."""
import re

import numpy as np
import pytest

import deeplite_like
from deeplite_like import DataError, ForwardPass, Profiler
from deeplite_like.data import as_forward_pass
from deeplite_like.device import unavailable
from deeplite_like.errors import called_as, caller, inputs_hint
from deeplite_like.profiling.flops_profiler import check_input_shape
from deeplite_like.profiling.result import check_view_options
from deeplite_like.timing import MAX_THREADS_PER_CPU, check_num_threads, max_threads

from .toy import ToyComplexity, ToyModel


# -- num_threads --------------------------------------------------------------------------------
def test_num_threads_above_four_per_cpu_is_refused_with_the_limit_and_the_cpu_count():
    cpus = max_threads() // MAX_THREADS_PER_CPU
    with pytest.raises(ValueError) as error:
        check_num_threads(100000)
    message = str(error.value)
    assert "num_threads=100000" in message and f"may use {cpus} CPUs" in message
    assert f"at most {4 * cpus} threads" in message and f"Pass num_threads={cpus} or less" in message


@pytest.mark.parametrize("value", [0, -3])
def test_num_threads_below_one_is_refused(value):
    with pytest.raises(ValueError, match=rf"num_threads must be >= 1, got {value}"):
        check_num_threads(value)


@pytest.mark.parametrize("value", ["4", 2.0, True])
def test_num_threads_of_another_type_is_refused(value):
    with pytest.raises(TypeError, match=rf"num_threads must be an int .*got {type(value).__name__}"):
        check_num_threads(value)


def test_num_threads_in_range_is_kept():
    assert check_num_threads(None) is None
    assert check_num_threads(1) == 1
    assert check_num_threads(max_threads()) == max_threads()  # the limit itself is accepted
    with pytest.raises(ValueError):
        check_num_threads(max_threads() + 1)


# -- get_model_profile's arguments ----------------------------------------------------------------
@pytest.mark.parametrize("depth, fix", [("2", "module_depth=2"), ("x", "module_depth=2"), (1.5, "module_depth=2"),
                                        ("-1", "module_depth=-1")])
def test_module_depth_of_another_type_is_refused_with_the_int_to_write(depth, fix):
    with pytest.raises(TypeError, match=rf"module_depth must be an int >= -1 .*got {type(depth).__name__} "
                                        rf"{depth!r}; e.g. {fix}$"):
        check_view_options(depth, 3)


def test_module_depth_below_minus_one_is_refused():
    with pytest.raises(ValueError, match="module_depth must be an int >= -1 .*got -2"):
        check_view_options(-2, 3)


@pytest.mark.parametrize("top, error", [("x", TypeError), ("3", TypeError), (0, ValueError), (-1, ValueError),
                                        (True, TypeError)])
def test_top_modules_must_be_a_positive_int(top, error):
    with pytest.raises(error, match="top_modules must be an int >= 1"):
        check_view_options(-1, top)


def test_valid_view_options_pass():
    for depth in (None, -1, 0, 3, np.int64(2)):
        check_view_options(depth, 1)


@pytest.mark.parametrize("shape, position", [((-1, 4), 0), ((2, -1), 1), ((None, 3, 8), 0)])
def test_input_shape_with_an_unknown_size_is_refused_with_a_fixed_shape(shape, position):
    fixed = tuple(1 if d in (None, -1) else d for d in shape)
    with pytest.raises(ValueError, match=rf"dimension {position} is .*give every size, the batch too, e.g. "
                                         rf"input_shape={re.escape(repr(fixed))}"):
        check_input_shape(shape)


@pytest.mark.parametrize("shape", [(0, 4), (2, 0), (2, 2.5), (2, "4"), (2, -3)])
def test_input_shape_dimensions_must_be_ints_of_at_least_one(shape):
    with pytest.raises(ValueError, match=r"every dimension must be an int >= 1"):
        check_input_shape(shape)


@pytest.mark.parametrize("shape", [8, "2,4", 2.0])
def test_input_shape_must_be_a_sequence(shape):
    with pytest.raises(TypeError, match="input_shape must be a sequence of ints"):
        check_input_shape(shape)


def test_input_shape_empty_and_valid():
    with pytest.raises(ValueError, match=r"input_shape=\(\) has no dimension"):
        check_input_shape(())
    assert check_input_shape([2, np.int64(3)]) == (2, 3) and check_input_shape(None) is None


def test_get_model_profile_validates_before_the_backend_is_even_chosen():
    # an object no backend handles: the argument error comes first, so nothing was looked up or run
    with pytest.raises(TypeError, match="module_depth must be an int"):
        deeplite_like.get_model_profile(object(), input_shape=(1, 4), module_depth="2", print_profile=False)
    with pytest.raises(TypeError, match="top_modules must be an int"):
        deeplite_like.get_model_profile(object(), input_shape=(1, 4), top_modules="x", print_profile=False)
    with pytest.raises(ValueError, match="dimension 0 is -1"):
        deeplite_like.get_model_profile(object(), input_shape=(-1, 4), print_profile=False)


# -- construction ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value, fix", [("x", "ForwardPass(inputs='x')"), (0, "ForwardPass(inputs=0)"),
                                        (("a", "b"), "ForwardPass(inputs=('a', 'b'))")])
def test_forward_pass_given_as_keys_shows_the_forward_pass_meant(value, fix):
    with pytest.raises(TypeError, match=rf"Owner\(forward_pass=...\) must be a deeplite_like.ForwardPass, got "
                                        rf"{type(value).__name__} .*write forward_pass={re.escape(fix)}$"):
        as_forward_pass(value, "Owner")


def test_forward_pass_given_as_a_function_shows_extract():
    def first(batch):
        return batch[0]

    with pytest.raises(TypeError, match=r"write forward_pass=ForwardPass\(extract=.*first\)$"):
        as_forward_pass(first, "Owner")
    with pytest.raises(TypeError, match=r"got object .*ForwardPass\(inputs=...\) or ForwardPass\(extract=fn\)"):
        as_forward_pass(object(), "Owner")
    kept = ForwardPass(inputs=1)
    assert as_forward_pass(kept, "Owner") is kept and isinstance(as_forward_pass(None, "Owner"), ForwardPass)


@pytest.mark.parametrize("splits, kind", [([(1, 2)], "list"), (((1, 2),), "tuple"), ("data.csv", "str")])
def test_data_splits_that_are_not_a_mapping_are_refused_at_construction(splits, kind):
    with pytest.raises(TypeError, match=rf"Profiler\(model, data_splits\): data_splits must be a dict of split name "
                                        rf"-> batches.*got a {kind}. Name the split: Profiler\(model, "
                                        rf"{{'test': batches}}\)"):
        Profiler(ToyModel([4, 3]), splits)


def test_compare_with_a_model_instead_of_a_profiler_says_how_to_wrap_it():
    teacher = Profiler(ToyModel([4, 3]), name="teacher")
    teacher.register_profiler_function(ToyComplexity())
    student = ToyModel([4, 2])
    for other in (student, [student], (teacher.clone(name="s"), student)):
        with pytest.raises(TypeError, match=r"compare\(\) takes a profiler \(or a list of profilers\) to compare with "
                                            r"'teacher', got tests.core.toy.ToyModel; wrap a model in a profiler first, "
                                            r"e.g. teacher.compare\(Profiler\(student_model"):
            teacher.compare(other)
    assert teacher.get_status("macs").value is None  # refused before anything was computed


def test_a_key_the_model_cannot_have_says_why():
    profiler = Profiler(ToyModel([4, 3]), name="net")
    profiler.limits["layerwise_summary"] = "no hooks here"
    with pytest.raises(ValueError, match=r"status key 'layerwise_summary' is not available for profiler 'net': "
                                         r"no hooks here$"):
        profiler.compute_status("layerwise_summary")


# -- devices and the calling API ------------------------------------------------------------------
def test_unavailable_device_names_the_argument_and_what_is_available():
    error = unavailable("cuda", ["cpu"], "device", "torch", "this torch is built without CUDA")
    assert str(error) == ("device='cuda': torch sees no such device here (this torch is built without CUDA). "
                          "Available: 'cpu'. Pass device='cpu', or leave device out to run where the model is")


def test_the_outermost_api_names_the_inputs_in_hints():
    assert caller("count_ops") == "count_ops"
    assert inputs_hint("count_ops") == ("Check that the inputs given to count_ops have the shapes and dtypes the "
                                        "model expects")
    with called_as("get_model_profile") as name:
        with called_as("compute_status") as inner:
            assert name == inner == "get_model_profile" == caller("count_ops")
        assert inputs_hint("count_ops").startswith("Check that the inputs given to get_model_profile have")
    with called_as("compute_network_status"):
        assert "given to compute_network_status (the first batch of the data split" in inputs_hint("count_ops")
    with called_as("the command line"):
        assert "given to the command line (--input-shape / --inputs)" in inputs_hint("count_ops")
    assert caller("count_ops") == "count_ops"  # nothing stays set


def test_data_error_is_still_a_value_error_and_forward_error_is_shared():
    from deeplite_like.errors import CountingError, ForwardError

    assert issubclass(DataError, ValueError) and deeplite_like.ForwardError is ForwardError
    assert issubclass(ForwardError, CountingError) and issubclass(CountingError, RuntimeError)
