"""deeplite's evaluation functions on an ONNX file, through ONNX Runtime (``OnnxSession.predict``)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def identity_classifier() -> "onnx.ModelProto":
    """scores = x @ I (4 classes): each sample's class is the index of its largest feature."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["scores"], name="fc")], "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 4])],
        initializer=[numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def batches():
    # 6 samples; features rank the classes (largest first): the targets hit top-1 on samples 0, 1, 2 and
    # top-2 (the second largest) on samples 3, 4; sample 5's target is the smallest feature (rank 4)
    x = np.array([[4, 3, 2, 1], [1, 4, 3, 2], [2, 1, 4, 3],
                  [4, 3, 2, 1], [1, 4, 3, 2], [4, 3, 2, 1]], dtype=np.float64)  # float64: cast to the input's float32
    y = np.array([0, 1, 2, 1, 2, 3])
    return [(x[:4], y[:4]), (x[4:], y[4:])]


def test_accuracy_missclass_and_topk_run_on_the_session():
    from deeplite_like.backends.onnx import (ComputeEvalMetric, OnnxProfiler, get_accuracy, get_missclass,
                                             get_topk)

    profiler = OnnxProfiler(identity_classifier(), {"test": batches()}, register_defaults=False)
    profiler.register_profiler_function(ComputeEvalMetric(get_accuracy, "accuracy", unit_name="%"))
    status = profiler.compute_network_status()
    assert status["accuracy"] == pytest.approx(100 * 3 / 6)  # top-1: samples 0, 1, 2 of 6
    session = profiler.session
    assert get_missclass(session, batches()) == pytest.approx(100 * 3 / 6)
    # top-5 of 4 classes holds every target; top-1 3 of 6
    assert get_topk(session, batches()) == pytest.approx({"top-1": 50.0, "top-5": 100.0})
    assert get_topk(session, batches(), topk=(2,)) == pytest.approx({"top-2": 100 * 5 / 6})


def test_bad_input_names_the_culprit():
    from deeplite_like.backends.onnx import OnnxSession, get_accuracy

    session = OnnxSession(identity_classifier())
    with pytest.raises(ValueError, match="no array for the model's input 'x'"):
        session.predict({"image": np.zeros((1, 4), np.float32)})
    with pytest.raises(ValueError, match="2 arrays for a model with 1 input"):
        session.predict((np.zeros((1, 4)), np.zeros((1, 4))))
    with pytest.raises(ValueError, match="device='cuda'"):
        get_accuracy(session, batches(), device="cuda")
    with pytest.raises(ValueError, match="no samples"):
        get_accuracy(session, [])
    with pytest.raises(ValueError, match="topk must be"):
        get_accuracy(session, batches(), topk=0)
