"""``deeplite-like check``: limits and a baseline as a CI gate, and the strict quantities it reads.

Hand-derived costs (batch 2):
* ``tiny`` = Linear(4, 3): MACs 2*4*3 = 24, params 4*3 + 3 = 15, size 15 * 4 bytes = 60 B.
* ``mlp(hidden=5)`` = Linear(4, 5), ReLU, Linear(5, 2): MACs 2*(4*5 + 5*2) = 60, params 25 + 12 = 37.
* ``mlp(hidden=6)``: MACs 2*(4*6 + 6*2) = 72 (+20 %), params 30 + 14 = 44 (+18.9 %).
"""
from __future__ import annotations

import argparse
import json

import pytest

from deeplite_like.cli.flags import parse_bytes, parse_count, parse_percent, parse_seconds

TINY = ("tests.cli.fixture_models:tiny", "--input-shape", "2,4", "--no-progress")
MLP = "tests.cli.fixture_models:mlp"
FAST = ("--min-run-time", "0.01", "--no-progress")


# ------------------------------------------------------------------------------ quantities
@pytest.mark.parametrize("text, expected", [("2G", 2_000_000_000), ("25M", 25_000_000), ("1.5k", 1500),
                                            ("1.5K", 1500), ("2000000", 2_000_000), ("2e9", 2_000_000_000),
                                            ("2GMACs", 2_000_000_000), ("3 T", 3_000_000_000_000), (".5M", 500_000)])
def test_counts(text, expected):
    assert parse_count(text, "MACs") == expected


@pytest.mark.parametrize("text, message", [("10m", "'m' is milli; write M for millions"), ("2X", "unknown suffix 'X'"),
                                           ("lots", "cannot read 'lots' as a count"), ("", "cannot read"),
                                           ("2GFLOPs", "unknown suffix 'GFLOPs'")])
def test_bad_counts(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_count(text, "MACs")


@pytest.mark.parametrize("text, expected", [("100MiB", 100 * 2**20), ("25MB", 25_000_000), ("512KiB", 512 * 1024),
                                            ("1.5GiB", 3 * 2**29), ("60B", 60), ("2kB", 2000)])
def test_sizes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text, message", [("100", "a size needs its unit"), ("10mib", "did you mean 'MiB'"),
                                           ("10 bytes", "unknown size unit 'bytes'")])
def test_bad_sizes(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_bytes(text)


@pytest.mark.parametrize("text, expected", [("5ms", 0.005), ("200us", 200e-6), ("1.5s", 1.5), ("50ns", 50e-9),
                                            ("3\u00b5s", 3e-6)])
def test_times(text, expected):
    assert parse_seconds(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text, message", [("5", "a time needs its unit"), ("5min", "unknown time unit 'min'")])
def test_bad_times(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_seconds(text)


def test_percentages():
    assert parse_percent("2%") == 0.02 and parse_percent("0.5%") == 0.005 and parse_percent("0%") == 0.0
    with pytest.raises(argparse.ArgumentTypeError, match="as a percentage, e.g. 2%"):
        parse_percent("2")


# ------------------------------------------------------------------------------ limits
def test_limits_are_inclusive_upper_bounds(cli):
    code, out, err = cli("check", *TINY, "--max-macs", "24", "--max-params", "15", "--max-size", "60B")
    assert code == 0, err
    assert "all 3 checks passed" in out and "REGRESSED" not in out
    assert "24.00 MACs <= 24.00 MACs" in out


@pytest.mark.parametrize("option, limit, text", [
    ("--max-macs", "23", "24.00 MACs > 23.00 MACs (over by 4.35 %)"),  # 24 / 23 - 1 = 4.35 %
    ("--max-params", "12", "15.00 params > 12.00 params (over by 25 %)"),
    ("--max-size", "59B", "60.00 B > 59.00 B (over by 1.69 %)"),  # 60 / 59 - 1 = 1.69 %
])
def test_a_limit_exceeded_fails_with_exit_1(cli, option, limit, text):
    code, out, _ = cli("check", *TINY, option, limit, "--max-flops", "1G")
    assert code == 1
    assert "1 of 2 checks failed" in out and text in out and "REGRESSED" in out
    assert "- 1 other checks passed" in out and "FLOPs" not in out.split("- 1 other")[0]  # only what failed


def test_a_parameter_count_reads_as_the_status_table_writes_it(cli):
    # zoo:resnet_small has 78,042 parameters: 78.04 k params, over a 10k limit by 78042 / 10000 - 1 = 680 %;
    # the prefix stands apart from the word 'params', as in the profile table ('k params', never 'kparams')
    code, out, _ = cli("check", "zoo:resnet_small", "--max-params", "10k", "--max-macs", "1G")
    assert code == 1
    assert "78.04 k params > 10.00 k params (over by 680 %)" in out and "kparams" not in out


def test_json_output_for_ci_logs(cli):
    code, out, _ = cli("check", *TINY, "--max-macs", "23", "--max-params", "25M", "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["report"] == "check" and data["schema_version"] == "1.1"
    assert data["passed"] is False and data["failed"] == 1
    assert [(c["key"], c["kind"], c["value"], c["allowed"], c["passed"]) for c in data["checks"]] == [
        ("macs", "limit", 24, 23, False), ("total_params", "limit", 15, 25_000_000, True)]


def test_latency_limit(cli):
    code, out, _ = cli("check", *TINY, "--max-latency", "10s", "--min-run-time", "0.01")
    assert code == 0 and "Execution time (limit)" in out
    code, out, _ = cli("check", *TINY, "--max-latency", "1ns", "--min-run-time", "0.01")
    assert code == 1 and "Execution time (limit)" in out and "REGRESSED" in out


# ------------------------------------------------------------------------------ baseline
@pytest.fixture
def baseline(cli, tmp_path):
    path = tmp_path / "baseline.json"
    code, _, err = cli("profile", MLP, "--input-shape", "2,4", "--metrics", "macs,params", "-o", str(path), *FAST)
    assert code == 0, err
    return str(path)


def _failed(out: str) -> list[str]:
    return [c["key"] for c in json.loads(out)["checks"] if not c["passed"]]


def test_same_model_passes_its_baseline(cli, baseline):
    code, out, _ = cli("check", MLP, "--input-shape", "2,4", "--baseline", baseline, *FAST)
    assert code == 0 and "all 3 checks passed" in out  # macs, total and trainable params


def test_a_grown_model_fails_beyond_the_tolerance(cli, baseline):
    grown = ("check", MLP, "--model-args", '{"hidden": 6}', "--input-shape", "2,4", "--baseline", baseline,
             "--format", "json", *FAST)
    code, out, _ = cli(*grown)  # tolerance 0 %: MACs +20 %, params +18.9 %
    assert code == 1 and _failed(out) == ["macs", "total_params", "trainable_params"]
    code, out, _ = cli(*grown, "--tolerance", "19%")  # 18.9 % of params is within 19 %, 20 % of MACs is not
    assert code == 1 and _failed(out) == ["macs"]
    check = json.loads(out)["checks"][0]
    assert (check["value"], check["baseline"], check["allowed"]) == (72, 60, pytest.approx(71.4))  # 60 * 1.19
    code, out, _ = cli(*grown, "--tolerance", "21%")
    assert code == 0 and _failed(out) == []


def test_a_smaller_model_passes(cli, baseline):
    code, out, _ = cli("check", MLP, "--model-args", '{"hidden": 3}', "--input-shape", "2,4", "--baseline", baseline,
                       *FAST)
    assert code == 0 and "all 3 checks passed" in out


def test_baseline_measured_differently_is_refused(cli, baseline):
    code, _, err = cli("check", MLP, "--input-shape", "2,4", "--batch-size", "1", "--baseline", baseline, *FAST)
    assert code == 2 and "macs was measured with batch_size 2, this run with 1" in err


# ------------------------------------------------------------------------------ errors
def test_check_errors(cli, tmp_path, baseline):
    code, _, err = cli("check", *TINY)
    assert code == 2 and "check needs a baseline or a limit" in err
    code, _, err = cli("check", *TINY, "--baseline", str(tmp_path / "missing.json"))
    assert code == 2 and "no such file" in err
    (tmp_path / "broken.json").write_text("{")
    code, _, err = cli("check", *TINY, "--baseline", str(tmp_path / "broken.json"))
    assert code == 2 and "cannot be read as JSON" in err
    (tmp_path / "compare.json").write_text(json.dumps({"report": "compare-run"}))
    code, _, err = cli("check", *TINY, "--baseline", str(tmp_path / "compare.json"))
    assert code == 2 and "is not a profile report (its report is 'compare-run')" in err
    future = json.loads(open(baseline).read())
    future["schema_version"] = "2.0"
    (tmp_path / "future.json").write_text(json.dumps(future))
    code, _, err = cli("check", *TINY, "--baseline", str(tmp_path / "future.json"))
    assert code == 2 and "has schema_version 2.0; this deeplite-like reads 1.1" in err
    code, _, err = cli("check", *TINY, "--max-macs", "0")
    assert code == 2 and "a MACs limit must be more than 0" in err
    code, _, err = cli("check", *TINY, "--max-macs", "1G", "--format", "csv")
    assert code == 2
