# Ported from Deeplite/deeplite-profiler 1.2.3 (tag 1.2.3-release), tests/torch_tests/unit/test_torch_data_loader.py
# By Deeplite (support@deeplite.ai), Apache License 2.0 (https://github.com/Deeplite/deeplite-profiler/blob/master/LICENSE).
# Only the import lines (and mock.patch targets, which name modules) changed: deeplite.profiler.* -> deeplite_like
# (deeplite.profiler.metrics -> deeplite_like.metrics), deeplite.torch_profiler.* -> deeplite_like.backends.torch,
# deeplite.tf_profiler.* -> deeplite_like.backends.keras, tests.* -> tests.compat.deeplite.*.
import pytest
import numpy as np
from tests.compat.deeplite.torch_tests.unit import BaseUnitTest, TORCH_AVAILABLE, fp

class TestTorchDataLoader(BaseUnitTest):
    def test_pass(self, fp):
        from deeplite_like import Device
        fp.expecting_common_inputs = False
        with pytest.raises(TypeError):
            fp.model_call(None, 1, Device.CPU)

    def test_sampler(self):
        from deeplite_like import Device
        from deeplite_like.backends.torch import TorchTensorSampler
        x = np.array([[1], [2]])
        sampler = TorchTensorSampler((x,))
        y = sampler.to_device((x,), Device.CPU, standardize=True)
        assert len(y) == 1
        assert np.all(y[0].numpy() == x)

        with pytest.raises(ValueError):
            TorchTensorSampler((None,))



