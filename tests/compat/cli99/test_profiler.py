# Ported into deeplite_like from cli99/flops-profiler (MIT licence, (c) its authors) tests/test_profiler.py.
# Only the import lines changed.
import pytest
import torch
import torch.nn as nn
import os
import tempfile

from deeplite_like.profiling import get_model_profile, FlopsProfiler
from tests.compat.cli99.lenet5 import LeNet5_10


def test_get_model_profile(LeNet5_10, tmpdir):
    batch_size = 1024
    input = torch.randn(batch_size, 1, 32, 32)
    flops, macs, params = get_model_profile(
        LeNet5_10,
        tuple(input.shape),
        output_file=tmpdir.join('tmp.txt'),
    )
    assert macs == 426516480
    assert params == 61706
