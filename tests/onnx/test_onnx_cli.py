"""``deeplite-like profile model.onnx`` and ``compare zoo:lenet5 lenet5.onnx``, run in-process (``cli`` fixture)."""
from __future__ import annotations

import json
import re

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.cli.conftest import cli  # noqa: E402,F401  (the fixture)


def conv_file(path) -> None:
    """input[N, 3, H, W] (all symbolic but C) -> Conv 4@3x3, pads 1, bias -> GlobalAveragePool -> output."""
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "W", "B"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
         helper.make_node("GlobalAveragePool", ["c"], ["output"], name="/pool/GlobalAveragePool")],
        "conv", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 4, 1, 1])],
        initializer=[numpy_helper.from_array(np.ones((4, 3, 3, 3), dtype=np.float32), "W"),
                     numpy_helper.from_array(np.zeros(4, dtype=np.float32), "B")])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def metric(report: dict, key: str) -> dict:
    return next(m for m in report["metrics"] if m["key"] == key)


def test_profile_onnx_file_with_a_named_input_shape(cli, tmp_path):
    path = tmp_path / "model.onnx"
    conv_file(path)
    code, out, err = cli("profile", str(path), "--input-shape", "input=1x3x224x224", "--metrics", "macs,size,memory",
                         "--format", "json", "--no-progress")
    assert code == 0, err
    report = json.loads(out)
    assert report["backend"] == "onnx"
    values = {m["key"]: m["value"] for m in report["status"]["metrics"]}
    # Conv: 4 x 224 x 224 outputs (pads 1 keep 224) x (3 x 3 x 3) = 200,704 x 27 = 5,419,008 MACs
    assert values["macs"] == 5_419_008
    # W 4x3x3x3 = 108 + B 4 = 112 float32 = 448 bytes
    assert values["model_size"] == 448
    # input 3 x 224 x 224 x 4 B = 602,112 (held for the run); conv out 4 x 224 x 224 x 4 B = 802,816;
    # pool out 4 x 4 B = 16. The conv's step holds input + conv out; the pool's step all three: the peak.
    assert values["peak_activation_memory"] == 602_112 + 802_816 + 16
    # The planned arena: conv out (largest) at 0, the input above it, the pool's 16 B output rounded to 64 above
    # both (all three live at the pool): 802,816 + 602,112 + 64 (both are multiples of 64 already)
    assert values["activation_arena"] == 802_816 + 602_112 + 64


def test_open_dimensions_without_a_shape_are_a_usage_error(cli, tmp_path):
    path = tmp_path / "model.onnx"
    conv_file(path)
    code, _, err = cli("profile", str(path), "--no-progress")
    assert code == 2
    assert "input[0] ('batch')" in err and "--input-shape input=SHAPE" in err


def test_unknown_input_name_is_a_usage_error(cli, tmp_path):
    path = tmp_path / "model.onnx"
    conv_file(path)
    code, _, err = cli("profile", str(path), "--input-shape", "image=1x3x8x8", "--no-progress")
    assert code == 2
    assert "has no input named 'image'" in err and "its inputs are: input" in err


@pytest.mark.parametrize("content, kind", [
    (b"", "an empty file"),
    (b"this is a text file, not a protobuf\n", "a text file"),
    (bytes(range(256)) * 8, "a binary file"),
])
def test_malformed_onnx_file_is_a_clear_usage_error(cli, tmp_path, content, kind):
    path = tmp_path / "broken.onnx"
    path.write_bytes(content)
    code, out, err = cli("profile", str(path), "--input-shape", "1x3x8x8", "--no-progress")
    assert code == 2 and out == ""
    assert f"'{path}' is not a loadable ONNX model: it is {kind}" in err
    assert "Traceback" not in err


def test_truncated_onnx_file_is_a_clear_usage_error(cli, tmp_path):
    whole = tmp_path / "whole.onnx"
    conv_file(whole)
    path = tmp_path / "truncated.onnx"
    path.write_bytes(whole.read_bytes()[:200])  # cut inside the weights
    code, _, err = cli("profile", str(path), "--input-shape", "1x3x8x8", "--no-progress")
    assert code == 2
    assert "is not a loadable ONNX model" in err and "Traceback" not in err


def test_named_shape_for_a_torch_model_is_refused(cli):
    code, _, err = cli("profile", "zoo:lenet5", "--input-shape", "input=1x1x32x32", "--no-progress")
    assert code == 2 and "names an ONNX graph input" in err


def test_compare_zoo_lenet5_with_its_onnx_export(cli, tmp_path):
    from tests.onnx.test_onnx_export import exported

    _, _, data = exported("lenet5", batch=1)
    path = tmp_path / "lenet5.onnx"
    path.write_bytes(data)
    code, out, err = cli("compare", "zoo:lenet5", str(path), "--metrics", "macs,size", "--format", "json",
                         "--no-progress")
    assert code == 0, err
    report = json.loads(out)["compare"]
    assert [m["backend"] for m in report["models"]] == ["torch", "onnx"]
    macs = {name: v["value"] for name, v in metric(report, "macs")["values"].items()}
    size = {name: v["value"] for name, v in metric(report, "model_size")["values"].items()}
    # docs/zoo.rst: 416,520 MACs per sample; 61,706 float32 parameters = 246,824 bytes, in both
    assert macs == {"lenet5": 416_520, "lenet5.onnx": 416_520}
    assert size == {"lenet5": 246_824, "lenet5.onnx": 246_824}
    assert metric(report, "macs")["changes"]["lenet5.onnx"]["verdict"] == "same"


def test_batch_size_resizes_the_named_shape_and_aliases_name_what_onnx_has(cli, tmp_path):
    from tests.onnx.test_onnx_export import exported

    _, _, data = exported("lenet5", batch=1, dynamic_batch=True)
    path = tmp_path / "lenet5.onnx"
    path.write_bytes(data)
    code, out, err = cli("profile", str(path), "--input-shape", "input=2x1x32x32", "--batch-size", "4",
                         "--metrics", "macs,memory,params", "--format", "json", "--no-progress")
    assert code == 0, err
    values = {m["key"]: m["value"] for m in json.loads(out)["status"]["metrics"]}
    # 416,520 MACs per sample (docs/zoo.rst) x 4; peak per sample (tests/onnx/test_onnx_memory.py, at the first
    # Relu): input 4,096 + conv1 out 18,816 + Relu out 18,816 = 41,728 B, x 4 = 166,912 B
    assert values["macs"] == 4 * 416_520 and values["peak_activation_memory"] == 4 * 41_728
    # 'params' is total_params only: an ONNX file has no trainable flag; 61,706 (docs/zoo.rst)
    assert values["total_params"] == 61_706 and "trainable_params" not in values
    code, _, err = cli("profile", str(path), "--input-shape", "input=1x1x32x32", "--metrics", "layers",
                       "--no-progress")
    assert code == 2 and "this model's backend computes none of layerwise_summary" in err


def test_fuzzed_onnx_files_get_a_clear_error_never_a_traceback(cli, tmp_path):
    """40 seeded corruptions of a valid file (bytes overwritten, or the file cut): each run ends with a report
    (exit 0: the flip hit a weight's value), or one ``deeplite-like: error:`` line and a hint (exit 2 when the
    file cannot be loaded, 1 when a loaded graph cannot be profiled); never a traceback."""
    whole = tmp_path / "whole.onnx"
    conv_file(whole)
    data = whole.read_bytes()
    rng = np.random.default_rng(0)
    codes = set()
    for i in range(40):
        corrupted = bytearray(data)
        if i % 4 == 3:
            corrupted = corrupted[:int(rng.integers(1, len(data)))]
        else:
            for at in rng.integers(0, len(data), size=4):
                corrupted[at] = int(rng.integers(0, 256))
        path = tmp_path / f"fuzzed_{i}.onnx"
        path.write_bytes(bytes(corrupted))
        code, out, err = cli("profile", str(path), "--input-shape", "1x3x8x8", "--metrics", "macs,memory",
                             "--no-progress")
        codes.add(code)
        assert code in (0, 1, 2), (i, code, err)
        assert "Traceback" not in err, (i, err)
        if code:
            # (a warning of what was counted before the failure may come first, one line each)
            lines = [line for line in err.splitlines() if line.startswith("deeplite-like: ")]
            assert lines[-1].startswith("deeplite-like: error: ") and out == "", (i, err)
            assert all(re.match(r"deeplite-like: \w+Warning: ", line) for line in lines[:-1]), (i, err)
    assert 2 in codes  # some corruptions are refused at loading


def test_device_model_prices_an_onnx_file(cli, tmp_path):
    path = tmp_path / "model.onnx"
    conv_file(path)
    code, out, err = cli("profile", str(path), "--input-shape", "input=1x3x8x8", "--metrics", "macs",
                         "--device-model", "rpi5", "--format", "json", "--no-progress")
    assert code == 0, err
    roofline = json.loads(out)["roofline"]
    # Conv reads input 3x8x8 (768 bytes) + W 4x3x3x3 (432) + B (16) and writes 4x8x8 (1,024): 2,240;
    # GlobalAveragePool reads 1,024 and writes 4 (16): 1,040
    assert roofline["by_operator"]["Conv"]["bytes"] == 2_240
    assert roofline["by_operator"]["GlobalAveragePool"]["bytes"] == 1_040
    assert roofline["device"]["name"] == "Raspberry Pi 5"


def test_inputs_file_binds_the_symbolic_dimensions(cli, tmp_path):
    path = tmp_path / "model.onnx"
    conv_file(path)
    np.savez(tmp_path / "x.npz", input=np.zeros((2, 3, 8, 8), np.float32))
    code, out, err = cli("profile", str(path), "--inputs", str(tmp_path / "x.npz"), "--metrics", "macs",
                         "--format", "json", "--no-progress")
    assert code == 0, err
    values = {m["key"]: m["value"] for m in json.loads(out)["status"]["metrics"]}
    # Conv on (2, 3, 8, 8), pads 1: 2 x 4 x 8 x 8 = 512 outputs x 27 = 13,824 MACs
    assert values["macs"] == 13_824
    code, _, err = cli("profile", str(path), "--inputs", str(tmp_path / "x.npz"), "--batch-size", "4", "--no-progress")
    assert code == 2 and "the arrays fix the batch" in err


def test_device_cuda_times_an_onnx_file_with_the_cuda_provider_or_says_why_not(cli, tmp_path):
    import onnxruntime as ort

    path = tmp_path / "model.onnx"
    conv_file(path)
    code, out, err = cli("profile", str(path), "--input-shape", "input=1x3x8x8", "--device", "cuda",
                         "--metrics", "execution_time", "--format", "json", "--no-progress")
    if "CUDAExecutionProvider" in ort.get_available_providers():  # onnxruntime-gpu on a GPU machine
        assert code == 0, err
        assert metric(json.loads(out), "execution_time")["details"]["provider"] == "CUDAExecutionProvider"
    else:  # checked before the file is read: the providers this onnxruntime has are named, not torch's CUDA
        assert code == 2
        assert "no CUDAExecutionProvider" in err and "CPUExecutionProvider" in err and "onnxruntime-gpu" in err


def test_the_api_refuses_a_device_onnx_runtime_cannot_time():
    import onnxruntime as ort

    from deeplite_like.backends.onnx import OnnxProfiler

    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])]), opset_imports=[helper.make_opsetid("", 17)])
    profiler = OnnxProfiler(model)
    with pytest.raises(ValueError, match="'cpu' or 'cuda'"):
        profiler.compute_network_status(device="tpu")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        with pytest.raises(ValueError, match="no CUDAExecutionProvider"):
            profiler.compute_network_status(device="cuda")
    status = profiler.compute_network_status(min_run_time=0.01, device="cpu")
    assert status["execution_time"] > 0


def test_a_warning_is_one_line_naming_its_kind(cli, tmp_path):
    """Warnings on the command line are one line each (``deeplite-like: <Kind>Warning: ...``), not Python's
    ``file.py:line:`` form with the library's source line; the count goes on (shapes only: seeded inputs)."""
    import onnx

    from tests.onnx.test_onnx_formulas import _positive_rows_model

    path = tmp_path / "rows.onnx"
    onnx.save(_positive_rows_model(), path)
    code, out, err = cli("profile", str(path), "--input-shape", "x=4x16", "--metrics", "macs", "--no-progress")
    assert code == 0 and "Computational complexity" in out
    warned = [line for line in err.splitlines() if "Warning" in line]
    assert warned == [line for line in warned if line.startswith("deeplite-like: SeededShapesWarning: the output "
                                                                  "shapes of NonZero 'rows' depend on the input")]
    assert len(warned) == 1 and ".py:" not in err
