"""Seed 002 (deeplite-profiler manual), "How to Use: For TensorFlow model", with its import lines changed.

The manual leaves the data and the model as placeholders (``/* ... */``): a small Keras CNN on
random CIFAR-shaped arrays stands in.
"""
import numpy as np  # changed: for the placeholders
import keras  # changed: for the placeholders

from deeplite_like import ComputeEvalMetric, Device  # changed: deeplite's imports
from deeplite_like.backends.keras import *  # changed: deeplite's imports

# Step 1: Define native TensorFlow dataloaders and model
# 1a. data_splits = {"train": train_dataloder, "test": test_dataloader}
rng = np.random.default_rng(0)  # changed: placeholder data
batches = [(rng.random((16, 32, 32, 3), dtype="float32"), rng.integers(0, 10, 16)) for _ in range(2)]
data_splits = {"train": batches, "test": batches}  # changed: placeholder
model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(8, 3, activation="relu"),  # changed: placeholder
                          keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(10)])

# Step 2: Create Profiler class and register the profiling functions
profiler = TFProfiler(model, data_splits, name="Original Model")
profiler.register_profiler_function(ComputeFlops())
profiler.register_profiler_function(ComputeSize())
profiler.register_profiler_function(ComputeParams())
profiler.register_profiler_function(ComputeLayerwiseSummary())
profiler.register_profiler_function(ComputeExecutionTime())
profiler.register_profiler_function(ComputeEvalMetric(get_accuracy, 'accuracy', unit_name='%'))

# Step 3: Compute the registered profiler metrics for the TensorFlow Keras Model
profiler.compute_network_status(batch_size=1, device=Device.CPU, short_print=False,
                                                include_weights=True, print_mode='debug')

# Step 4: Compare two different models or profilers.
profiler2 = profiler.clone(model=model) # Creating a dummy clone of the current profiler
profiler2.name = "Clone Model"
profiler.compare(profiler2, short_print=False, batch_size=1, device=Device.CPU, print_mode='debug')
