"""One network in PyTorch and in Keras: the same MACs, FLOPs and parameters, compared side by side."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

from deeplite_like import compare  # noqa: E402
from deeplite_like.backends.keras import KerasProfiler  # noqa: E402
from deeplite_like.backends.torch import TorchProfiler  # noqa: E402
from deeplite_like.zoo import get  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cross_backend_compare.py"

# The small CNN of the example, by hand at batch 1 (Conv2D(3->8, 3x3, same) - ReLU - MaxPool 2 -
# Flatten - Dense(512 -> 10) on 16x16x3):
#   params: conv 3*3*3*8 + 8 = 224; fc 8*8*8*10 + 10 = 5,130  -> 5,354
#   MACs: conv 16*16*8 outputs x 3*3*3 = 55,296; fc 512*10 = 5,120  -> 60,416
#   FLOPs: 2*60,416 + conv bias 2,048 + ReLU 2,048 + max pool (4 per output) 512*4 = 2,048 + fc bias 10 -> 126,986
SMALL_CNN = {"total_params": 5_354, "trainable_params": 5_354, "macs": 60_416, "flops": 126_986}
# LeNet-5 (docs/zoo.rst): 61,706 params, 416,520 MACs;
# FLOPs = 2*416,520 + biases 6,518 + ReLUs 6,508 + max pools 6,304 = 852,370
LENET = {"total_params": 61_706, "trainable_params": 61_706, "macs": 416_520, "flops": 852_370}


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("cross_backend_compare", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _values(report, name):
    return {row["key"]: row["values"][name]["value"] for row in report.to_dict()["metrics"]}


def test_the_small_cnn_counts_the_same_in_both_frameworks(example):
    torch_profiler, keras_profiler = example.profilers(batch_size=2)
    report = compare([torch_profiler, keras_profiler], batch_size=1, min_run_time=0.02)
    data = report.to_dict()
    assert [m["backend"] for m in data["models"]] == ["torch", "keras"]
    for name in ("small_cnn_torch", "small_cnn_keras"):
        values = _values(report, name)
        assert {key: values[key] for key in SMALL_CNN} == SMALL_CNN, name
    changes = {row["key"]: row["changes"]["small_cnn_keras"]["text"] for row in data["metrics"]}
    assert all(changes[key] == "same" for key in SMALL_CNN)
    text = str(report)
    assert "small_cnn_torch (torch, reference) vs small_cnn_keras (keras)" in text


def test_the_pair_computes_the_same_function(example):
    torch_model, keras_model = example.build_pair()
    x, _ = example.images(3)
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
    np.testing.assert_allclose(np.asarray(keras_model(x, training=False)), expected, atol=1e-5)


def test_the_example_runs_as_a_script(example, capsys):
    assert example.main(["--min-run-time", "0.02"]) == 0
    out = capsys.readouterr().out
    assert "Comparison: small_cnn_torch" in out and "largest output difference" in out


def test_zoo_lenet5_twins_count_the_same():
    torch_entry, keras_entry = get("lenet5"), get("lenet5_keras")
    assert keras_entry.input_shape == torch_entry.input_shape[1:] + torch_entry.input_shape[:1]  # HWC vs CHW
    profilers = [TorchProfiler(torch_entry.build(), torch_entry.synthetic_splits(batch_size=2), name="torch"),
                 KerasProfiler(keras_entry.build(), keras_entry.synthetic_splits(batch_size=2), name="keras")]
    for profiler in profilers:
        for key in ("macs", "flops", "total_params", "trainable_params"):
            assert profiler.compute_status(key, batch_size=1) == LENET[key], (profiler.name, key)


def test_keras_zoo_builds_are_deterministic_and_leave_global_rngs():
    entry = get("lenet5_keras")
    np.random.seed(123)
    expected_next = np.random.rand()
    np.random.seed(123)
    first, again, other = entry.build(), entry.build(), entry.build(seed=1)
    assert np.random.rand() == expected_next  # NumPy's global RNG was not used
    assert all(np.array_equal(a, b) for a, b in zip(first.get_weights(), again.get_weights()))
    assert not all(np.array_equal(a, b) for a, b in zip(first.get_weights(), other.get_weights()))
    x = entry.example_input(batch_size=2)
    assert x.shape == (2, 32, 32, 1) and x.dtype == np.float32
    assert tuple(first(x, training=False).shape) == (2, 10)
