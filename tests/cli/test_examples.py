"""The examples in ``examples/`` run as documented (with small sizes, to stay fast)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _rows(path: Path) -> dict:
    return {row["key"]: row for row in json.loads(path.read_text())["metrics"]}


@pytest.mark.slow
def test_teacher_student_torch(tmp_path):
    out = tmp_path / "teacher_student.json"
    run_example("teacher_student_torch.py", "--epochs", "1", "--samples", "64", "--min-run-time", "0.01",
                "--output", str(out))
    rows = _rows(out)
    # the script itself checks the teacher's MACs against the hand-derived 3,125,504 per image.
    assert rows["macs"]["values"]["teacher"]["value"] == 3_125_504
    assert rows["macs"]["changes"]["student"]["verdict"] == "better"
    accuracy = rows["accuracy"]
    assert accuracy["unit"] == "%" and all(0 <= accuracy["values"][m]["value"] <= 100 for m in ("teacher", "student"))
    assert accuracy["changes"]["student"]["text"].endswith("pts") or accuracy["changes"]["student"]["text"] == "same"


@pytest.mark.slow
def test_custom_metric(tmp_path):
    out = tmp_path / "custom.json"
    run_example("custom_metric.py", "--min-run-time", "0.01", "--output", str(out))
    rows = _rows(out)
    # energy by hand (module docstring): dense 1,553,292.8 pJ; pruned on zero-skipping hardware 790,086.4 pJ.
    assert abs(rows["energy"]["values"]["dense"]["value"] - 1_553_292.8e-12) < 1e-18
    assert abs(rows["energy"]["values"]["pruned"]["value"] - 790_086.4e-12) < 1e-18
    assert rows["energy"]["changes"]["pruned"]["text"] == "1.97x less"  # 1,553,292.8 / 790,086.4 = 1.966
    assert rows["sparsity"]["changes"]["pruned"]["text"] == "+50.00 pts"


@pytest.mark.slow
def test_batch_size_sweep(tmp_path):
    page, svg = tmp_path / "sweep.html", tmp_path / "throughput.svg"
    result = run_example("batch_size_sweep.py", "--model", "lenet5", "--batch-sizes", "1,2,4", "--min-run-time",
                         "0.01", "--output", str(page), "--svg", str(svg))
    # LeNet-5: 416,520 MACs per sample (test_loading derives it), so 4 samples cost 1,666,080.
    assert "1,666,080" in result.stdout
    html = page.read_text()
    assert html.count('class="chart line-chart"') == 2 and html.count('class="point"') == 6
    drawing = svg.read_text()
    assert drawing.startswith('<?xml version="1.0"') and 'xmlns="http://www.w3.org/2000/svg"' in drawing
    assert drawing.count('class="point"') == 3


@pytest.mark.slow  # (about 7 s here)
def test_hf_transformers_runs_or_skips_cleanly():
    result = run_example("hf_transformers.py", "--min-run-time", "0.01")
    if importlib.util.find_spec("transformers") is None:
        assert result.stdout.startswith("skipped: this example needs Hugging Face transformers")
        assert "pip install transformers" in result.stdout
    else:  # the script checks the MACs against the hand-derived 2,236,672 and 1,122,560
        assert "Comparison: bert-2-layers (torch, reference) vs bert-1-layer (torch)" in result.stdout


@pytest.mark.slow
def test_teacher_student_keras(tmp_path):
    pytest.importorskip("keras")
    out = tmp_path / "teacher_student_keras.json"
    run_example("teacher_student_keras.py", "--epochs", "1", "--samples", "64", "--min-run-time", "0.01",
                "--output", str(out))
    rows = _rows(out)
    # hand-derived in the example's docstring: 1,401,088 and 129,088 MACs per 16x16 image
    assert rows["macs"]["values"]["teacher"]["value"] == 1_401_088
    assert rows["macs"]["values"]["student"]["value"] == 129_088
    assert rows["macs"]["changes"]["student"]["text"] == "10.85x fewer"  # 1,401,088 / 129,088 = 10.854
    assert rows["accuracy"]["unit"] == "%"


@pytest.mark.slow
def test_tflite_example_profiles_the_float_and_int8_files(tmp_path):
    """deeplite's tflite_example.py, ported (examples/tflite_example.py): the script itself checks the file's
    MACs against the live Keras model's and the hand count."""
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("tensorflow")
    figures = {}
    for kind, flags in (("float", ()), ("int8", ("--int8",))):
        out = tmp_path / f"{kind}.json"
        run_example("tflite_example.py", *flags, "--samples", "256", "--epochs", "3", "--output", str(out))
        figures[kind] = json.loads(out.read_text())
    # MACs per image: conv1 32*32*8 * 3*3*3 = 221,184 + conv2 16*16*16 * 3*3*8 = 294,912 + fc 16*10 = 160
    # FLOPs: 2 x 516,256 + conv biases and fused ReLUs (8,192 x 2 + 4,096 x 2) + max pool 16*16*8 outputs x 4
    # (8,192) + the mean of 4,096 inputs into 16 (4,112) + the fc bias 10 = 1,069,402
    for kind in ("float", "int8"):
        assert (figures[kind]["macs"], figures[kind]["flops"]) == (516_256, 1_069_402)
        # params: conv1 3*3*3*8 + 8 = 224, conv2 3*3*8*16 + 16 = 1,168, fc 16*10 + 10 = 170
        assert figures[kind]["total_params"] == 1_562
        assert 0 <= figures[kind]["accuracy"] <= 100
    # float32: 1,562 x 4 = 6,248 B; int8: 1,528 weights x 1 + 34 int32 biases x 4 + a scale (4 B) and a zero
    # point (8 B) per output channel for each weight and bias tensor: 2 x 34 x 12 = 816 -> 2,480 B
    assert (figures["float"]["model_size"], figures["int8"]["model_size"]) == (6_248, 2_480)
    assert figures["float"]["accuracy"] > 20  # the colour task is learnt beyond chance (10 %)
