"""``TorchProfiler`` end to end: every built-in metric on LeNet-5, compare, untouched model."""
import copy
import json

import pytest
import torch

from deeplite_like import ComputeEvalMetric, compare, profiler_for
from deeplite_like.backends.torch import TorchProfiler, accuracy
from deeplite_like.zoo import get

# LeNet-5 by hand (docs/zoo.rst), batch 1:
#   conv1 6@5x5 on 1x32x32 -> 6x28x28: 6*28*28 * 1*5*5 = 117,600 MACs
#   conv2 16@5x5 on 6x14x14 -> 16x10x10: 16*10*10 * 6*5*5 = 240,000 MACs
#   fc 400->120: 48,000; 120->84: 10,080; 84->10: 840
#   total = 117,600 + 240,000 + 48,000 + 10,080 + 840 = 416,520 MACs
LENET_MACS = 416_520
# params: conv1 6*25+6 = 156; conv2 16*150+16 = 2,416; fc 48,120 + 10,164 + 850 -> 61,706; fp32 -> 246,824 B
LENET_PARAMS = 61_706


@pytest.fixture()
def lenet():
    entry = get("lenet5")
    return entry.build(), entry.synthetic_splits(batch_size=4, batches=2)


def test_every_builtin_metric_on_lenet(lenet):
    model, splits = lenet
    profiler = TorchProfiler(model, splits, name="lenet5")
    report = profiler.compute_network_status(batch_size=2, min_run_time=0.05)
    status = profiler.status_to_dict()
    assert status["macs"] == 2 * LENET_MACS  # counts are per the batch that ran
    assert profiler.get_status("macs").details["per_sample"].value == LENET_MACS
    assert status["total_params"] == status["trainable_params"] == LENET_PARAMS
    assert status["model_size"] == 4 * LENET_PARAMS
    # input 2x1x32x32 fp32 = 8,192 B is live at the start, so the peak is at least that
    assert status["peak_activation_memory"] >= 8192
    assert status["memory_footprint"] == 4 * LENET_PARAMS + status["peak_activation_memory"]  # no buffers
    assert status["execution_time"] > 0
    assert status["throughput"] == pytest.approx(2 / status["execution_time"])
    summary = status["layerwise_summary"]
    assert summary.rows[0]["macs"] == 2 * LENET_MACS and summary.rows[0]["params"] == LENET_PARAMS
    rows = {row["key"]: row for row in json.loads(report.to_json())["metrics"]}
    assert rows["macs"]["value"] == 2 * LENET_MACS


def test_flops_of_lenet_by_hand(lenet):
    model, splits = lenet
    profiler = TorchProfiler(model, splits)
    # FLOPs = 2*MACs + bias adds + ReLUs + max pools, batch 1:
    #   biases: conv1 6*28*28 = 4,704; conv2 16*10*10 = 1,600; fc 120 + 84 + 10 = 214  -> 6,518
    #   ReLU (1 FLOP/element): 4,704 + 1,600 + 120 + 84 = 6,508
    #   max pool (K FLOPs per output, K = window size 4, formulas/conv.py):
    #     pool1 out 6*14*14 = 1,176 -> 4,704; pool2 out 16*5*5 = 400 -> 1,600  -> 6,304
    flops = profiler.compute_status("flops", batch_size=1)
    assert flops == 2 * LENET_MACS + 6_518 + 6_508 + 6_304


def test_model_is_untouched(lenet):
    model, splits = lenet
    model.train()
    model.features[0].weight.requires_grad_(False)
    before = copy.deepcopy(model.state_dict())
    TorchProfiler(model, splits).compute_network_status(batch_size=2, min_run_time=0.02)
    assert model.training and all(m.training for m in model.modules())
    assert not model.features[0].weight.requires_grad and model.features[3].weight.requires_grad
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


def test_repeated_profiling_gives_identical_counts(lenet):
    model, splits = lenet
    first = TorchProfiler(model, splits).compute_network_status(batch_size=3, min_run_time=0.02).to_dict()
    second = TorchProfiler(model, splits).compute_network_status(batch_size=3, min_run_time=0.02).to_dict()
    values = [{row["key"]: row["value"] for row in report["metrics"]} for report in (first, second)]
    for key in ("macs", "flops", "total_params", "model_size", "peak_activation_memory"):
        assert values[0][key] == values[1][key]


def test_profiler_for_picks_torch_and_compares_teacher_and_student():
    teacher, student = get("resnet_small"), get("resnet_small_student")
    splits = teacher.synthetic_splits(batch_size=2, batches=1)
    p1 = profiler_for(teacher.build(), splits, name="teacher")
    p2 = profiler_for(student.build(), splits, name="student")
    assert isinstance(p1, TorchProfiler)
    report = compare([p1, p2], batch_size=1, min_run_time=0.02)
    ratio = p1.compute_status("macs") / p2.compute_status("macs")
    row = next(r for r in report.to_dict()["metrics"] if r["key"] == "macs")
    assert row["changes"]["student"]["text"] == f"{ratio:.2f}x fewer"


def test_eval_metric_with_the_accuracy_helper(lenet):
    model, splits = lenet
    profiler = TorchProfiler(model, splits)
    profiler.register_profiler_function(ComputeEvalMetric(accuracy, "top1", unit_name="%"))
    top1 = profiler.compute_status("top1")
    assert 0.0 <= top1 <= 100.0


def test_from_inputs_and_backward_option():
    model = torch.nn.Linear(4, 3)
    profiler = TorchProfiler.from_inputs(model, torch.randn(2, 4))
    # batch_size defaults to 1 (one sample of the example): Linear(4, 3): 4*3 = 12 MACs
    assert profiler.compute_status("macs") == 12
    # batch 2: forward 2*4*3 = 24 MACs; backward dW 24 (the input needs no grad) -> 48
    assert profiler.compute_status("macs", batch_size=2) == 24
    assert profiler.compute_status("macs", backward=True, batch_size=2) == 48
    with pytest.raises(TypeError, match="torch.nn.Module"):
        TorchProfiler([1, 2])


def test_layerwise_summary_rows(lenet):
    model, splits = lenet
    summary = TorchProfiler(model, splits).compute_status("layerwise_summary", batch_size=1)
    rows = {row["module"]: row for row in summary.rows}
    # conv1: Conv2d(1, 6, 5) on 1x1x32x32 -> 1x6x28x28: 6*28*28*25 = 117,600 MACs, 156 params,
    # output 4,704 floats = 18,816 bytes; its share 117,600 / 416,520 = 28.23 %
    conv1 = rows["features.0"]
    assert (conv1["type"], conv1["input_shapes"], conv1["output_shapes"]) == ("Conv2d", "1x1x32x32", "1x6x28x28")
    assert (conv1["macs"], conv1["params"], conv1["activation_bytes"]) == (117_600, 156, 18_816)
    assert conv1["macs_share"] == pytest.approx(100 * 117_600 / LENET_MACS)
    # parents include children: features = conv1 + conv2 = 357,600 MACs; the root has everything
    assert rows["features"]["macs"] == 357_600 and rows[""]["macs"] == LENET_MACS
    assert rows[""]["params"] == LENET_PARAMS and len(rows) == 15  # root + 2 Sequentials + 12 layers
    assert "(model)" in str(summary) and '"module": "features.0"' in summary.to_json()


def test_exported_and_scripted_models_profile():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    x = torch.randn(2, 4)
    exported = torch.export.export(model, (x,)).module()
    scripted = torch.jit.script(model)
    for candidate in (exported, scripted):
        profiler = TorchProfiler.from_inputs(candidate, x)
        # Linear(4, 3) at batch 2: 2*4*3 = 24 MACs
        assert profiler.compute_status("macs", batch_size=2) == 24
        assert profiler.compute_status("peak_activation_memory", batch_size=2) > 0
        assert profiler.compute_status("execution_time", batch_size=2, min_run_time=0.01) > 0
