# Ported from Deeplite/deeplite-profiler 1.2.3 (tag 1.2.3-release), tests/torch_tests/functional/__init__.py
# By Deeplite (support@deeplite.ai), Apache License 2.0 (https://github.com/Deeplite/deeplite-profiler/blob/master/LICENSE).
# Only the import lines (and mock.patch targets, which name modules) changed: deeplite.profiler.* -> deeplite_like
# (deeplite.profiler.metrics -> deeplite_like.metrics), deeplite.torch_profiler.* -> deeplite_like.backends.torch,
# deeplite.tf_profiler.* -> deeplite_like.backends.keras, tests.* -> tests.compat.deeplite.*.
import pytest, sys

try:
    import torch
    TORCH_AVAILABLE = True
except (ImportError, NameError, AttributeError, OSError):
    TORCH_AVAILABLE = False

MODEL, DATA = None, None
get_profiler = None

@pytest.mark.skipif(not TORCH_AVAILABLE, reason="PyTorch is not used as a backend")
class BaseFunctionalTest:
    def setup_method(self, method):
        """ setup any state tied to the execution of the given method in a
        class.  setup_method is invoked for every test method of a class.
        """
        print("setup ", method.__name__)
        pass


    def teardown_method(self, method):
        """ teardown any state that was previously setup with a setup_method
        call.
        """
        print("teardown ", method.__name__)
        pass

class FakeData:
    def __init__(self):
        self.x = [torch.randn(1, 3, 32, 32)]
        self.y = [torch.randn(1, 8192)]
        self.batch_size = 1

    def __iter__(self):
        for x, y in zip(self.x, self.y):
            yield torch.FloatTensor(x), torch.FloatTensor(y)

    def __len__(self):
        return 1

def get_profiler():
    data = TorchProfiler.enable_forward_pass_data_splits(DATA)
    profiler = TorchProfiler(MODEL, data)
    profiler.register_profiler_function(ComputeComplexity())
    profiler.register_profiler_function(ComputeExecutionTime())
    profiler.register_profiler_function(ComputeEvalMetric(get_missclass, 'missclass', unit_name='%'))
    return profiler

if TORCH_AVAILABLE:
    import torch
    import torch.nn as nn
    from deeplite_like import ComputeEvalMetric
    from deeplite_like.backends.torch import *
    from deeplite_like.backends.torch import get_missclass

    MODEL = nn.Sequential(
        nn.Conv2d(3, 32, kernel_size=5, stride=1, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(kernel_size=2, stride=2),
        nn.Flatten(),
    )

    DATA = {"train": FakeData(), "test": FakeData()}