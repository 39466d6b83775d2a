# Ported from Deeplite/deeplite-profiler 1.2.3 (tag 1.2.3-release), tests/torch_tests/unit/test_torch_profiler.py
# By Deeplite (support@deeplite.ai), Apache License 2.0 (https://github.com/Deeplite/deeplite-profiler/blob/master/LICENSE).
# Only the import lines (and mock.patch targets, which name modules) changed: deeplite.profiler.* -> deeplite_like
# (deeplite.profiler.metrics -> deeplite_like.metrics), deeplite.torch_profiler.* -> deeplite_like.backends.torch,
# deeplite.tf_profiler.* -> deeplite_like.backends.keras, tests.* -> tests.compat.deeplite.*.

import pytest
from tests.compat.deeplite.torch_tests.unit import BaseUnitTest, TORCH_AVAILABLE, get_profiler
from unittest import mock

@mock.patch("deeplite_like.backends.torch.ComputeComplexity._compute_complexity",
            return_value=(1, 2, 3, 4, "summary_str"))
@mock.patch("deeplite_like.AverageAggregator.get", return_value=(1))
class TestTorchProfiler(BaseUnitTest):
    def test_compute_flops(self, *args):
        profiler = get_profiler()
        profiler.compute_status('flops')

    def test_compute_execution_time(self, *args):
        from deeplite_like import Device
        profiler = get_profiler()
        batch_size = 1
        device = Device.CPU
        profiler.compute_status('execution_time', device=device, batch_size=batch_size)

    def test_compute_size(self, *args):
        from deeplite_like import Device
        profiler = get_profiler()
        batch_size = 1
        device = Device.CPU
        profiler.compute_status('model_size', device=device, batch_size=batch_size)

    def test_compute_memory_footprint(self, *args):
        from deeplite_like import Device
        profiler = get_profiler()
        batch_size = 1
        device = Device.CPU
        profiler.compute_status('memory_footprint', device=device, batch_size=batch_size)

