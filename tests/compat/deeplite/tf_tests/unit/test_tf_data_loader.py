# Ported from Deeplite/deeplite-profiler 1.2.3 (tag 1.2.3-release), tests/tf_tests/unit/test_tf_data_loader.py
# By Deeplite (support@deeplite.ai), Apache License 2.0 (https://github.com/Deeplite/deeplite-profiler/blob/master/LICENSE).
# Only the import lines (and mock.patch targets, which name modules) changed: deeplite.profiler.* -> deeplite_like
# (deeplite.profiler.metrics -> deeplite_like.metrics), deeplite.torch_profiler.* -> deeplite_like.backends.torch,
# deeplite.tf_profiler.* -> deeplite_like.backends.keras, tests.* -> tests.compat.deeplite.*.
import pytest
from tests.compat.deeplite.tf_tests.unit import BaseUnitTest, TENSORFLOW_SUPPORTED, TENSORFLOW_AVAILABLE, fp
import numpy as np

class TestTFDataLoader(BaseUnitTest):
    def test_pass(self, fp):
        from deeplite_like import Device
        fp.expecting_common_inputs = False
        with pytest.raises(TypeError):
            fp.model_call(None, 1, Device.CPU)

    def test_sampler(self):
        from deeplite_like import Device
        from deeplite_like.backends.keras import TFTensorSampler
        x = np.array([[1], [2]])
        sampler = TFTensorSampler((x,))
        y = sampler.to_device((x,), Device.CPU, standardize=True)
        assert len(y) == 1
        assert np.all(y[0] == x)

        with pytest.raises(ValueError):
            TFTensorSampler((None,))

