"""A tiny pure-Python backend used by the core tests: a model is a list of layer widths."""
from __future__ import annotations

from deeplite_like import Profiler, ProfilerFunction
from deeplite_like.metrics import Flops, Macs, TotalParams


class ToyModel:
    """A multilayer perceptron described by its widths, e.g. ``ToyModel([4, 3, 2])``."""

    def __init__(self, widths):
        self.widths = list(widths)

    def params(self) -> int:
        return sum(i * o + o for i, o in zip(self.widths, self.widths[1:]))

    def macs(self, batch_size: int) -> int:
        return batch_size * sum(i * o for i, o in zip(self.widths, self.widths[1:]))


class ToyComplexity(ProfilerFunction):
    """MACs and FLOPs of a ToyModel: FLOPs = 2 * MACs + one add per bias."""

    def __init__(self):
        self.calls = []

    def get_bounded_status_keys(self):
        return Macs, Flops

    def __call__(self, model, batch_size=1):
        self.calls.append(batch_size)
        macs = model.macs(batch_size)
        biases = batch_size * sum(model.widths[1:])
        return {"macs": macs, "flops": 2 * macs + biases}


class ToyParams(ProfilerFunction):
    def get_bounded_status_keys(self):
        return (TotalParams,)

    def __call__(self, model):
        return model.params()


class ToyProfiler(Profiler):
    backend_name = "toy"

    def __init__(self, model, data_splits=None, name="toy"):
        super().__init__(model, data_splits, name)
        self.register_profiler_function(ToyComplexity())
        self.register_profiler_function(ToyParams())
