"""``deeplite-like profile --device-model NAME [--fused] [--decode CONTEXT]``: the predicted time and
the serving view on the command line (``cli/runner._roofline``, ``roofline.predict``, ``count_serving``).

``tiny`` is Linear(4, 3) on a batch of 2 (``fixture_models``): its one ``addmm`` reads the bias
3·4 = 12 bytes, x 2·4·4 = 32 and W 3·4·4 = 48 (92) and writes 2·3·4 = 24: 116 bytes; FLOPs
2·24 MACs + 6 bias adds = 54.
"""
import json

import pytest

from deeplite_like.cli.exit_codes import EXIT_USAGE
from deeplite_like.roofline import device_model

TINY = ("tests.cli.fixture_models:tiny", "--input-shape", "2,4", "--min-run-time", "0.01", "--no-progress")


def test_profile_predicts_the_time_on_a_named_device(cli, tmp_path):
    out = tmp_path / "p.json"
    code, _, err = cli("profile", *TINY, "--device-model", "h100", "-o", str(out))
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["schema_version"] == "1.1"
    roofline = data["roofline"]
    h100 = device_model("h100")
    assert roofline["device"]["name"] == h100.name == "H100 SXM"
    # 54 FLOPs against 116 bytes: 0.47 FLOPs/byte, far under the ridge: memory bound, 116 B / bandwidth
    assert roofline["total"]["bytes"] == 116 and roofline["total"]["flops"] == 54
    assert roofline["by_operator"]["aten.addmm"]["bound"] == "memory"
    assert roofline["time_s"] == pytest.approx(116 / h100.memory_bandwidth)


def test_the_text_report_has_the_top_operators_table_and_html_the_chart(cli, tmp_path):
    code, out, err = cli("profile", *TINY, "--device-model", "a100-80gb")
    assert code == 0, err
    assert "Predicted time on A100 80GB" in out and "aten.addmm" in out and "memory" in out
    page = tmp_path / "p.html"
    code, _, err = cli("profile", *TINY, "--device-model", "a100-80gb", "-o", str(page))
    assert code == 0, err
    html = page.read_text()
    assert html.count("<svg") >= 1 and "Roofline on A100 80GB" in html


def test_unknown_device_fused_alone_and_a_sweep_are_usage_errors(cli):
    code, _, err = cli("profile", *TINY, "--device-model", "h1000")
    assert code == EXIT_USAGE and "unknown device 'h1000'" in err and "H100 SXM" in err
    code, _, err = cli("profile", *TINY, "--fused")
    assert code == EXIT_USAGE and "--device-model" in err
    code, _, err = cli("profile", *TINY, "--device-model", "h100", "--batch-sizes", "1,2")
    assert code == EXIT_USAGE and "sweep" in err
    code, _, err = cli("profile", *TINY, "--decode", "16")
    assert code == EXIT_USAGE and "generate()" in err


def test_fused_is_passed_through_and_a_lone_elementwise_op_keeps_its_ends(cli, tmp_path):
    plain, fused = tmp_path / "u.json", tmp_path / "f.json"
    spec = ("tests.cli.fixture_models:mlp", "--input-shape", "2,4", "--min-run-time", "0.01", "--no-progress",
            "--device-model", "h100", "--metrics", "macs")
    assert cli("profile", *spec, "-o", str(plain))[0] == 0
    assert cli("profile", *spec, "--fused", "-o", str(fused))[0] == 0
    unfused_bytes = json.loads(plain.read_text())["roofline"]["total"]["bytes"]
    fused_bytes = json.loads(fused.read_text())["roofline"]["total"]["bytes"]
    assert json.loads(fused.read_text())["roofline"]["fused"] is True
    # mlp = Linear(4, 5) -> ReLU -> Linear(5, 2), batch 2: addmm reads b 20 + x 32 + W 80, writes 40 (172);
    # relu reads 40, writes 40 (80); addmm reads b 8 + h 40 + W 40, writes 16 (104): 356. The ReLU is a
    # chain of one between two contractions: it reads and writes its ends in the fused view too.
    assert unfused_bytes == fused_bytes == 356


@pytest.mark.slow
def test_decode_gives_the_serving_view_of_a_causal_lm(cli, tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "s.json"
    code, _, err = cli("profile", "tests.cli.fixture_models:tiny_llama", "--metrics", "macs", "--no-progress",
                       "--device-model", "h100", "--decode", "16", "-o", str(out))
    assert code == 0, err
    serving = json.loads(out.read_text())["serving"]
    # the prompt is the example's 2 x 8 ids; the cache at 16 tokens: 2 (k, v) · 2 layers · batch 2 · 2 heads
    #   · 16 tokens · 16 dims · 4 bytes = 16,384; MACs as tests/torch/test_serving.py derives them
    assert (serving["batch_size"], serving["prompt_tokens"], serving["context"]) == (2, 8, 16)
    assert serving["kv_cache_bytes"] == 16_384
    assert (serving["prefill"]["macs"], serving["decode"]["macs"]) == (1_225_216, 168_960)
    assert serving["device"] == "H100 SXM"
    # tokens/s = the batch / the decode step's predicted time
    assert serving["decode_tokens_per_s"] == pytest.approx(2 / serving["decode_step_s"])


@pytest.mark.slow
def test_this_machine_is_calibrated_at_the_timing_threads_and_gives_mfu_of_the_measured_run(cli):
    code, out, err = cli("profile", *TINY, "--metrics", "time,macs", "--device-model", "this",
                         "--num-threads", "1")
    assert code == 0, err
    assert "Predicted time on this machine" in out
    # the execution time was measured here, at the calibration's thread count: its MFU is said
    assert "(measured and predicted on this machine): MFU" in err + out
    # a named device is not this machine: no utilisation of a time measured here
    code, out, err = cli("profile", *TINY, "--metrics", "time,macs", "--device-model", "h100")
    assert code == 0 and "MFU" not in err + out


def test_the_per_layer_table_gets_each_modules_bytes_predicted_time_and_bound(cli, tmp_path):
    out = tmp_path / "p.json"
    code, _, err = cli("profile", *TINY, "--metrics", "macs,layers", "--device-model", "h100", "-o", str(out))
    assert code == 0, err
    data = json.loads(out.read_text())
    (row,) = data["layers"]["rows"]  # Linear(4, 3) is the model: one row
    # its one addmm moves 116 bytes (the module docstring) and is memory bound: 116 B / bandwidth
    assert (row["bytes_moved"], row["bound"]) == (116, "memory")
    assert row["predicted_s"] == pytest.approx(116 / device_model("h100").memory_bandwidth)
    assert row["predicted_s"] == pytest.approx(data["roofline"]["time_s"])
