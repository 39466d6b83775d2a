"""``profile``, ``compare`` and ``demo``: every format, ``--output``, the options, and their errors.

Hand-derived costs used below:
* ``tiny`` = Linear(4, 3), batch 2: MACs 2*4*3 = 24, FLOPs 2*24 + 6 bias adds = 54, params 15.
* LeNet-5, one sample: 416,520 MACs (conv1 117,600 + conv2 240,000 + fc 58,920; see test_loading).
"""
from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deeplite_like.cli.progress import Progress, track

ROOT = Path(__file__).resolve().parents[2]
TINY = "tests.cli.fixture_models:tiny"
MLP = "tests.cli.fixture_models:mlp"
FAST = ("--min-run-time", "0.01", "--no-progress")
COUNTS = ("--metrics", "macs,flops,params,layers")


def _values(status: dict) -> dict:
    return {m["key"]: m["value"] for m in status["metrics"]}


# ------------------------------------------------------------------------------ formats
def test_table_format_shows_the_metrics_and_the_layers(cli):
    code, out, err = cli("profile", MLP, "--input-shape", "2,4", *COUNTS, *FAST)
    # mlp(hidden=5) on a batch of 2: Linear(4, 5) 2*4*5 = 40 MACs, Linear(5, 2) 2*5*2 = 20 -> 60.
    assert code == 0 and err == ""
    assert re.search(r"\| Computational complexity\s+\|\s+60\s+\| MACs", out)
    assert "Per-layer summary: Sequential" in out
    assert re.search(r"\| 0\s+\| Linear\s+\| 2x4\s+\| 2x5\s+\|\s+25 \|\s+40 \|", out)  # 4*5 + 5 params


def test_json_format(cli):
    code, out, _ = cli("profile", TINY, "--input-shape", "2,4", *COUNTS, "--format", "json", *FAST)
    data = json.loads(out)
    assert code == 0 and data["report"] == "profile" and data["model"] == TINY
    assert _values(data["status"]) == {"macs": 24, "flops": 54, "total_params": 15, "trainable_params": 15}
    assert [row["module"] for row in data["layers"]["rows"]] == [""]  # a Linear has no children


def test_csv_format_and_layers_beside_it(cli, tmp_path):
    code, out, _ = cli("profile", TINY, "--input-shape", "2,4", *COUNTS, "--format", "csv", *FAST)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and {r["key"]: int(r["value"]) for r in rows} == {"macs": 24, "flops": 54, "total_params": 15,
                                                                       "trainable_params": 15}
    target = tmp_path / "tiny.csv"
    code, out, err = cli("profile", TINY, "--input-shape", "2,4", *COUNTS, "--output", str(target), *FAST)
    layers = list(csv.DictReader(io.StringIO((tmp_path / "tiny.layers.csv").read_text())))
    assert code == 0 and out == "" and f"wrote {target}, {tmp_path / 'tiny.layers.csv'}" in err
    assert [(r["module"], int(r["macs"])) for r in layers] == [("", 24)]


def test_markdown_format(cli):
    code, out, _ = cli("profile", TINY, "--input-shape", "2,4", *COUNTS, "--format", "markdown", *FAST)
    lines = out.splitlines()
    assert code == 0 and lines[0] == "**tiny (backend: torch)**"
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("|")]
    assert ["Computational complexity", "24", "MACs"] in cells
    assert any(line.startswith("| (model) | Linear |") for line in lines)


def test_html_format_is_one_self_contained_page(cli, tmp_path):
    target = tmp_path / "report.html"
    code, out, err = cli("profile", MLP, "--input-shape", "2,4", *COUNTS, "-o", str(target), *FAST)
    page = target.read_text()
    assert code == 0 and page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count('class="chart bar-chart"') == 3  # where the MACs, the parameters, the output memory go
    assert '<table class="sortable">' in page and "<script>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|@import|url\(""", page)


def test_format_and_output_must_agree(cli, tmp_path):
    code, _, err = cli("profile", TINY, "--format", "json", "-o", str(tmp_path / "x.html"), *FAST)
    assert code == 2 and "--format json does not match --output" in err
    code, _, err = cli("profile", TINY, "-o", str(tmp_path / "x.xlsx"), *FAST)
    assert code == 2 and "cannot tell the format of --output" in err
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "-o", str(tmp_path / "no" / "x.json"), *COUNTS, *FAST)
    assert code == 2 and "does not exist" in err


# ------------------------------------------------------------------------------ options
def test_depth_and_top_select_layer_rows(cli):
    # mlp(hidden=5, depth=2) on a batch of 2: "0" Linear(4,5) 40 MACs, "2" Linear(5,5) 50, "4" Linear(5,2) 20.
    argv = ("profile", MLP, "--model-args", '{"depth": 2}', "--input-shape", "2,4", *COUNTS, "--format", "json", *FAST)
    code, out, _ = cli(*argv, "--top", "2")
    rows = json.loads(out)["layers"]["rows"]
    assert code == 0 and [(r["module"], r["macs"]) for r in rows] == [("", 110), ("2", 50), ("0", 40)]
    code, out, _ = cli(*argv, "--depth", "0")
    assert [r["module"] for r in json.loads(out)["layers"]["rows"]] == [""]


def test_backward_counts_a_training_step(cli):
    # forward: 24 MACs, 54 FLOPs; loss = sum of the 6 outputs: 6 FLOPs; backward (input needs no
    # grad): grad_weight = grad_out^T @ x, 3*2*4 = 24 MACs = 48 FLOPs, grad_bias = sum over the
    # batch, 6 FLOPs. Total 48 MACs, 54 + 6 + 54 = 114 FLOPs.
    code, out, _ = cli("profile", TINY, "--input-shape", "2,4", "--backward", "--metrics", "macs,flops",
                       "--format", "json", *FAST)
    assert code == 0 and _values(json.loads(out)["status"]) == {"macs": 48, "flops": 114}


def test_batch_size_resizes_the_inputs(cli):
    code, out, _ = cli("profile", "zoo:lenet5", "--batch-size", "4", "--metrics", "macs", "--format", "json", *FAST)
    assert code == 0 and _values(json.loads(out)["status"]) == {"macs": 4 * 416_520}


@pytest.mark.slow  # (about 2 s here)
def test_meta_device_counts_without_running_and_refuses_timing(cli):
    code, out, _ = cli("profile", "zoo:lenet5", "--device", "meta", "--format", "json", *FAST)
    values = _values(json.loads(out)["status"])
    assert code == 0 and values["macs"] == 416_520 and "execution_time" not in values
    code, _, err = cli("profile", "zoo:lenet5", "--device", "meta", "--metrics", "time", *FAST)
    assert code == 2 and "nothing can be timed" in err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_a_usage_error(cli):
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--device", "cuda", *FAST)
    assert code == 2 and "sees no CUDA device" in err


def test_timing_metrics(cli):
    code, out, _ = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "time", "--format", "json", *FAST)
    values = _values(json.loads(out)["status"])
    assert code == 0 and set(values) == {"execution_time", "throughput"}
    assert values["throughput"] == pytest.approx(2 / values["execution_time"])  # batch of 2 / median seconds


def _time_details(out: str) -> dict:
    return next(m for m in json.loads(out)["status"]["metrics"] if m["key"] == "execution_time")["details"]


def test_num_threads_is_passed_and_reported(cli):
    timing = ("--input-shape", "2,4", "--metrics", "time", "--format", "json", *FAST)
    code, out, _ = cli("profile", TINY, *timing)
    details = _time_details(out)
    assert code == 0 and details["num_threads"] == 1 and details["threads_reason"] == ""  # the default: 1
    code, out, _ = cli("profile", TINY, *timing, "--num-threads", "2")
    assert code == 0 and _time_details(out)["num_threads"] == 2
    code, out, _ = cli("profile", TINY, *timing, "--num-threads", "auto")
    assert code == 0 and _time_details(out)["threads_reason"].startswith("num_threads='auto': ")
    # the forwards timing ran: at least 2 warm-ups and 5 measurements
    assert _time_details(out)["forwards"] >= 2 + 5 * _time_details(out)["number_per_run"]


def test_num_threads_is_an_option_of_compare_and_demo(cli):
    code, out, _ = cli("compare", TINY, MLP, "--input-shape", "2,4", "--metrics", "time", "--format", "json",
                       "--num-threads", "2", *FAST)
    found = re.findall(r'"num_threads": (\d+)', out)  # in each model's details, and in the options stated
    assert code == 0 and len(found) >= 2 and set(found) == {"2"}
    code, out, _ = cli("demo", "--metrics", "time", "--format", "json", "--num-threads", "2", *FAST)
    groups = {group["title"]: group["main"] for group in json.loads(out)["groups"]}
    assert code == 0 and _time_details(json.dumps({"status": groups["lenet5"]}))["num_threads"] == 2
    # a Keras model on TensorFlow keeps the threads TensorFlow started with (reported, not refused)
    keras_details = _time_details(json.dumps({"status": groups["lenet5_keras"]}))
    assert keras_details["compiled"] == "tf.function" and keras_details["num_threads"] >= 1


def test_num_threads_on_a_keras_model_is_a_note_not_an_error(cli):
    code, out, _ = cli("profile", "zoo:lenet5_keras", "--metrics", "time", "--format", "json", "--num-threads", "3",
                       *FAST)
    assert code == 0 and json.loads(out)["notes"] == [
        "--num-threads 3 does not apply to this Keras model: TensorFlow fixes its threads when it starts (the time "
        "says how many it used)"]


@pytest.mark.parametrize("value, message", [("0", "--num-threads must be >= 1, got 0"),
                                            ("x", "expected a whole number >= 1 or 'auto', got 'x'"),
                                            ("100000", "--num-threads=100000 is more than 4 threads per CPU")])
def test_num_threads_errors_exit_2(cli, value, message):
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--num-threads", value, *FAST)
    assert code == 2 and message in err


@pytest.mark.parametrize("argv, message", [
    (("profile", TINY, "--input-shape", "2,4", "--metrics", "macs,flopz"),
     "unknown metric 'flopz' (did you mean 'flops'?)"),
    (("profile", TINY, "--input-shape", "2,x"), "bad input shape '2,x'"),
    (("profile", TINY), "the input shape of this model is not known"),
    (("profile", TINY, "--inputs", "missing.pt"), "--inputs: no such file"),
])
def test_usage_errors(cli, argv, message):
    code, out, err = cli(*argv, *FAST)
    assert code == 2 and out == "" and message in err and "hint:" in err
    assert len(err.strip().splitlines()) == 2  # one line, one hint


@pytest.mark.parametrize("argv", [("profile",), ("profile", TINY, "--batch-size", "0"), ("profile", TINY, "--format", "pdf"),
                                  ("frobnicate",)])
def test_argparse_usage_errors_exit_2(cli, argv):
    code, _, err = cli(*argv)
    assert code == 2 and "usage: deeplite-like" in err


def test_wrong_input_shape_is_a_failure_with_a_hint(cli):
    code, _, err = cli("profile", "zoo:lenet5", "--input-shape", "1,3,32,32", "--metrics", "macs", *FAST)
    assert code == 1
    assert "profiling 'lenet5' failed while computing computational complexity" in err
    assert "expected input[1, 3, 32, 32] to have 1 channels" in err
    assert "hint: the model got inputs tuple(Tensor[float32, 1x3x32x32]); pass --input-shape or --inputs" in err


def test_inputs_files(cli, tmp_path):
    import numpy as np
    import torch

    torch.save((torch.ones(2, 4), torch.ones(2, 3)), tmp_path / "pair.pt")
    np.savez(tmp_path / "pair.npz", np.ones((2, 4), np.float32), np.ones((2, 3), np.float32))
    for name in ("pair.pt", "pair.npz"):  # fc(x) + y: 24 MACs, 54 + 6 = 60 FLOPs
        code, out, err = cli("profile", "tests.cli.fixture_models:TwoInputs", "--inputs", str(tmp_path / name),
                             "--metrics", "macs,flops", "--format", "json", *FAST)
        assert code == 0, err
        assert _values(json.loads(out)["status"]) == {"macs": 24, "flops": 60}
    (tmp_path / "code.pt").write_bytes(b"garbage")
    torch.save({"x": [1, 2]}, tmp_path / "nested.pt")
    code, _, err = cli("profile", TINY, "--inputs", str(tmp_path / "nested.pt"), *FAST)
    assert code == 2 and "is not a tensor, a tuple of tensors or a dict of named tensors" in err


# ------------------------------------------------------------------------------ compare
def test_compare_first_model_is_the_reference(cli):
    # mlp(hidden=5): 2*(4*5 + 5*2) = 60 MACs against tiny's 24 -> 60 / 24 = 2.5x fewer.
    code, out, _ = cli("compare", MLP, TINY, "--input-shape", "2,4", "--metrics", "macs", "--format", "json", *FAST)
    data = json.loads(out)
    assert code == 0 and data["compare"]["reference"] == "mlp"
    row = data["compare"]["metrics"][0]
    assert row["key"] == "macs" and row["values"]["mlp"]["value"] == 60 and row["values"]["tiny"]["value"] == 24
    assert row["changes"]["tiny"]["text"] == "2.50x fewer"


def test_compare_three_models_in_text_and_html(cli, tmp_path):
    code, out, _ = cli("compare", MLP, TINY, TINY, "--input-shape", "2,4", "--metrics", "macs,layers", *FAST)
    assert code == 0 and "Comparison: mlp (torch, reference) vs tiny (torch) vs tiny (2) (torch)" in out
    target = tmp_path / "compare.html"
    code, _, _ = cli("compare", MLP, TINY, "--input-shape", "2,4", "--metrics", "macs,params,layers", "-o",
                     str(target), *FAST)
    page = target.read_text()
    assert code == 0 and page.count('class="chart ratio-chart"') == 1
    assert "Per-layer summary: mlp (Sequential)" in page and "Per-layer summary: tiny (Linear)" in page


def test_compare_needs_two_models_and_loads_all_before_profiling(cli):
    code, _, err = cli("compare", TINY, *FAST)
    assert code == 2 and "compare needs at least two models, got 1" in err
    code, _, err = cli("compare", TINY, "zoo:nope", "--input-shape", "2,4", *FAST)
    assert code == 2 and "no zoo model named 'nope'" in err


# ------------------------------------------------------------------------------ demo
def test_demo_lists_and_profiles_the_zoo(cli):
    code, out, _ = cli("demo", "--list")
    assert code == 0 and out.splitlines()[0].startswith("zoo:lenet5")
    code, out, _ = cli("demo", "--metrics", "macs", "--format", "json", *FAST)
    groups = json.loads(out)["groups"]
    assert code == 0 and groups[0]["title"] == "lenet5"
    assert _values(groups[0]["main"]) == {"macs": 416_520}
    pair = next(g for g in groups if g["title"] == "resnet_small vs resnet_small_student")
    assert pair["main"]["reference"] == "resnet_small"
    code, _, err = cli("demo", "--format", "csv", *FAST)
    assert code == 2 and "one CSV file cannot hold" in err


# ------------------------------------------------------------------------------ progress
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_on_a_terminal_and_clears_itself(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    stream = _Terminal()
    with Progress(4, stream=stream, use_tqdm=False) as progress:  # the hand-drawn line (tqdm's: test_progress.py)
        progress.start("tiny: macs")
        progress.advance()
        assert progress.line().startswith("[######------------------] 1/4  tiny: macs")  # 24 * 1 // 4 = 6 marks
    assert stream.getvalue().endswith("\r\x1b[K") and "1/4" in stream.getvalue()
    assert list(track([1, 2, 3], "batches", stream=stream)) == [1, 2, 3]
    assert "3/3  batches" in stream.getvalue()


def test_progress_bar_is_silent_when_not_a_terminal():
    stream = io.StringIO()
    with Progress(2, stream=stream) as progress:
        progress.start("x")
        progress.advance(2)
    assert stream.getvalue() == ""


@pytest.mark.slow  # (about 4 s here)
def test_piped_output_has_no_progress_bar_and_module_entry_point_works():
    result = subprocess.run([sys.executable, "-m", "deeplite_like", "profile", "zoo:lenet5", "--metrics", "macs,time",
                             "--min-run-time", "0.01", "--format", "json"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "[#" not in result.stderr
    assert _values(json.loads(result.stdout)["status"])["macs"] == 416_520
