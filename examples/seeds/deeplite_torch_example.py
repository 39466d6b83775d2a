"""Seed 002 (deeplite-profiler manual), "Torch Example", with its import lines changed.

``neutrino_torch_zoo``'s loaders come from ``seed_stand_ins`` (random weights and data: the
pretrained model and CIFAR-100 are downloads). ``Device.GPU`` is used where CUDA exists, else
``Device.CPU`` (marked ``# changed``).
"""
import torch  # changed: to pick the device

from seed_stand_ins import get_data_splits_by_name, get_model_by_name  # changed: was neutrino_torch_zoo.wrappers.wrapper
from deeplite_like.backends.torch import TorchProfiler  # changed: was neutrino.framework.torch_profiler.torch_profiler
from deeplite_like.backends.torch import *  # changed: was neutrino.framework.torch_profiler.torch_profiler
from deeplite_like import Device, ComputeEvalMetric  # changed: was neutrino.framework.profiler
from deeplite_like.backends.torch import get_accuracy  # changed: was neutrino.framework.torch_profiler.torch_inference
from copy import deepcopy

DEVICE = Device.GPU if torch.cuda.is_available() else Device.CPU  # changed: the seed runs on Device.GPU

# Step 1: Define pytorch dataloaders and model
# 1a. data_splits = {"train": train_dataloder, "test": test_dataloader}
data_splits = get_data_splits_by_name(dataset_name='cifar100',
                                                            data_root='',
                                                            batch_size=128,
                                                            num_torch_workers=4)
                                                        
# 1b. Load the Pytorch model
model = get_model_by_name(model_name='resnet18',
                            dataset_name='cifar100',
                            pretrained=True,
                            progress=True)


# Step 2: Create Profiler class and register the profiling functions
data_loader = TorchProfiler.enable_forward_pass_data_splits(data_splits)
profiler = TorchProfiler(model, data_loader, name="Original Model")
profiler.register_profiler_function(ComputeComplexity())
profiler.register_profiler_function(ComputeExecutionTime())
profiler.register_profiler_function(ComputeEvalMetric(get_accuracy, 'accuracy', unit_name='%'))

# Step 3: Compute the registered profiler metrics for the PyTorch Model
profiler.compute_network_status(batch_size=1, device=DEVICE, short_print=False,  # changed: device
                                                include_weights=True, print_mode='debug')

# Step 4: Clone and Compare 
profiler2 = profiler.clone(model=deepcopy(model))
profiler2.name = "Clone Model"
profiler2.compare(profiler, short_print=False, batch_size=1, device=DEVICE, print_mode='debug')  # changed: device
