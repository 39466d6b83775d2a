"""Hostile input, second round (issue 29, section 2) on Keras: arguments that gave wrong numbers silently."""
import math

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from deeplite_like.backends.keras import KerasProfiler, count_ops  # noqa: E402


def net():
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="tiny")


@pytest.mark.parametrize("batch_size, error", [(0, ValueError), (-5, ValueError), ("8", TypeError), (1.5, TypeError)])
def test_count_ops_batch_size_0_is_refused_not_0_macs(batch_size, error):
    with pytest.raises(error, match=r"count_ops\(batch_size=\.\.\.\) must be"):
        count_ops(net(), (None, 4), batch_size=batch_size)
    # the same call with batch 2: Dense(4 -> 3) is 2 * 4 * 3 = 24 MACs
    assert count_ops(net(), (None, 4), batch_size=2).macs == 24


def test_count_ops_training_no_is_refused():
    with pytest.raises(TypeError, match=r"count_ops\(training=\.\.\.\) must be True or False, got str 'no'"):
        count_ops(net(), (2, 4), training="no")


@pytest.mark.parametrize("options, error", [({"min_run_time": math.nan}, ValueError),
                                            ({"min_run_time": math.inf}, ValueError),
                                            ({"min_run_time": "1"}, TypeError),
                                            ({"batch_size": 0}, ValueError),
                                            ({"batch_size": -5}, ValueError)])
def test_keras_compute_network_status_bad_numbers_are_refused(options, error):
    profiler = KerasProfiler(net(), {"test": [(np.ones((2, 4), "float32"), np.zeros(2))]})
    name = next(iter(options))
    with pytest.raises(error, match=rf"compute_network_status\({name}=\.\.\.\) must be"):
        profiler.compute_network_status(**options)


def test_keras_peak_memory_and_timing_batch_size_that_disagrees_is_refused():
    from deeplite_like.backends.keras.latency import measure_execution_time
    from deeplite_like.backends.keras.memory import peak_activation_memory

    x = np.ones((4, 4), "float32")  # 4 rows
    with pytest.raises(ValueError, match=r"peak_activation_memory\(batch_size=64\) disagrees with the inputs \(4x4\)"):
        peak_activation_memory(net(), x, batch_size=64)
    with pytest.raises(ValueError, match=r"measure_execution_time\(batch_size=64\) disagrees"):
        measure_execution_time(net(), x, batch_size=64, min_run_time=0.01)
