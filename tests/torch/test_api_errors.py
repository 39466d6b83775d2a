"""One clear error per bad input on the PyTorch Python API: the culprit (argument, value, module) and the fix."""
import re
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import deeplite_like
from deeplite_like import ForwardError, ForwardPass
from deeplite_like.backends.torch import TorchProfiler, count_ops
from deeplite_like.backends.torch.inputs import available_devices, checked_device
from deeplite_like.backends.torch.latency import measure_execution_time
from deeplite_like.timing import max_threads

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
FAST = {"min_run_time": 0.01}


def net():
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU())


def batches(n=2):
    return {"test": [(torch.randn(n, 4), torch.zeros(n))]}


def exported(batch):
    return torch.export.export(net(), (torch.randn(batch, 4),)).module()


# -- device= --------------------------------------------------------------------------------------
@no_cuda
@pytest.mark.parametrize("device", ["cuda", "gpu", "GPU", "cuda:0", "cuda:1", torch.device("cuda")])
def test_compute_network_status_on_a_missing_gpu_names_device_and_what_is_available(device):
    profiler = TorchProfiler(net(), batches())
    with pytest.raises(ValueError) as error:
        profiler.compute_network_status(device=device, **FAST)
    assert str(error.value).startswith(f"device={str(device)!r}: torch sees no such device here (")
    assert "Available: 'cpu'. Pass device='cpu', or leave device out" in str(error.value)
    # checked before anything ran: not even the MACs were counted
    assert all(profiler.get_status(k).value is None for k in profiler.status_keys)


@no_cuda
def test_compute_status_and_measure_execution_time_check_the_device_too():
    profiler = TorchProfiler(net(), batches())
    with pytest.raises(ValueError, match=r"^device='gpu': torch sees no such device"):
        profiler.compute_status("execution_time", device="gpu", **FAST)
    with pytest.raises(ValueError, match=r"^device='cuda': torch sees no such device"):
        measure_execution_time(net(), (torch.randn(2, 4),), device="cuda", **FAST)


def test_an_unknown_device_name_is_refused_with_the_accepted_names():
    with pytest.raises(ValueError, match=r"device='tpu0' is not a device; use 'cpu', 'gpu' or 'cuda'.*available "
                                         r"here: 'cpu'"):
        checked_device("tpu0")
    with pytest.raises(ValueError, match=r"device='meta': the meta device runs no arithmetic"):
        measure_execution_time(net(), (torch.randn(2, 4),), device="meta", **FAST)
    assert checked_device("CPU") == torch.device("cpu") and available_devices()[0] == "cpu"


def test_compare_checks_every_profilers_options_before_computing_any():
    teacher, student = TorchProfiler(net(), batches(), name="t"), TorchProfiler(net(), batches(), name="s")
    with pytest.raises(ValueError, match="num_threads=100000"):
        teacher.compare(student, num_threads=100000, **FAST)
    assert teacher.get_status("macs").value is None and student.get_status("macs").value is None


# -- num_threads= ---------------------------------------------------------------------------------
@pytest.mark.parametrize("threads", [100000, max_threads() + 1])
def test_num_threads_far_above_the_cpus_is_refused_before_timing(threads):
    profiler = TorchProfiler(net(), batches())
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match=rf"^num_threads={threads} is more than 4 threads per CPU"):
        profiler.compute_network_status(num_threads=threads, **FAST)
    with pytest.raises(ValueError, match=rf"^num_threads={threads} is more than 4 threads per CPU"):
        measure_execution_time(net(), (torch.randn(2, 4),), num_threads=threads, **FAST)
    assert torch.get_num_threads() == before and profiler.get_status("macs").value is None


def test_num_threads_at_the_limit_is_timed():
    stats = measure_execution_time(net(), (torch.randn(2, 4),), num_threads=1, **FAST)
    assert stats.num_threads == 1


# -- construction ---------------------------------------------------------------------------------
def test_forward_pass_as_a_str_is_refused_at_construction():
    with pytest.raises(TypeError, match=r"^TorchProfiler\(forward_pass=...\) must be a deeplite_like.ForwardPass, "
                                        r"got str 'x'; .*forward_pass=ForwardPass\(inputs='x'\)$"):
        TorchProfiler(net(), batches(), forward_pass="x")


@pytest.mark.parametrize("splits", [[(torch.randn(2, 4), torch.zeros(2))], (torch.randn(2, 4),)])
def test_a_list_of_batches_instead_of_a_dict_of_splits_is_refused_at_construction(splits):
    with pytest.raises(TypeError, match=rf"^TorchProfiler\(model, data_splits\): data_splits must be a dict of split "
                                        rf"name -> batches.*got a {type(splits).__name__}. Name the split"):
        TorchProfiler(net(), splits)


def test_compare_with_a_module_names_it_and_shows_how_to_wrap_it():
    profiler = TorchProfiler(net(), batches(), name="teacher")
    for other in (net(), [net()]):  # an nn.Sequential is iterable: it must not be read as a list of layers
        with pytest.raises(TypeError, match=r"compare\(\) takes a profiler .* got torch.nn.modules.container.Sequential;"
                                            r" wrap a model in a profiler first, e.g. teacher.compare\(TorchProfiler\("):
            profiler.compare(other)


# -- batches the ForwardPass reads wrongly ------------------------------------------------------------
def test_a_batch_of_a_tuple_of_inputs_says_what_the_forward_pass_took_and_how_to_unpack():
    x = torch.randn(2, 4)
    profiler = TorchProfiler(net(), {"test": [((x,), torch.zeros(2))]})
    with pytest.raises(ForwardError) as error:
        profiler.compute_network_status(**FAST)
    message = str(error.value)
    assert message.startswith("the ForwardPass ForwardPass() took the model inputs (tuple(Tensor[float32, 1x4])) "
                              "from the batch tuple(tuple(Tensor[float32, 2x4]), Tensor[float32, 2]) of split 'test': "
                              "a tuple of tensors as one input.")
    assert "ForwardPass(extract=lambda b: tuple(b[0]))" in message and "must be Tensor, not tuple" in message
    # the fix it names works: resized to the default batch_size=1, Linear(4, 3) -> 4*3 = 12 MACs
    fixed = TorchProfiler(net(), {"test": [((x,), torch.zeros(2))]},
                          forward_pass=ForwardPass(extract=lambda b: tuple(b[0])))
    assert fixed.compute_status("macs") == 12


def test_a_list_of_inputs_in_a_dict_batch_is_explained_too():
    x = torch.randn(3, 4)
    profiler = TorchProfiler(net(), {"test": [{"x": [x], "y": torch.zeros(3)}]}, forward_pass=ForwardPass(inputs="x"))
    with pytest.raises(ForwardError, match=r"took the model inputs \(list\(Tensor\[float32, 1x4\]\)\).*a list of "
                                           r"tensors as one input"):
        profiler.compute_status("macs")


@pytest.mark.parametrize("key", ["macs", "peak_activation_memory", "execution_time", "layerwise_summary"])
def test_numpy_batches_are_explained_for_every_metric_that_runs_the_model(key):
    x = np.random.rand(2, 4).astype("float32")
    profiler = TorchProfiler(net(), {"test": [(x, np.zeros(2))]})
    with pytest.raises(ForwardError) as error:
        profiler.compute_status(key, **(FAST if key == "execution_time" else {}))
    message = str(error.value)
    assert message.startswith("the ForwardPass ForwardPass() took the model inputs (ndarray[float32, 1x4]) from the "
                              "batch tuple(ndarray[float32, 2x4], ndarray[float64, 2]) of split 'test': numpy arrays, "
                              "but a torch model takes tensors.")
    assert "torch.from_numpy" in message and error.value.__cause__ is not None


def test_a_model_that_takes_a_tuple_and_fails_for_another_reason_keeps_its_own_error():
    class Pair(nn.Module):
        def forward(self, pair):
            return pair[0] @ pair[1]  # shapes 1x4 @ 1x4: a shape error, not a tuple error

    profiler = TorchProfiler(Pair(), {"test": [((torch.randn(2, 4), torch.randn(2, 4)), 0)]})
    with pytest.raises(ForwardError, match=r"^the forward pass failed in the root module \(Pair\).*cannot be "
                                           r"multiplied.*Check that the inputs given to compute_status"):
        profiler.compute_status("macs")


# -- hints name the API that was called --------------------------------------------------------------
def test_the_inputs_hint_names_the_api_called():
    bad = torch.randn(2, 5)
    with pytest.raises(ForwardError, match=r"Check that the inputs given to count_ops have"):
        count_ops(net(), bad)
    profiler = TorchProfiler(net(), {"test": [bad]})
    with pytest.raises(ForwardError, match=r"Check that the inputs given to compute_network_status \(the first batch "
                                           r"of the data split"):
        profiler.compute_network_status(**FAST)
    with pytest.raises(ForwardError, match=r"Check that the inputs given to compute_status \(the first batch"):
        profiler.compute_status("macs")


# -- TorchScript --------------------------------------------------------------------------------------
def scripted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(net())


def test_a_torchscript_module_profiles_without_a_per_layer_table_and_says_why():
    profiler = TorchProfiler(scripted(), batches(), name="ts")
    profiler.compute_network_status(**FAST)
    # Linear(4, 3) at batch 1: 12 MACs; FLOPs 2*12 + 3 bias + 3 ReLU = 30; params 4*3 + 3 = 15
    assert profiler.get_status("macs").value == 12 and profiler.get_status("flops").value == 30
    assert profiler.get_status("total_params").value == 15 and "layerwise_summary" not in profiler.status_keys
    with pytest.raises(ValueError, match=r"^status key 'layerwise_summary' is not available for profiler 'ts': a "
                                         r"TorchScript module takes no forward hooks.*profile the Python nn.Module"):
        profiler.compute_status("layerwise_summary")


def test_traced_modules_and_an_explicit_layerwise_function_give_the_same_reason():
    from deeplite_like.backends.torch import ComputeLayerwiseSummary

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(net(), torch.randn(2, 4))
    profiler = TorchProfiler(traced, batches(), register_defaults=False)
    assert profiler.limits["layerwise_summary"].startswith("a TorchScript module takes no forward hooks")
    profiler.limits.clear()
    profiler.register_profiler_function(ComputeLayerwiseSummary())
    with pytest.raises(TypeError, match=r"layerwise_summary: .* is a TorchScript module; a TorchScript module takes "
                                        r"no forward hooks"):
        profiler.compute_status("layerwise_summary")


def test_torchscript_through_count_ops_and_get_model_profile():
    assert count_ops(scripted(), torch.randn(2, 4)).macs == 24  # 2 * 4 * 3
    profile = deeplite_like.get_model_profile(scripted(), input_shape=(2, 4), print_profile=False, warm_up=0)
    assert profile.macs == 24


# -- torch.export with a fixed batch ------------------------------------------------------------------
@pytest.mark.parametrize("exported_batch, data_batch, batch_size", [(1, 1, 8), (4, 4, None), (4, 4, 1), (2, 6, 3)])
def test_a_fixed_batch_export_resized_by_the_profiler_says_so_and_how_to_keep_it(exported_batch, data_batch,
                                                                                  batch_size):
    profiler = TorchProfiler(exported(exported_batch), batches(data_batch))
    options = {} if batch_size is None else {"batch_size": batch_size}
    asked = 1 if batch_size is None else batch_size
    with pytest.raises(ForwardError) as error:
        profiler.compute_network_status(**options, **FAST)
    message = str(error.value)
    assert message.startswith(f"GraphModule is a torch.export program exported with a fixed batch of {exported_batch} "
                              f"(its input ")
    assert (f"but compute_network_status resized the first batch of split 'test' from {data_batch} to {asked} "
            f"sample(s) (batch_size={asked}{' (the default)' if asked == 1 else ''}). Pass batch_size={exported_batch} "
            f"to keep the exported batch, or export with a dynamic batch") in message
    assert "dynamic_shapes=({0: torch.export.Dim('batch')},)" in message
    assert "Guard failed" in message  # what the model raised, after our explanation
    # the fix works: at the exported batch, 4 * 3 MACs per sample
    assert profiler.compute_status("macs", batch_size=exported_batch) == 12 * exported_batch


def test_a_fixed_batch_export_in_timing_and_memory_is_explained_too():
    for key in ("execution_time", "peak_activation_memory"):
        profiler = TorchProfiler(exported(4), batches(4))
        with pytest.raises(ForwardError, match=r"fixed batch of 4 .*resized the first batch of split 'test' from 4 to "
                                               r"2 sample\(s\) \(batch_size=2\)"):
            profiler.compute_status(key, batch_size=2, **(FAST if key == "execution_time" else {}))


def test_a_fixed_batch_export_given_other_inputs_directly_says_the_exported_batch():
    with pytest.raises(ForwardError, match=r"The model is a torch.export program exported with a fixed batch of 1 "
                                           r"\(its input '\w+'\), but got 4: pass inputs with 1 sample\(s\), or export "
                                           r"with a dynamic batch"):
        count_ops(exported(1), torch.randn(4, 4))
    # get_model_profile re-raises the model's own exception (as DeepSpeed's), told where in a note
    with pytest.raises(AssertionError, match="Guard failed") as error:
        deeplite_like.get_model_profile(exported(2), input_shape=(3, 4), print_profile=False)
    note = "\n".join(error.value.__notes__)
    assert re.search(r"GraphModule.forward failed .*The model is a torch.export program exported "
                     r"with a fixed batch of 2 .*pass inputs with 2 sample\(s\)", note)
    assert "input_shape" not in note.split("Guard failed")[1]  # not the unrelated input_shape hint


# -- get_model_profile's arguments ----------------------------------------------------------------------
@pytest.mark.parametrize("option, error, text", [
    ({"module_depth": "2"}, TypeError, "module_depth must be an int >= -1 (the deepest module depth shown; -1 shows "
                                       "all), got str '2'; e.g. module_depth=2"),
    ({"top_modules": "x"}, TypeError, "top_modules must be an int >= 1 (how many module types per depth are ranked), "
                                      "got str 'x'; e.g. top_modules=3"),
    ({"input_shape": (-1, 4)}, ValueError, "input_shape=(-1, 4): dimension 0 is -1"),
    ({"input_shape": (0, 4)}, ValueError, "input_shape=(0, 4): dimension 0 is 0; every dimension must be an int >= 1"),
])
def test_get_model_profile_arguments_are_checked_before_the_model_runs(option, error, text):
    calls = []
    model = net()
    model.register_forward_pre_hook(lambda *a: calls.append(1))
    kwargs = {"input_shape": (2, 4), **option}
    with pytest.raises(error) as raised:
        deeplite_like.get_model_profile(model, print_profile=False, **kwargs)
    assert str(raised.value).startswith(text) and calls == []


def test_count_ops_failure_is_the_shared_forward_error():
    from deeplite_like.errors import ForwardError as TorchForwardError

    assert TorchForwardError is deeplite_like.ForwardError
    with pytest.raises(deeplite_like.ForwardError):
        count_ops(net(), torch.randn(2, 5))


def test_no_message_keeps_a_raw_overload_listing():
    profiler = TorchProfiler(net(), {"test": [(np.zeros((2, 4), "float32"), 0)]})
    with pytest.raises(ForwardError) as error:
        profiler.compute_status("macs")
    assert not re.search(r"\n\s*\* \(", str(error.value))  # torch's "(Tensor input, ...)" overload listing
