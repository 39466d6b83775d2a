"""``deeplite-like profile model.tflite`` and ``compare zoo:lenet5 model.tflite``, run in-process (``cli`` fixture)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from deeplite_like.backends.tflite.graph import load_model  # noqa: E402
from tests.cli.conftest import cli  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slow  # the session fixtures convert LeNet-5 (seconds)


def metric(report: dict, key: str) -> dict:
    return next(m for m in report["metrics"] if m["key"] == key)


def test_profile_an_int8_tflite_file(cli, tmp_path, lenet5_int8):
    path = tmp_path / "lenet5_int8.tflite"
    path.write_bytes(lenet5_int8)
    code, out, err = cli("profile", str(path), "--metrics", "macs,size,memory", "--format", "json", "--no-progress")
    assert code == 0, err
    report = json.loads(out)
    assert report["backend"] == "tflite"
    values = {m["key"]: m["value"] for m in report["status"]["metrics"]}
    # tests/tflite/test_tflite_lenet5.py: 416,520 MACs; 61,470 int8 + 944 int32 + 5,664 quantization bytes; peak 6,904 B
    assert values["macs"] == 416_520 and values["model_size"] == 68_078 and values["peak_activation_memory"] == 6_904


def test_compare_zoo_lenet5_with_its_tflite_file(cli, tmp_path, lenet5_float):
    path = tmp_path / "lenet5.tflite"
    path.write_bytes(lenet5_float)
    code, out, err = cli("compare", "zoo:lenet5", str(path), "--metrics", "macs,size", "--format", "json",
                         "--no-progress")
    assert code == 0, err
    report = json.loads(out)["compare"]
    assert [m["backend"] for m in report["models"]] == ["torch", "tflite"]
    macs = {name: v["value"] for name, v in metric(report, "macs")["values"].items()}
    size = {name: v["value"] for name, v in metric(report, "model_size")["values"].items()}
    # docs/zoo.rst: 416,520 MACs; 61,706 float32 parameters = 246,824 bytes, in both
    assert macs == {"lenet5": 416_520, "lenet5.tflite": 416_520}
    assert size == {"lenet5": 246_824, "lenet5.tflite": 246_824}


def test_input_shape_batch_size_and_inputs_file_bind_the_open_batch(cli, tmp_path, lenet5_float):
    """The converter leaves the batch open (signature -1x32x32x1): a shape, a batch size or an array binds
    it, and MACs scale with it: 416,520 per sample (tests/tflite/test_tflite_lenet5.py)."""
    path = tmp_path / "lenet5.tflite"
    path.write_bytes(lenet5_float)

    def macs(*argv):
        code, out, err = cli("profile", str(path), *argv, "--metrics", "macs", "--format", "json", "--no-progress")
        assert code == 0, err
        report = json.loads(out)
        return next(m["value"] for m in report["status"]["metrics"] if m["key"] == "macs")

    assert macs("--input-shape", "4x32x32x1") == 4 * 416_520  # 1,666,080
    name = load_model(lenet5_float).inputs[0].name  # (Keras numbers its tensors per process: read the file's)
    assert macs("--input-shape", f"{name}=2x32x32x1") == 2 * 416_520
    assert macs("--batch-size", "3") == 3 * 416_520
    np.save(tmp_path / "x.npy", np.zeros((5, 32, 32, 1), np.float32))
    assert macs("--inputs", str(tmp_path / "x.npy")) == 5 * 416_520


def test_a_shape_the_file_does_not_allow_names_the_input(cli, tmp_path, lenet5_float):
    path = tmp_path / "lenet5.tflite"
    path.write_bytes(lenet5_float)
    name = load_model(lenet5_float).inputs[0].name  # serving_default_keras_tensor[_N]:0, N per process
    code, out, err = cli("profile", str(path), "--input-shape", "1x30x30x1", "--no-progress")
    assert code == 2 and out == ""
    assert f"input '{name}'" in err and "dimension 1 is fixed at 32 in the file, got 30" in err
    code, _, err = cli("profile", str(path), "--input-shape", "x=1x32x32x1", "--no-progress")
    assert code == 2 and "has no input named 'x'" in err and name in err


def test_fuzzed_tflite_files_get_a_clear_error_never_a_traceback(cli, tmp_path, lenet5_float):
    """30 seeded corruptions (bytes overwritten, or the file cut): a report, or one ``deeplite-like: error:``
    line (exit 2 when it cannot be loaded, 1 when it cannot be profiled); never a traceback."""
    rng = np.random.default_rng(0)
    codes = set()
    for i in range(30):
        corrupted = bytearray(lenet5_float)
        if i % 3 == 2:
            corrupted = corrupted[:int(rng.integers(1, len(corrupted)))]
        else:
            for at in rng.integers(0, len(corrupted), size=4):
                corrupted[at] = int(rng.integers(0, 256))
        path = tmp_path / f"fuzzed_{i}.tflite"
        path.write_bytes(bytes(corrupted))
        code, out, err = cli("profile", str(path), "--metrics", "macs,size,memory", "--no-progress")
        codes.add(code)
        assert code in (0, 1, 2), (i, code, err)
        assert "Traceback" not in err, (i, err)
        if code:
            # (a warning of what was counted before the failure may come first, one line each)
            lines = [line for line in err.splitlines() if line.startswith("deeplite-like: ")]
            assert lines[-1].startswith("deeplite-like: error: ") and out == "", (i, err)
            assert all(re.match(r"deeplite-like: \w+Warning: ", line) for line in lines[:-1]), (i, err)
    assert 2 in codes  # some corruptions are refused at loading


def test_a_text_file_named_tflite_is_a_usage_error(cli, tmp_path):
    path = tmp_path / "notes.tflite"
    path.write_text("hello, not a model\n")
    code, out, err = cli("profile", str(path), "--no-progress")
    assert code == 2 and out == "" and "is not a loadable TFLite model" in err and "TFL3" in err


def test_device_model_prices_a_tflite_file(cli, tmp_path, lenet5_int8):
    path = tmp_path / "lenet5_int8.tflite"
    path.write_bytes(lenet5_int8)
    code, out, err = cli("profile", str(path), "--metrics", "macs", "--device-model", "orin", "--format", "json",
                         "--no-progress")
    assert code == 0, err
    roofline = json.loads(out)["roofline"]
    # int8 operators priced at the int8 peak; fc1 reads 48,880 bytes and writes 120
    # (tests/tflite/test_tflite_lenet5.py derives them)
    assert roofline["main_dtype"] == "int8"
    assert roofline["by_operator"]["FULLY_CONNECTED"]["calls"] == 3
    assert roofline["device"]["name"] == "Jetson AGX Orin"
