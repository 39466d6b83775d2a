"""Hostile input, second round (issue 29, sections 2 and 4): reports, the CI gate, output files and Ctrl-C.

Each test is one scenario of the issue. Costs used below: ``tests.cli.fixture_models:tiny`` is
Linear(4, 3); on a batch of 2 it is 2 * 4 * 3 = 24 MACs, and FLOPs = 2 * 24 + 2 * 3 (bias adds) = 54.
"""
from __future__ import annotations

import csv
import io
import json
import os
import resource
import signal
import stat
import threading

import pytest

from deeplite_like import metrics as M
from deeplite_like.reports import CompareReport, StatusReport, TableReport
from deeplite_like.reports.base import csv_cell, strict_json
from deeplite_like.metrics.status_keys import Comparative, Metric

FAST = ("--min-run-time", "0.01", "--no-progress")
TINY = "tests.cli.fixture_models:tiny"


class Score(Metric):
    NAME = "score"
    FRIENDLY_NAME = "Score"
    BASE_UNIT = "pts"
    COMPARATIVE = Comparative.DIFFERENCE


def _strict_load(text: str):
    """``json.loads`` as a strict reader does it: the bare tokens NaN / Infinity are errors."""
    def refuse(token):
        raise ValueError(f"bare {token} is not JSON")
    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------------------ JSON is strict
def test_status_json_with_nan_and_infinite_values_is_strict_json():
    report = StatusReport("m", "torch", {"macs": M.Macs(10), "score": Score(float("nan"),
                                                                                  {"spread": float("inf")}),
                                         "execution_time": M.ExecutionTime(float("-inf"))})
    data = _strict_load(report.to_json())
    values = {m["key"]: m["value"] for m in data["metrics"]}
    # the documented rule (reports.base.strict_json): NaN -> "NaN", inf -> "Infinity", -inf -> "-Infinity"
    assert values == {"macs": 10, "score": "NaN", "execution_time": "-Infinity"}
    score = next(m for m in data["metrics"] if m["key"] == "score")
    assert score["details"]["spread"] == "Infinity"


def test_compare_json_with_a_nan_value_is_strict_json():
    report = CompareReport([("a", "torch", {"score": Score(1.0)}), ("b", "torch", {"score": Score(float("nan"))})])
    data = _strict_load(report.to_json())
    assert "NaN" in json.dumps(data)  # the NaN is kept, as a string, not dropped


def test_strict_json_keeps_finite_numbers_and_plain_strings():
    # a real string "NaN" and the float nan are both written "NaN": the rule is lossy only for that string
    assert _strict_load(strict_json({"a": [1, 2.5, float("inf")], "b": "text"})) == \
        {"a": [1, 2.5, "Infinity"], "b": "text"}


# ------------------------------------------------------------------------------ CSV cannot hold formulas
@pytest.mark.parametrize("text", ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_csv_text_cells_that_a_spreadsheet_would_run_are_neutralised(text):
    assert csv_cell(text) == "'" + text
    assert csv_cell(-3) == -3 and csv_cell(-0.5) == -0.5  # numbers stay numbers


def test_status_and_compare_csv_neutralise_model_names():
    status = StatusReport("=cmd|' /C calc'!A0", "torch", {"macs": M.Macs(24)})
    rows = list(csv.DictReader(io.StringIO(status.to_csv())))
    assert rows[0]["model"] == "'=cmd|' /C calc'!A0" and rows[0]["value"] == "24"
    compare = CompareReport([("@a", "torch", {"macs": M.Macs(24)}), ("+b", "torch", {"macs": M.Macs(12)})])
    models = [row["model"] for row in csv.DictReader(io.StringIO(compare.to_csv()))]
    assert models == ["'@a", "'+b"]


def test_per_layer_csv_neutralises_module_names_and_headers():
    table = TableReport("layers", ["module", "-x"], [{"module": "=1+1", "-x": -4}, {"module": "ok", "-x": 2}])
    rows = list(csv.reader(io.StringIO(table.to_csv())))
    assert rows == [["module", "'-x"], ["'=1+1", "-4"], ["ok", "2"]]


def test_cli_per_layer_csv_side_file_neutralises_a_module_named_like_a_formula(tmp_path, cli):
    (tmp_path / "evil.py").write_text(
        "import torch\n\ndef build():\n    model = torch.nn.Sequential()\n"
        "    model.add_module('=HYPERLINK(1)', torch.nn.Linear(4, 3))\n    return model\n")
    output = tmp_path / "r.csv"
    code, _, err = cli("profile", f"{tmp_path / 'evil.py'}:build", "--input-shape", "2,4", "--metrics", "macs,layers",
                       "-o", str(output), *FAST)
    assert code == 0, err
    layers = list(csv.DictReader(io.StringIO((tmp_path / "r.layers.csv").read_text())))
    assert "'=HYPERLINK(1)" in [row["module"] for row in layers]


# ------------------------------------------------------------------------------ the CI gate
def _baseline(tmp_path, cli, edit) -> str:
    path = tmp_path / "base.json"
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "macs", "-o", str(path), *FAST)
    assert code == 0, err
    path.write_text(edit(path.read_text()))
    return str(path)


def _set_macs(text: str, value: str) -> str:
    data = json.loads(text)
    metric = next(m for m in data["status"]["metrics"] if m["key"] == "macs")
    assert metric["value"] == 24  # Linear(4, 3) on 2 samples: 2 * 4 * 3
    metric["value"] = "@@VALUE@@"
    return json.dumps(data).replace('"@@VALUE@@"', value)


@pytest.mark.parametrize("value, shown", [
    ("Infinity", "bare token Infinity"), ("-Infinity", "bare token -Infinity"),  # bare tokens: not JSON
    ("NaN", "bare token NaN"),
    ('"Infinity"', "'Infinity'"), ('"NaN"', "'NaN'"),  # our strict spelling of non-finite values
    ("1e999", "inf"),  # a float literal that overflows to inf
    ("9" * 400, "400 digits"),  # a 400-digit int: float() of it overflows
    ("1e30", "1e+30"), ("-5", "-5"), ("true", "True"),
])
def test_check_baseline_with_a_non_finite_or_absurd_value_is_a_usage_error(tmp_path, cli, value, shown):
    baseline = _baseline(tmp_path, cli, lambda text: _set_macs(text, value))
    code, out, err = cli("check", TINY, "--input-shape", "2,4", "--baseline", baseline, *FAST)
    assert code == 2 and out == "", err  # never 0: a gate cannot be made to pass by its input
    assert "--baseline" in err and shown in err.replace("integer of 400 digits", "400 digits")


def test_check_baseline_nested_100000_deep_is_a_usage_error(tmp_path, cli):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = cli("check", TINY, "--input-shape", "2,4", "--baseline", str(path), *FAST)
    assert code == 2 and "nests its JSON too deeply" in err


def test_check_baseline_deep_inside_a_real_report_is_a_usage_error(tmp_path, cli):
    deep = "[" * 100_000 + "]" * 100_000
    baseline = _baseline(tmp_path, cli, lambda text: text.replace('"notes": [', f'"junk": {deep}, "notes": [', 1))
    code, _, err = cli("check", TINY, "--input-shape", "2,4", "--baseline", baseline, *FAST)
    assert code == 2 and "too deeply" in err


def test_check_tolerance_beyond_1000_percent_is_refused(cli):
    code, _, err = cli("check", TINY, "--input-shape", "2,4", "--max-macs", "1G", "--tolerance", "1e300%", *FAST)
    assert code == 2 and "a tolerance is at most 1000%" in err


def test_check_json_output_is_strict(tmp_path, cli):
    baseline = _baseline(tmp_path, cli, lambda text: text)
    code, out, err = cli("check", TINY, "--input-shape", "2,4", "--baseline", baseline, "--format", "json", *FAST)
    assert code == 0, err
    assert _strict_load(out)["passed"] is True


def test_check_never_takes_the_model_spec_from_the_baseline(tmp_path, cli):
    """A baseline is data: its ``model`` field names no code to run (the spec comes from the command line only)."""
    marker = tmp_path / "ran"
    (tmp_path / "planted.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef build():\n    pass\n")
    baseline = _baseline(tmp_path, cli, lambda text: text.replace(f'"model": "{TINY}"',
                                                                  f'"model": "{tmp_path / "planted.py"}:build"'))
    assert "planted.py" in open(baseline).read()
    code, _, err = cli("check", TINY, "--input-shape", "2,4", "--baseline", baseline, *FAST)
    assert code == 0, err
    assert not marker.exists()


# ------------------------------------------------------------------------------ --output
def test_output_write_error_keeps_the_previous_report(tmp_path, cli):
    """A file-size limit hit while writing: exit 1 naming the file, and the old report is untouched."""
    output = tmp_path / "report.json"
    output.write_text("previous report\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))  # a JSON report is over 100 bytes
    try:
        code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "macs", "-o", str(output), *FAST)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert code == 1 and f"cannot write {str(output)!r}: File too large" in err
    assert output.read_text() == "previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temporary file left


def test_report_save_failing_keeps_the_previous_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("previous\n")
    report = StatusReport("m", "torch", {"macs": M.Macs(24)})
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (50, hard))  # the report's JSON is longer than 50 bytes
    try:
        with pytest.raises(OSError):
            report.save(path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert path.read_text() == "previous\n" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    report.save(path)
    assert _strict_load(path.read_text())["metrics"][0]["value"] == 24


def test_output_replaces_the_file_atomically_and_keeps_its_permissions(tmp_path, cli):
    output = tmp_path / "report.json"
    output.write_text("old")
    output.chmod(0o640)
    inode = output.stat().st_ino
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "macs", "-o", str(output), *FAST)
    assert code == 0, err
    assert output.stat().st_ino != inode  # a new file renamed over the old one, not rewritten in place
    assert stat.S_IMODE(output.stat().st_mode) == 0o640
    assert {m["key"]: m["value"] for m in json.loads(output.read_text())["status"]["metrics"]} == {"macs": 24}


def test_output_through_a_symlink_replaces_its_target(tmp_path, cli):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "macs", "-o", str(link), *FAST)
    assert code == 0, err
    assert link.is_symlink() and json.loads(target.read_text())["report"] == "profile"


def test_output_to_a_fifo_with_a_reader_does_not_hang(tmp_path, cli):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(open(fifo).read()), daemon=True)
    reader.start()
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "macs", "-o", str(fifo), *FAST)
    reader.join(timeout=30)
    assert code == 0, err
    assert not reader.is_alive()  # the reader got the report, not an early end of file from the check
    assert json.loads(received[0])["report"] == "profile"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_to_dev_full_names_the_file(cli):
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "macs", "-o", "/dev/full",
                       "--format", "json", *FAST)
    assert code == 1 and "cannot write '/dev/full': No space left on device" in err
    assert "unexpected" not in err


def test_unwritable_side_csv_is_refused_before_the_model_is_loaded(tmp_path, cli):
    marker = tmp_path / "imported"
    (tmp_path / "watched.py").write_text(f"open({str(marker)!r}, 'w').close()\nimport torch\n"
                                         "def build():\n    return torch.nn.Linear(4, 3)\n")
    (tmp_path / "x.layers.csv").mkdir()  # the per-layer file cannot be written: a directory is in its place
    code, _, err = cli("profile", f"{tmp_path / 'watched.py'}:build", "--input-shape", "2,4", "-o",
                       str(tmp_path / "x.csv"), *FAST)
    assert code == 2 and "x.layers.csv" in err and "is a directory" in err
    assert not marker.exists() and not (tmp_path / "x.csv").exists()


def test_compare_side_csv_is_checked_before_profiling(tmp_path, cli):
    (tmp_path / "x.tiny.layers.csv").mkdir()
    code, _, err = cli("compare", TINY, TINY, "--input-shape", "2,4", "-o", str(tmp_path / "x.csv"), *FAST)
    assert code == 2 and "x.tiny.layers.csv" in err and "Profiling" not in err
    assert not (tmp_path / "x.csv").exists()


def test_memory_output_is_checked_first_and_written_atomically(tmp_path, cli):
    code, _, err = cli("memory", TINY, "--input-shape", "2,4", "-o", str(tmp_path))
    assert code == 2 and "is a directory, not a file" in err
    output = tmp_path / "m.json"
    code, _, err = cli("memory", TINY, "--input-shape", "2,4", "--train", "-o", str(output))
    assert code == 0, err
    assert _strict_load(output.read_text())["batch_size"] == 2


# ------------------------------------------------------------------------------ usage errors before the model runs
@pytest.mark.parametrize("argv, message", [
    (("memory", "{spec}", "--input-shape", "2,4", "--train", "--fit", "0GiB"), "a memory size must be positive"),
    (("memory", "{spec}", "--input-shape", "2,4", "--train", "--fit", "1e999GiB"), "not a finite memory size"),
    (("memory", "{spec}", "--input-shape", "2,4", "--train", "--optimizer", "nope"), "--optimizer 'nope' is not a known"),
    (("profile", "{spec}", "--input-shape", "2,4", "--min-run-time", "inf"), "a finite number of seconds > 0"),
    (("profile", "{spec}", "--input-shape", "2,4", "--min-run-time", "nan"), "a finite number of seconds > 0"),
    (("check", "{spec}", "--input-shape", "2,4", "--max-macs", "1G", "--min-run-time", "inf"), "finite"),
])
def test_bad_numbers_are_usage_errors_before_the_model_is_imported(tmp_path, cli, argv, message):
    marker = tmp_path / "imported"
    (tmp_path / "watched.py").write_text(f"open({str(marker)!r}, 'w').close()\nimport torch\n"
                                         "def build():\n    return torch.nn.Linear(4, 3)\n")
    code, _, err = cli(*(a.format(spec=f"{tmp_path / 'watched.py'}:build") for a in argv))
    assert code == 2 and message in err
    assert not marker.exists()


# ------------------------------------------------------------------------------ Ctrl-C
SWALLOWING_MODEL = """
import os, signal, torch

class Swallower:
    '''Sends SIGINT from inside __del__: Python raises the KeyboardInterrupt there and ignores it.'''
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # bytecodes, so that the handler runs here, inside __del__
            pass

class Model(torch.nn.Linear):
    calls = 0
    def forward(self, x):
        type(self).calls += 1
        if type(self).calls == {when}:
            Swallower()  # dropped at once: __del__ runs now
        return super().forward(x)

def build():
    return Model(4, 3)
"""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowed interrupt
def test_sigint_swallowed_during_timing_still_exits_130_without_a_report(tmp_path, cli):
    # forward 1 is the count, forward 2 the timing's first: the interrupt lands in the timing
    (tmp_path / "swallow.py").write_text(SWALLOWING_MODEL.replace("{when}", "2"))
    output = tmp_path / "r.json"
    code, out, err = cli("profile", f"{tmp_path / 'swallow.py'}:build", "--input-shape", "2,4", "--metrics",
                         "macs,time", "-o", str(output), *FAST)
    assert code == 130 and "deeplite-like: interrupted" in err
    assert not output.exists() and out == ""


def test_sigint_while_the_model_file_is_imported_exits_130(tmp_path, cli):
    (tmp_path / "slow_import.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n"
                                             "for _ in range(1000):\n    pass\ndef build():\n    pass\n")
    code, _, err = cli("profile", f"{tmp_path / 'slow_import.py'}:build", "--input-shape", "2,4", *FAST)
    assert code == 130 and "interrupted" in err and "error" not in err


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_sigint_swallowed_while_importing_then_an_import_error_exits_130(tmp_path, cli):
    """The interrupt is lost inside a __del__ and the import then fails: report the interrupt, not exit 2."""
    (tmp_path / "half.py").write_text(
        "import os, signal\nclass S:\n    def __del__(self):\n        os.kill(os.getpid(), signal.SIGINT)\n"
        "        for _ in range(1000):\n            pass\nS()\nimport deeplite_like_no_such_module\n")
    code, _, err = cli("profile", f"{tmp_path / 'half.py'}:build", "--input-shape", "2,4", *FAST)
    assert code == 130 and "interrupted" in err and "not installed" not in err


def test_the_sigint_handler_is_put_back(cli):
    before = signal.getsignal(signal.SIGINT)
    code, _, err = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "macs", *FAST)
    assert code == 0, err
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["import", "timing"])
def test_real_sigint_to_the_command_exits_130(tmp_path, stage):
    """A real Ctrl-C (SIGINT from another process) while the model file is imported, or while it is timed."""
    import subprocess
    import sys
    import time as clock
    from pathlib import Path

    ready = tmp_path / "ready"
    body = ("import pathlib, time, torch\n"
            + (f"pathlib.Path({str(ready)!r}).touch()\ntime.sleep(60)\n" if stage == "import" else "")
            + "class Slow(torch.nn.Linear):\n    calls = 0\n    def forward(self, x):\n"
            "        type(self).calls += 1\n"
            + (f"        if type(self).calls > 2:\n            pathlib.Path({str(ready)!r}).touch()\n"
               "            time.sleep(0.05)\n" if stage == "timing" else "")
            + "        return super().forward(x)\n\ndef build():\n    return Slow(4, 3)\n")
    (tmp_path / "model.py").write_text(body)
    output = tmp_path / "r.json"
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen([sys.executable, "-m", "deeplite_like", "profile", f"{tmp_path / 'model.py'}:build",
                                "--input-shape", "2,4", "--min-run-time", "30", "--no-progress", "-o", str(output)],
                               cwd=root, stderr=subprocess.PIPE, text=True,
                               env={**__import__("os").environ, "PYTHONPATH": str(root)})
    deadline = clock.monotonic() + 120
    while not ready.exists() and clock.monotonic() < deadline and process.poll() is None:
        clock.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130 and "deeplite-like: interrupted" in err
    assert not output.exists()


def test_an_ignored_sigint_stays_ignored(cli, tmp_path):
    """A background job ignores SIGINT; the command must not turn it back on while it runs."""
    (tmp_path / "seen.py").write_text("import signal, torch\nSEEN = []\n"
                                      "def build():\n    SEEN.append(signal.getsignal(signal.SIGINT))\n"
                                      "    return torch.nn.Linear(4, 3)\n")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code, _, err = cli("profile", f"{tmp_path / 'seen.py'}:build", "--input-shape", "2,4", "--metrics", "macs",
                           *FAST)
        assert code == 0, err
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    import sys

    module = next(m for name, m in sys.modules.items() if name.startswith("deeplite_like_user_seen_"))
    assert module.SEEN == [signal.SIG_IGN]  # still ignored while the model was built
