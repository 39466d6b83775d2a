"""``profile --batch-sizes`` and ``--seq-lens``: one table and one chart across a sweep.

Hand-derived costs: ``tiny`` = Linear(4, 3) counts 4*3 = 12 MACs per sample, so a batch of b
counts 12*b. ``lstm_tagger`` (embedding, bidirectional LSTM, per-token linear head) does the
same work for every token, so its MACs are proportional to the sequence length.
"""
from __future__ import annotations

import json
import re

import pytest
import torch

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.commands import sweep_chart, sweep_table, with_seq_len
from tests.cli.test_hub_models import configs, needs_transformers  # noqa: F401 (a fixture)

TINY = ("profile", "tests.cli.fixture_models:tiny", "--input-shape", "2,4")
FAST = ("--min-run-time", "0.01", "--no-progress")


def _sweep(out: str) -> list[dict]:
    data = json.loads(out)
    assert data["report"] == "sweep" and data["schema_version"] == "1.1"
    return data["sweep"]["rows"]


@pytest.mark.parametrize("sizes", [(1, 2, 4), (3, 1), (8,)])
def test_batch_sizes_sweep_counts_each_batch(cli, sizes):
    code, out, err = cli(*TINY, "--batch-sizes", ",".join(map(str, sizes)), "--metrics", "macs,memory",
                         "--format", "json", *FAST)
    assert code == 0, err
    rows = _sweep(out)
    assert [(r["batch_size"], r["macs"]) for r in rows] == [(b, 12 * b) for b in sizes]
    assert all(r["peak_activation_bytes"] > 0 for r in rows)


def test_batch_sweep_times_each_point_with_its_spread(cli):
    code, out, err = cli(*TINY, "--batch-sizes", "1,4", "--metrics", "macs,time", "--format", "json", *FAST)
    assert code == 0, err
    rows = _sweep(out)
    for row in rows:
        assert row["latency_s"] > 0 and row["latency_iqr_s"] >= 0 and row["throughput"] > 0
        assert row["per_sample_s"] == pytest.approx(row["latency_s"] / row["batch_size"], rel=1e-12)


@pytest.mark.parametrize("width", [80, 200])
def test_sweep_table_fits_the_width(cli, width):
    code, out, _ = cli(*TINY, "--batch-sizes", "1,2,4", "--metrics", "macs,memory,time", "--width", str(width), *FAST)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= width
    assert re.search(r"\|\s+4 \|\s+48 \|", out)  # batch 4: 48 MACs
    assert out.splitlines()[1].strip("| ") == "Batch-size sweep: tiny"


def test_sweep_html_has_one_chart_of_every_quantity(cli, tmp_path):
    page = tmp_path / "sweep.html"
    code, _, err = cli(*TINY, "--batch-sizes", "1,2,4", "--metrics", "macs,memory,time", "-o", str(page), *FAST)
    assert code == 0, err
    html = page.read_text()
    assert html.count("<svg") == 1 and html.count('class="series"') == 4  # latency, samples/s, MACs, memory
    assert html.count('class="point"') == 12 and "Batch-size sweep: tiny" in html


def test_chart_is_relative_to_the_first_point():
    rows = [{"batch_size": 1, "macs": 10, "latency_s": 0.002, "latency_iqr_s": 0.0002},
            {"batch_size": 4, "macs": 40, "latency_s": 0.004, "latency_iqr_s": 0.0004}]
    svg = sweep_chart(sweep_table("m", "batch_size", rows))
    # MACs 40 / 10 = 4x at batch 4; latency 0.004 / 0.002 = 2x; whiskers of 0.1x and 0.2x
    assert "MACs: 4 -&gt; 4x" in svg and "Latency: 4 -&gt; 2x" in svg and svg.count('class="spread"') == 2


def test_seq_lens_sweep_on_token_inputs(cli):
    code, out, err = cli("profile", "zoo:lstm_tagger", "--seq-lens", "8,16,32", "--device", "meta", "--format",
                         "json", "--no-progress")
    assert code == 0, err
    rows = _sweep(out)
    assert [r["seq_len"] for r in rows] == [8, 16, 32]
    per_token = rows[0]["macs"] / 8
    assert per_token > 0 and [r["macs"] for r in rows] == [per_token * 8, per_token * 16, per_token * 32]
    assert "latency_s" not in json.loads(out)["sweep"]["columns"]  # meta runs nothing: no timing


def test_with_seq_len_repeats_or_cuts_token_ids():
    ids, x = torch.tensor([[1, 2, 3]]), torch.ones(1, 3)
    (longer, same_x), _ = with_seq_len(((ids, x), {}), 5)
    assert longer.tolist() == [[1, 2, 3, 1, 2]] and same_x is x
    (shorter,), kw = with_seq_len(((ids,), {"mask": torch.ones(1, 3, dtype=torch.bool)}), 2)
    assert shorter.tolist() == [[1, 2]] and kw["mask"].shape == (1, 2)
    with pytest.raises(UsageError, match="--seq-lens resizes token ids"):
        with_seq_len(((x,), {}), 4)


def test_sweep_usage_errors(cli):
    code, _, err = cli(*TINY, "--seq-lens", "8,16", *FAST)
    assert code == 2 and "--seq-lens resizes token ids" in err
    code, _, err = cli(*TINY, "--batch-sizes", "1,2", "--seq-lens", "8", *FAST)
    assert code == 2 and "sweep one axis at a time" in err
    code, _, err = cli(*TINY, "--batch-sizes", "1,2", "--batch-size", "2", *FAST)
    assert code == 2 and "--batch-size and --batch-sizes both set the batch" in err
    code, _, err = cli(*TINY, "--batch-sizes", "1,x", *FAST)
    assert code == 2 and "expected whole numbers >= 1" in err
    code, _, err = cli(*TINY, "--batch-sizes", "2,2", *FAST)
    assert code == 2 and "2 is given twice" in err


@needs_transformers
def test_seq_lens_rebuild_an_hf_models_example(cli, configs):  # noqa: F811
    code, out, err = cli("profile", f"hf:{configs / 'gpt2'}", "--seq-lens", "16,32", "--format", "json",
                         "--no-progress")
    assert code == 0, err
    # tests/cli/test_hub_models.py: 16 x 104,704 + 256 x 16^2 = 1,740,800; at 32 tokens:
    # 32 x 104,704 + 256 x 32^2 = 3,350,528 + 262,144 = 3,612,672.
    assert [(r["seq_len"], r["macs"]) for r in _sweep(out)] == [(16, 1_740_800), (32, 3_612_672)]


def test_layer_options_are_refused_in_a_sweep(cli):
    code, _, err = cli(*TINY, "--batch-sizes", "1,2", "--top", "3", *FAST)
    assert code == 2 and "a sweep prints no per-layer table" in err
