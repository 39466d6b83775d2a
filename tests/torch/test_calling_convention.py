"""One calling convention for model inputs: positional inputs (or ``args=``), keyword inputs in ``kwargs=``,
our options as keywords beside them, never mixed up with the model's."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import count_ops
from deeplite_like.backends.torch.memory import peak_activation_memory


class Scaled(nn.Module):
    """A model with keyword inputs named like our options (``meta``, ``backward``)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.seen: list[tuple] = []

    def forward(self, x, scale=None, meta=False, backward=False):
        self.seen.append((x.device.type, meta, backward))
        y = self.linear(x)
        return y * scale if scale is not None else y


# Linear(4, 3) at batch 2: 2 * 4 * 3 = 24 MACs; FLOPs 2 * 24 + 2 * 3 bias adds = 54; "* scale": + 6 FLOPs
LINEAR = (24, 54)


def test_a_model_input_named_like_an_option_goes_to_the_model():
    model, x = Scaled(), torch.randn(2, 4)
    counted = count_ops(model, x, kwargs={"meta": True, "backward": True})
    # the model received meta=True and backward=True; the count ran on real tensors, forward only
    assert model.seen == [("cpu", True, True)]
    assert (counted.macs, counted.flops) == LINEAR and set(counted.phases) == {"forward"}


def test_args_and_kwargs_equal_the_positional_form():
    model, x, scale = Scaled(), torch.randn(2, 4), torch.tensor(2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new forms never warn
        positional = count_ops(model, x, kwargs={"scale": scale})
        named = count_ops(model, args=(x,), kwargs={"scale": scale})
        single = count_ops(model, args=x, kwargs={"scale": scale})  # one input need not be a tuple
    assert positional.as_dict() == named.as_dict() == single.as_dict()
    assert (positional.macs, positional.flops) == (LINEAR[0], LINEAR[1] + 6)


def test_loose_model_keywords_still_work_with_a_deprecation_warning():
    model, x, scale = Scaled(), torch.randn(2, 4), torch.tensor(2.0)
    with pytest.warns(DeprecationWarning, match=r"scale .*pass them as kwargs=\{\.\.\.\}"):
        old = count_ops(model, x, scale=scale)
    assert old.as_dict() == count_ops(model, x, kwargs={"scale": scale}).as_dict()


def test_ambiguous_calls_are_refused_with_what_to_do():
    model, x = Scaled(), torch.randn(2, 4)
    with pytest.raises(TypeError, match="after the model or as args=.*not both"):
        count_ops(model, x, args=(x,))
    with pytest.raises(TypeError, match="scale were given twice"):
        count_ops(model, x, kwargs={"scale": 1.0}, scale=2.0)
    with pytest.raises(TypeError, match="kwargs= takes a dict"):
        count_ops(model, x, kwargs=[("scale", 1.0)])


def test_peak_memory_options_are_keyword_only():
    model, x = Scaled(), torch.randn(2, 4)
    with pytest.raises(TypeError):
        peak_activation_memory(model, (x,), None, True)  # was meta=True, by position
    # Linear(4, 3) at batch 2: input 32 B live, output 24 B -> peak 56 B
    assert peak_activation_memory(model, (x,), {"meta": True}).peak_bytes == 56
    assert model.seen[-1] == ("cpu", True, False)
