"""Seed 002 (deeplite-profiler manual), "How to Use: For PyTorch model", with its import lines changed.

The manual leaves the data and the model as placeholders (``/* ... */``); they come from
``seed_stand_ins`` (ResNet-18 on random CIFAR-100-shaped data).
"""
from copy import deepcopy

from deeplite_like import ComputeEvalMetric, Device  # changed: deeplite's imports
from deeplite_like.backends.torch import *  # changed: deeplite's imports
from seed_stand_ins import get_data_splits_by_name, get_model_by_name  # changed: the manual's placeholders

# Step 1: Define native pytorch dataloaders and model
# 1a. data_splits = {"train": train_dataloder, "test": test_dataloader}
data_splits = get_data_splits_by_name('cifar100', batch_size=32, samples=32)  # changed: placeholder
model = get_model_by_name('resnet18', 'cifar100')  # changed: placeholder

# Step 2: Create Profiler class and register the profiling functions
profiler = TorchProfiler(model, data_splits, name="Original Model")
profiler.register_profiler_function(ComputeComplexity())
profiler.register_profiler_function(ComputeExecutionTime())
profiler.register_profiler_function(ComputeEvalMetric(get_accuracy, 'accuracy', unit_name='%'))

# Step 3: Compute the registered profiler metrics for the PyTorch Model
profiler.compute_network_status(batch_size=1, device=Device.CPU, short_print=False,
                                                include_weights=True, print_mode='debug')

# Step 4: Compare two different models or profilers.
profiler2 = profiler.clone(model=deepcopy(model)) # Creating a dummy clone of the current profiler
profiler2.name = "Clone Model"
profiler.compare(profiler2, short_print=False, batch_size=1, device=Device.CPU, print_mode='debug')
