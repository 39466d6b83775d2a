"""Command lines that would lose work, exit silently or exhaust memory: one clear error each, up front.

``IMPORT_MARKS`` files create a marker when imported, so a test can show an error came before
any model was loaded. Costs: Linear(4, 3) on a batch of 2 is 2 * 4 * 3 = 24 MACs.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading import preflight as input_memory
from deeplite_like.cli.loading.preflight import check_input_bytes, sample_bytes

FAST = ("--min-run-time", "0.01", "--no-progress")
MODEL = "import torch\n\ndef build():\n    return torch.nn.Linear(4, 3)\n"


def _macs(out: str) -> int:
    return {m["key"]: m["value"] for m in json.loads(out)["status"]["metrics"]}["macs"]


@pytest.fixture
def watched(tmp_path):
    """A model file that creates ``imported`` when imported: ``(spec, marker)``."""
    marker = tmp_path / "imported"
    (tmp_path / "watched.py").write_text(f"open({str(marker)!r}, 'w').close()\n" + MODEL)
    return f"{tmp_path / 'watched.py'}:build", marker


# ------------------------------------------------------------------------------ --output
@pytest.mark.parametrize("where, message", [
    ("{dir}", "is a directory, not a file"),
    ("{dir}/notes.txt/report.html", "'{dir}/notes.txt' is a file, not a directory"),
    ("{dir}/notes.txt/deeper/report.json", "'{dir}/notes.txt' is a file, not a directory"),
    ("{dir}/missing/report.html", "the directory '{dir}/missing' does not exist"),
])
def test_bad_output_is_refused_before_the_model_is_loaded(tmp_path, cli, watched, where, message):
    spec, imported = watched
    (tmp_path / "notes.txt").write_text("keep me\n")
    output = where.format(dir=tmp_path)
    code, out, err = cli("profile", spec, "--input-shape", "2,4", "--format", "html", "--output", output, *FAST)
    assert code == 2 and out == ""
    assert f"--output {output!r}" in err and message.format(dir=tmp_path) in err
    assert not imported.exists()  # refused before any model code ran: no work lost
    assert (tmp_path / "notes.txt").read_text() == "keep me\n"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_output_directory_is_refused_before_loading(tmp_path, cli, watched):
    spec, imported = watched
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        code, _, err = cli("profile", spec, "--input-shape", "2,4", "-o", str(locked / "r.json"), *FAST)
    finally:
        locked.chmod(0o700)
    assert code == 2 and "cannot be written: Permission denied" in err and not imported.exists()


def test_compare_and_demo_check_output_first(tmp_path, cli, watched):
    spec, imported = watched
    code, _, err = cli("compare", spec, spec, "--input-shape", "2,4", "--format", "json", "-o", str(tmp_path), *FAST)
    assert code == 2 and "is a directory, not a file" in err and not imported.exists()
    code, _, err = cli("demo", "--format", "json", "-o", str(tmp_path), *FAST)
    assert code == 2 and "is a directory, not a file" in err


def test_output_check_leaves_no_file_when_profiling_fails(tmp_path, cli):
    output = tmp_path / "report.json"
    code, _, err = cli("profile", "zoo:lenet5", "--input-shape", "1,3,32,32", "--metrics", "macs", "-o", str(output),
                       *FAST)
    assert code == 1 and "failed while computing" in err
    assert not output.exists()


def test_good_output_is_written(tmp_path, cli):
    output = tmp_path / "report.json"
    output.write_text("old")
    code, _, err = cli("profile", "tests.cli.fixture_models:tiny", "--input-shape", "2,4", "--metrics", "macs",
                       "-o", str(output), *FAST)
    assert code == 0, err
    assert _macs(output.read_text()) == 24


# ------------------------------------------------------------------------------ sys.argv and sys.exit
def test_model_file_parsing_arguments_at_import_sees_only_its_own_name(tmp_path, cli):
    (tmp_path / "train.py").write_text(
        "import argparse, sys\n"
        "parser = argparse.ArgumentParser()\nparser.add_argument('--lr', type=float, default=0.1)\n"
        "ARGS = parser.parse_args()\nARGV = list(sys.argv)\n" + MODEL)
    argv_before = list(sys.argv)
    code, out, err = cli("profile", f"{tmp_path / 'train.py'}:build", "--input-shape", "2,4", "--metrics", "macs",
                         "--format", "json", *FAST)
    assert code == 0, err
    assert _macs(out) == 24
    assert sys.argv == argv_before
    module = next(m for name, m in sys.modules.items() if name.startswith("deeplite_like_user_train_"))
    assert module.ARGV == [str(tmp_path / "train.py")] and module.ARGS.lr == 0.1


def test_model_file_whose_parser_exits_at_import_is_named(tmp_path, cli):
    (tmp_path / "train2.py").write_text(
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--data', required=True)\n"
        "ARGS = parser.parse_args()\n" + MODEL)
    code, _, err = cli("profile", f"{tmp_path / 'train2.py'}:build", "--input-shape", "2,4", *FAST)
    assert code == 1
    assert "train2.py called sys.exit(2) while being imported" in err
    assert "argparse exits so when parse_args() finds an error" in err
    assert "hint: parse command-line arguments only under `if __name__ == '__main__':`" in err


@pytest.mark.parametrize("body, message", [
    ("raise SystemExit(0)", "build() called sys.exit(0) instead of returning a model"),
    ("import sys\n    sys.exit()", "build() called sys.exit(None) instead of returning a model"),
    ("raise SystemExit('done')", "build() called sys.exit('done') instead of returning a model"),
])
def test_factory_that_exits_is_a_failure_never_a_silent_zero(tmp_path, cli, body, message):
    (tmp_path / "exits.py").write_text(f"def build():\n    {body}\n")
    code, out, err = cli("profile", f"{tmp_path / 'exits.py'}:build", "--input-shape", "2,4", *FAST)
    assert code == 1 and out == ""
    assert message in err


def test_module_that_exits_at_import_is_named(tmp_path, cli, monkeypatch):
    (tmp_path / "exiting_module_xyz.py").write_text("raise SystemExit(0)\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("profile", "exiting_module_xyz:build", *FAST)
    assert code == 1 and "module 'exiting_module_xyz' called sys.exit(0) while being imported" in err


def test_model_that_exits_while_running_is_a_failure(tmp_path, cli):
    (tmp_path / "quits.py").write_text(
        "import sys, torch\n\nclass Quits(torch.nn.Module):\n    def forward(self, x):\n        sys.exit(0)\n\n"
        "def build():\n    return Quits()\n")
    code, _, err = cli("profile", f"{tmp_path / 'quits.py'}:build", "--input-shape", "2,4", "--metrics", "macs", *FAST)
    assert code == 1
    assert "the model's code called sys.exit(0) while deeplite-like was running it" in err


# ------------------------------------------------------------------------------ inputs too large
GIB = 2**30


def test_huge_batch_size_is_refused_with_the_estimate(cli, watched):
    # LeNet-5's example is one 1x1x32x32 float32 sample: 1024 * 4 = 4096 bytes = 4 KiB per sample;
    # 10^9 samples = 4.096e12 bytes = 4.096e12 / 2^40 = 3.725 TiB.
    code, out, err = cli("profile", "zoo:lenet5", "--batch-size", "1000000000", *FAST)
    assert code == 2 and out == ""
    assert ("--batch-size 1000000000: the inputs alone would take 3.725 TiB (1000000000 samples of 4.000 KiB each), "
            "more than half of the") in err
    assert "MemoryError" not in err


def test_huge_input_shape_is_refused_with_the_estimate(cli, monkeypatch):
    # 100000 * 3 * 224 * 224 = 15,052,800,000 float32 = 60,211,200,000 bytes = 56.08 GiB.
    monkeypatch.setattr(input_memory, "available_memory", lambda: 16 * GIB)
    code, _, err = cli("profile", "tests.cli.fixture_models:tiny", "--input-shape", "100000,3,224,224", *FAST)
    assert code == 2
    assert ("--input-shape 100000,3,224,224: the inputs alone would take 56.08 GiB (100000x3x224x224 float32), "
            "more than half of the 16.00 GiB of memory available here; refused before allocating them") in err
    # Beyond any machine's memory (10^6 x 3 x 224 x 224 x 4 bytes = 560.8 GiB), without the patch:
    monkeypatch.undo()
    code, _, err = cli("profile", "tests.cli.fixture_models:tiny", "--input-shape", "1000000,3,224,224",
                       "--input-shape", "1000000,4", *FAST)
    assert code == 2
    assert ("--input-shape 1000000,3,224,224 --input-shape 1000000,4: the inputs alone would take 560.8 GiB "
            "(1000000x3x224x224 float32 + 1000000x4 float32)") in err


def test_memory_bound_is_half_of_what_is_available(monkeypatch):
    check_input_bytes("--batch-size 8", "test", 8 * GIB, available=16 * GIB)  # exactly half: allowed
    with pytest.raises(UsageError, match=r"8.000 GiB \(test\), more than half of the 15.00 GiB"):
        check_input_bytes("--batch-size 8", "test", 8 * GIB, available=15 * GIB)
    assert input_memory.available_memory() > 0
    monkeypatch.setattr(input_memory, "available_memory", lambda: None)  # unknown: nothing is refused
    check_input_bytes("--batch-size 8", "test", 10**15)


def test_sample_bytes_divides_each_input_by_its_batch():
    import numpy as np
    import torch

    # (4x3 float32: 48 bytes / 4 = 12) + (4x2 int64: 64 / 4 = 16) + kwarg (4 float64: 32 / 4 = 8) = 36.
    inputs = ((torch.ones(4, 3), [torch.ones(4, 2, dtype=torch.int64)]), {"w": np.ones(4)})
    assert sample_bytes(inputs) == 36


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_refused_before_loading_and_says_what_is_available(cli, watched):
    import torch

    spec, imported = watched
    code, _, err = cli("profile", spec, "--input-shape", "2,4", "--device", "cuda", *FAST)
    assert code == 2 and not imported.exists()
    line = err.splitlines()[0]
    assert line.startswith("deeplite-like: error: --device cuda: this torch sees no CUDA device (torch "
                           f"{torch.__version__} is built ")
    assert line.endswith("; available here: cpu, meta")
    code, _, err = cli("profile", spec, "--device", "gpu", *FAST)
    assert code == 2 and "argument --device: invalid choice: 'gpu' (choose from" in err


# ------------------------------------------------------------------------------ specs that are no factory
@pytest.mark.parametrize("spec, message", [
    ("os:system", "'os' is a standard-library module, not one that builds models"),
    ("builtins:eval", "'builtins' is a standard-library module, not one that builds models"),
    ("subprocess:getoutput", "'subprocess' is a standard-library module"),
    ("pickle:loads", "'pickle' is a standard-library module"),
    ("torch:load", "names torch.serialization.load, a loader of files or text, not a model factory"),
    ("torch.jit:load", "names torch.jit._serialization.load, a loader of files or text"),
    ("torch.hub:load", "names torch.hub.load, a loader of files or text"),
    ("numpy:load", "names numpy.load, a loader of files or text"),
])
def test_spec_naming_a_standard_or_loader_function_runs_nothing(tmp_path, cli, spec, message):
    marker = tmp_path / "MARKER"
    args = {"os:system": f'["touch {marker}"]', "builtins:eval": f'["open({str(marker)!r}, \\"w\\")"]',
            "subprocess:getoutput": f'["touch {marker}"]'}.get(spec, '{"weights_only": false}')
    code, out, err = cli("profile", spec, "--model-args", args, *FAST)
    assert code == 2 and out == "" and message in err
    assert not marker.exists()


def test_framework_model_classes_are_still_factories(cli):
    # torch.nn.Linear(4, 3) on a batch of 2: 24 MACs.
    code, out, err = cli("profile", "torch.nn:Linear", "--model-args", "[4, 3]", "--input-shape", "2,4",
                         "--metrics", "macs", "--format", "json", *FAST)
    assert code == 0, err
    assert _macs(out) == 24


def test_own_file_named_like_a_standard_module_works_by_path(tmp_path, cli):
    (tmp_path / "code.py").write_text(MODEL)
    code, out, err = cli("profile", f"{tmp_path / 'code.py'}:build", "--input-shape", "2,4", "--metrics", "macs",
                         "--format", "json", *FAST)
    assert code == 0, err
    assert _macs(out) == 24
