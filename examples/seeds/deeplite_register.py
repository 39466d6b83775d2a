"""Seed 002 (deeplite-profiler manual), "Registering with the Profiler", with its import lines changed.

The manual registers ``ComputeComplexity()`` on a ``TorchProfiler`` that already has the
default functions; the model and data it leaves out come from ``seed_stand_ins``.
"""
import torch  # changed: for the data the manual leaves out

from deeplite_like.backends.torch import *  # changed: deeplite's imports
from seed_stand_ins import lenet5  # changed: the model the manual leaves out

model = lenet5()
data_loader = {'train': [(torch.randn(2, 1, 32, 32), torch.tensor([0, 1]))]}
profiler = TorchProfiler(model, data_loader, name="Original Model")
profiler.register_profiler_function(ComputeComplexity()) # Provide your `ProfilerFunction` here
print(profiler.compute_network_status(batch_size=1))
