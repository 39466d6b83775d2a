"""Seed 002 (deeplite-profiler manual), "Contribute a Custom Metric", with its import lines changed.

The manual's ``Flops`` metric, a ``ProfilerFunction`` returning ``Flops()`` from
``get_bounded_status_keys`` (deeplite's own functions do), and the manual's registration. The
metric keeps deeplite's units: its value is in GigaMACs, as the function computes it.
"""
import torch  # changed: for the data and model the manual leaves out

from deeplite_like import Comparative, Metric, ProfilerFunction  # changed: deeplite's imports
from deeplite_like.backends.torch import TorchProfiler, count_ops  # changed: deeplite's imports
from seed_stand_ins import lenet5  # changed: the model the manual leaves out


class Flops(Metric):
    NAME = 'flops'

    @staticmethod
    def description():
        return "Summation of Multiply-Add Cumulations (MACs) per single image (batch_size=1)"

    @staticmethod
    def friendly_name():
        return 'Computational Complexity'

    def get_comparative(self):
        return Comparative.RECIPROCAL

    def get_value(self):
        if self.value > 1e-3:
            return self.value
        if self.value > 1e-6:
            return self.value * 1024
        return self.value * (1024 ** 2)

    def get_units(self):
        if self.value > 1e-3:
            return 'GigaMACs'
        if self.value > 1e-6:
            return 'MegaMACs'
        return 'KiloMACs'


class ComputeGigaMacs(ProfilerFunction):  # not in the manual: a function computing the manual's metric
    def get_bounded_status_keys(self):
        return Flops()

    def __call__(self, model, data_splits):
        x, _ = next(iter(data_splits['train']))
        return count_ops(model, x[:1]).macs / 1e9


model = lenet5()
data_loader = {'train': [(torch.randn(2, 1, 32, 32), torch.tensor([0, 1]))]}
profiler = TorchProfiler(model, data_loader, name="Original Model", register_defaults=False)
profiler.register_profiler_function(ComputeGigaMacs()) # Provide your `ProfilerFunction` here
status = profiler.compute_network_status()
print(status)
