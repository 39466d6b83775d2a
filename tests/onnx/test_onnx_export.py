"""The truth check: a zoo model exported with ``torch.onnx.export`` counts the MACs our torch backend counts live.

Exporter: the TorchScript exporter (``dynamo=False``: about 0.3 s a model here, against 7 s for the dynamo
exporter), which writes module scopes into node names; one test runs the dynamo exporter too.
What it changes, and what the tests assert about it:
* LeNet-5 and the LSTM tagger: nothing to fold; MACs and FLOPs equal.
* ResNet-small: eval-mode export folds each BatchNorm into the conv before it (``do_constant_folding``):
  MACs equal; FLOPs lower by each BN's 4N + 2C (running statistics, scale, shift) less the N of the
  bias add the folded conv gains, i.e. 3N + 2C per BN.
* The transformer encoder: the fused attention kernel decomposes into MatMul, Softmax and Mul nodes
  (same MACs, same per-element costs), plus the scale factor computed on 0-d tensors (``Sqrt``,
  ``Div``), which torch's formula folds into the kernel: FLOPs higher by exactly those scalar ops.
"""
from __future__ import annotations

import io
import warnings

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from deeplite_like import profiler_for, zoo  # noqa: E402
from deeplite_like.backends.onnx import count_ops  # noqa: E402
from deeplite_like.backends.torch import count_ops as torch_count_ops  # noqa: E402


def exported(name: str, batch: int = 2, dynamic_batch: bool = False) -> tuple[torch.nn.Module, torch.Tensor, bytes]:
    entry = zoo.get(name)
    model, x = entry.build(), entry.example_input(batch)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(model, (x,), buffer, dynamo=False, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}} if dynamic_batch else None)
    return model, x, buffer.getvalue()


def test_lenet5_counts_the_live_models_macs_flops_and_modules():
    model, x, data = exported("lenet5")
    onnx_count, torch_count = count_ops(data), torch_count_ops(model, x)
    # docs/zoo.rst: 416,520 MACs per sample (conv1 117,600 + conv2 240,000 + fc 48,000 + 10,080 + 840), batch 2.
    assert onnx_count.macs == torch_count.macs == 2 * 416_520
    assert onnx_count.flops == torch_count.flops
    for module in ("features.0", "features.3", "classifier.1", "classifier.3", "classifier.5"):
        assert onnx_count.by_module[module].macs == torch_count.by_module[module].macs, module
    assert onnx_count.untracked == {} and onnx_count.batch_size == 2


def test_symbolic_batch_is_bound_by_name():
    _, _, data = exported("lenet5", dynamic_batch=True)
    # the same 416,520 MACs per sample, at batch 8
    assert count_ops(data, batch=8).macs == 8 * 416_520


def test_resnet_small_macs_equal_and_folded_batch_norm_explains_the_flops():
    model, x, data = exported("resnet_small")
    onnx_count, torch_count = count_ops(data), torch_count_ops(model, x)
    assert onnx_count.macs == torch_count.macs
    # each folded BN: torch prices 2N + 2C + N + N, the folded conv's bias add N: difference 3N + 2C
    sizes = []
    hooks = [m.register_forward_hook(lambda m, i, o: sizes.append((o.numel(), o.shape[1])))
             for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    assert torch_count.flops - onnx_count.flops == sum(3 * n + 2 * c for n, c in sizes)
    assert onnx_count.untracked == {}


def test_transformer_encoder_macs_equal_attention_decomposed():
    model, x, data = exported("transformer_encoder")
    onnx_count, torch_count = count_ops(data), torch_count_ops(model, x)
    assert onnx_count.macs == torch_count.macs
    scale_ops = onnx_count.by_operator["Sqrt"].flops + onnx_count.by_operator["Div"].flops
    assert onnx_count.flops - torch_count.flops == scale_ops
    assert scale_ops == onnx_count.by_operator["Sqrt"].calls + onnx_count.by_operator["Div"].calls  # 1 each: 0-d
    assert onnx_count.untracked == {}


def test_lstm_tagger_counts_the_fused_lstm_the_same():
    model, x, data = exported("lstm_tagger")
    onnx_count, torch_count = count_ops(data), torch_count_ops(model, x)
    assert (onnx_count.macs, onnx_count.flops) == (torch_count.macs, torch_count.flops)
    assert onnx_count.by_module["lstm"].macs == torch_count.by_module["lstm"].macs


def test_onnx_profiler_through_profiler_for(tmp_path):
    from deeplite_like.backends.onnx import OnnxProfiler

    model, x, data = exported("lenet5")
    path = tmp_path / "lenet5.onnx"
    path.write_bytes(data)
    profiler = profiler_for(str(path), name="lenet5.onnx")
    assert type(profiler).__name__ == "OnnxProfiler"
    profiler.compute_network_status(min_run_time=0.02)
    status = profiler.status_to_dict()
    assert status["macs"] == 2 * 416_520
    # 61,706 float32 parameters (docs/zoo.rst), 4 bytes each: 246,824 bytes
    assert (status["total_params"], status["model_size"]) == (61_706, 4 * 61_706)
    proto = onnx.load_model_from_string(data)
    before = proto.SerializeToString()
    OnnxProfiler(proto).compute_network_status(min_run_time=0.02)
    assert proto.SerializeToString() == before  # the user's proto is never changed
    timing = profiler.get_status("execution_time")
    assert timing.get_value() > 0 and timing.details["num_threads"] == 1
    assert "CPUExecutionProvider: 1 intra-op thread" in timing.details["threads_reason"]


def test_int8_exports_count_the_float_models_macs(tmp_path):
    """onnxruntime's quantizers, the three forms: static QDQ (QuantizeLinear/DequantizeLinear around float
    Conv/Gemm), static QOperator (QLinearConv, com.microsoft.QGemm: onnx cannot infer QGemm's shapes, so they
    come from one ONNX Runtime run) and dynamic (ConvInteger, MatMulInteger, DynamicQuantizeLinear)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static

    model, x, data = exported("lenet5")
    path = tmp_path / "lenet5.onnx"
    path.write_bytes(data)

    class OneBatch(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"input": x.numpy()}])

        def get_next(self):
            return next(self.batches, None)

    float_count = count_ops(path)
    forms = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the quantizer's advice to prefer QDQ on x64
        for form in (QuantFormat.QDQ, QuantFormat.QOperator):
            forms[form.name] = tmp_path / f"lenet5_{form.name}.onnx"
            quantize_static(str(path), str(forms[form.name]), OneBatch(), quant_format=form)
        forms["dynamic"] = tmp_path / "lenet5_dynamic.onnx"
        quantize_dynamic(str(path), str(forms["dynamic"]))
    for form, quantized in forms.items():
        counted = count_ops(quantized)
        assert (form, counted.macs, counted.untracked) == (form, 2 * 416_520, {})  # the float model's MACs
    assert "com.microsoft.QGemm" in count_ops(forms["QOperator"]).by_operator
    assert "ConvInteger" in count_ops(forms["dynamic"]).by_operator
    assert float_count.macs == 2 * 416_520


@pytest.mark.slow  # about 7 s: torch.export and onnxscript's optimiser
def test_dynamo_exporter_counts_the_same_and_names_modules_from_metadata():
    """The dynamo exporter names nodes ``node_conv2d`` and writes the module scopes into metadata."""
    model = zoo.get("lenet5").build()
    x = zoo.get("lenet5").example_input(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, (x,), dynamo=True, verbose=False)
    counted, live = count_ops(program.model_proto), torch_count_ops(model, x)
    assert (counted.macs, counted.flops) == (live.macs, live.flops)
    for module in ("features.0", "features.3", "classifier.1", "classifier.3", "classifier.5"):
        assert counted.by_module[module].macs == live.by_module[module].macs, module


def test_torch_teacher_and_its_onnx_file_compare_in_one_report():
    from deeplite_like.backends.onnx import OnnxProfiler
    from deeplite_like.backends.torch import TorchProfiler

    model, x, data = exported("lenet5", batch=4, dynamic_batch=True)
    teacher = TorchProfiler(model, {"test": [(x, torch.zeros(4))]}, name="torch")
    student = OnnxProfiler(data, {"test": [(x.numpy(), None)]}, name="onnx")
    report = teacher.compare(student, batch_size=2, min_run_time=0.02)
    # batch_size=2 binds the file's symbolic batch: 2 x 416,520 MACs on both sides
    assert student.status_get("macs") == teacher.status_get("macs") == 2 * 416_520
    assert student.get_status("macs").options["batch_size"] == 2
    assert "Computational complexity" in report.to_text()
    fixed = OnnxProfiler(exported("lenet5")[2], name="fixed")
    with pytest.raises(ValueError, match="input 'input' has a fixed batch of 2 in this file"):
        fixed.compute_status("macs", batch_size=1)
