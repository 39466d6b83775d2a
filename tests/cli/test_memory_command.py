"""``deeplite-like memory MODEL --train``: the figures of estimate_training_memory, and its errors."""
from __future__ import annotations

import json

MLP = "tests.cli.fixture_models:mlp"  # Linear(4,5) + ReLU + Linear(5,2): 25 + 12 = 37 fp32 = 148 B


def test_train_json_has_hand_derived_model_states(cli):
    code, out, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["params_bytes"] == report["grads_bytes"] == 148
    assert report["optimizer_bytes"] == 2 * 148  # AdamW: exp_avg + exp_avg_sq
    assert report["optimizer_host_bytes"] == 4 * 4  # 4 step counters
    assert report["peak_phase"] == "optimizer"
    assert report["allowance"]["cublas_workspace_bytes"] == 32 * 2**20


def test_table_and_sharding(cli):
    code, out, _ = cli("memory", MLP, "--input-shape", "2,4", "--train", "--optimizer", "sgd",
                       "--sharding", "zero3", "--world-size", "2")
    assert code == 0
    assert "zero3 x2 (per rank)" in out and "optimizer sgd" in out


def test_fit_reports_a_verified_batch(cli):
    code, out, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--fit", "600MiB", "--format", "json")
    assert code == 0, err
    fit = json.loads(out)["fit"]
    size = fit["size"]
    measured = {int(k): v for k, v in fit["measured"].items()}
    assert measured[size] <= 600 * 2**20 < measured[size + 1]


def test_forward_only_without_train(cli):
    code, out, _ = cli("memory", MLP, "--input-shape", "2,4", "--format", "json")
    assert code == 0
    # batch 2: input 32 B; Linear(4,5) out 40 B, ReLU out 40 B (both live), then output 16 B.
    assert json.loads(out)["peak_bytes"] == 32 + 40 + 40


def test_usage_errors(cli):
    code, _, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--world-size", "2")
    assert code == 2 and "needs --sharding" in err
    code, _, err = cli("memory", MLP, "--input-shape", "2,4", "--fit", "80GiB")
    assert code == 2 and "add --train" in err
    code, _, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--optimizer", "lamb")
    assert code == 2 and "--optimizer 'lamb' is not a known optimizer" in err  # found before the model is loaded


def test_html_page_has_the_timeline_and_the_categories(cli, tmp_path):
    page = tmp_path / "memory.html"
    code, _, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "-o", str(page))
    assert code == 0 and f"wrote {page}" in err
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<script src" not in html
    assert 'class="chart timeline-chart"' in html and html.count('<polyline class="series"') == 4  # 4 phases
    # peak in AdamW's step: params 148 + input 2*4*4 = 32 + grads 148 + states 296 + _foreach_sqrt 148
    assert "peak 772 B (772 B) in optimizer" in html
    assert "148 B" in html  # parameters


def test_html_needs_train(cli):
    code, _, err = cli("memory", MLP, "--input-shape", "2,4", "--format", "html")
    assert code == 2 and "add --train" in err


def test_loop_and_fsdp_policy_flags(cli):
    # MLP: 37 fp32 parameters (148 B); fsdp x2: Linear(4,5) weight 3 of 5 rows, bias 3 of 5, Linear(5,2) weight
    # 1 of 2 rows, bias 1 of 2: (12 + 3 + 5 + 1) * 4 = 84 B per rank, in float32 under the policy too.
    code, out, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--zero-grad-at", "after_forward",
                         "--keep-output", "--sharding", "fsdp", "--world-size", "2", "--fsdp-mixed-precision",
                         "--no-reshard-after-forward", "--cpu-offload", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["zero_grad_at"], report["keep_output"], report["reshard_after_forward"]) == ("after_forward", True,
                                                                                                 False)
    assert report["mixed_precision"] == "param bfloat16, reduce float32"
    assert report["params_bytes"] == report["grads_bytes"] == 84
    assert report["offloaded_bytes"] == 84 + 84 + 2 * 84  # parameters, gradients, AdamW's two states: on the host
    code, _, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--fsdp-mixed-precision")
    assert code == 2 and "--sharding fsdp" in err


def test_clip_grad_norm_flag(cli):
    # the loop clips before its step: the option reaches the estimate and its summary; a bad value names it
    code, out, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--clip-grad-norm", "1.5", "--format",
                         "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["clip_grad_norm"] == 1.5 and "gradients clipped to norm 1.5" in report["text"]
    code, _, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--clip-grad-norm", "0")
    assert code == 2 and "--clip-grad-norm" in err and "a number > 0" in err


def test_sparse_gradients_are_measured_with_no_meta(cli):
    # meta cannot run sparse gradients: the error says which flag measures them; --no-meta does.
    args = ("memory", "tests.cli.fixture_models:sparse_lookup", "--input-shape", "2,3", "--int-inputs", "--train",
            "--optimizer", "sgd")
    code, _, err = cli(*args)
    assert code != 0 and "Embedding(sparse=True) at '0'" in err and "--no-meta" in err
    code, out, err = cli(*args, "--no-meta", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    # gradients: the Linear's (8 + 2) * 4 = 40 B + the embedding's sparse one, 6 looked-up ids: indices
    # 1 x 6 int64 = 48 B, values 6 x 4 fp32 = 96 B
    assert report["meta"] is False and report["grads_bytes"] == 40 + 48 + 96
    code, _, err = cli("memory", MLP, "--input-shape", "2,4", "--no-meta")
    assert code == 2 and "add --train" in err


def test_offload_activations_flag(cli):
    code, out, err = cli("memory", MLP, "--input-shape", "2,4", "--train", "--offload-activations", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    # saved for backward, fp32, each save its own host copy (save_on_cpu does not share them): the input
    # (2 x 4: 32 B) by the first Linear; the ReLU's output (2 x 5: 40 B) by the ReLU and again by the second
    # Linear, with that Linear's weight (5 x 2: 40 B, as its input needs a gradient): 32 + 3 * 40 = 152 B
    assert report["offloaded_activations_bytes"] == 152 and "activations offloaded" in report["text"]
