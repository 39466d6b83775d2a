"""Run the command line over the zoo in every command and format, and keep what it printed.

    python tools/cli_outputs.py OUT_DIR [RUN ...]  # one file per run: exit code, stdout, stderr
    python tools/cli_outputs.py --diff DIR_A DIR_B # the runs whose output differs

A layout change must leave the command line's output byte-identical: run this before and after
(``PYTHONPATH`` picks the tree) and diff the two folders. Runs that time the model are left out of
the byte comparison except ``demo``, whose lines that carry a timing are left out (timings
differ from run to run; everything else must not).
"""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

NO_TIME = ["--metrics", "macs,flops,params,size,memory,layers"]
TORCH_ZOO = ["lenet5", "resnet_small", "resnet_small_student", "mobilenet_small", "mobilenet_small_student",
             "transformer_encoder", "transformer_encoder_student", "lstm_tagger", "lstm_tagger_student"]

RUNS: dict[str, list[str]] = {
    **{f"profile-{name}": ["profile", f"zoo:{name}", *NO_TIME, "--width", "0"] for name in TORCH_ZOO},
    "profile-lenet5_keras": ["profile", "zoo:lenet5_keras", *NO_TIME, "--width", "0"],
    **{f"profile-lenet5-{fmt}": ["profile", "zoo:lenet5", *NO_TIME, "--format", fmt]
       for fmt in ("json", "csv", "markdown")},
    **{f"profile-transformer-{fmt}": ["profile", "zoo:transformer_encoder", *NO_TIME, "--format", fmt]
       for fmt in ("json", "csv", "markdown")},
    "profile-keras-json": ["profile", "zoo:lenet5_keras", *NO_TIME, "--format", "json"],
    "profile-tree": ["profile", "zoo:resnet_small", *NO_TIME, "--tree", "--width", "0"],
    "profile-depth-top": ["profile", "zoo:resnet_small", *NO_TIME, "--depth", "2", "--top", "4", "--sort", "params",
                          "--width", "80"],
    "profile-columns": ["profile", "zoo:mobilenet_small", *NO_TIME, "--columns", "module,type,params,macs"],
    "profile-backward": ["profile", "zoo:transformer_encoder", *NO_TIME, "--backward", "--width", "0"],
    "profile-meta": ["profile", "zoo:resnet_small", "--device", "meta", "--width", "0"],
    "profile-meta-json": ["profile", "zoo:transformer_encoder", "--device", "meta", "--format", "json"],
    "profile-batch": ["profile", "zoo:lenet5", *NO_TIME, "--batch-size", "4", "--width", "0"],
    "profile-shape": ["profile", "zoo:lenet5", *NO_TIME, "--input-shape", "2,1,32,32", "--width", "0"],
    "profile-bf16": ["profile", "zoo:lenet5", *NO_TIME, "--dtype", "bfloat16", "--width", "0"],
    "profile-sweep": ["profile", "zoo:lenet5", "--batch-sizes", "1,2,4", "--metrics", "macs,memory", "--width", "0"],
    "compare-resnet": ["compare", "zoo:resnet_small", "zoo:resnet_small_student", *NO_TIME, "--width", "0"],
    "compare-three": ["compare", "zoo:lenet5", "zoo:resnet_small", "zoo:mobilenet_small", *NO_TIME, "--width", "0"],
    "compare-json": ["compare", "zoo:lstm_tagger", "zoo:lstm_tagger_student", *NO_TIME, "--format", "json"],
    "compare-markdown": ["compare", "zoo:transformer_encoder", "zoo:transformer_encoder_student", *NO_TIME,
                         "--format", "markdown"],
    "compare-cross-backend": ["compare", "zoo:lenet5", "zoo:lenet5_keras", *NO_TIME, "--width", "0"],
    "check-pass": ["check", "zoo:lenet5", "--max-macs", "1G"],
    "check-fail": ["check", "zoo:resnet_small", "--max-macs", "1M", "--max-params", "10k"],
    "check-json": ["check", "zoo:lenet5", "--max-macs", "1k", "--format", "json"],
    "memory-train": ["memory", "zoo:lenet5", "--train", "--width", "0"],
    "memory-transformer": ["memory", "zoo:transformer_encoder", "--train", "--batch-size", "8", "--width", "0"],
    "memory-json": ["memory", "zoo:resnet_small", "--train", "--format", "json"],
    "memory-forward": ["memory", "zoo:mobilenet_small", "--width", "0"],
    "error-no-model": ["profile", "no_such_file.pt"],
    "error-bad-zoo": ["profile", "zoo:no_such_model"],
    "error-bad-metric": ["profile", "zoo:lenet5", "--metrics", "nonsense"],
    "error-bad-shape": ["profile", "zoo:lenet5", "--input-shape", "1,x,3"],
    "help": ["--help"],
    "help-profile": ["profile", "--help"],
    "help-check": ["check", "--help"],
    "help-memory": ["memory", "--help"],
    "demo": ["demo", "--width", "0"],
}

_TIMED = re.compile(r"Execution time|Throughput|within noise|latency may be noise|Latency")


def _mask_timings(text: str) -> str:
    """Leave out the lines that carry a timing (rows, notes), and the padding their varying widths set."""
    kept = "".join(line for line in text.splitlines(keepends=True) if not _TIMED.search(line))
    return re.sub(r" {2,}", " ", re.sub(r"[-+]{4,}", "---", kept))


def run_all(out_dir: Path, only: set[str] | None = None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1")
    with tempfile.TemporaryDirectory() as cwd:
        for name, args in RUNS.items():
            if only and name not in only:
                continue
            done = subprocess.run([sys.executable, "-m", "deeplite_like", *args], capture_output=True, text=True,
                                  cwd=cwd, env=env, timeout=600)
            stdout = _mask_timings(done.stdout) if name == "demo" else done.stdout
            (out_dir / f"{name}.txt").write_text(f"exit {done.returncode}\n--- stdout\n{stdout}--- stderr\n"
                                                 f"{done.stderr}", encoding="utf-8")
            print(f"{name}: exit {done.returncode}", flush=True)


def diff(a: Path, b: Path) -> int:
    differing = 0
    for path in sorted(a.glob("*.txt")):
        other = b / path.name
        old = path.read_text(encoding="utf-8").splitlines(keepends=True)
        new = other.read_text(encoding="utf-8").splitlines(keepends=True) if other.exists() else []
        if old != new:
            differing += 1
            sys.stdout.writelines(difflib.unified_diff(old, new, str(path), str(other), n=1))
    print(f"{differing} of {len(list(a.glob('*.txt')))} runs differ")
    return 1 if differing else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--diff"]:
        sys.exit(diff(Path(sys.argv[2]), Path(sys.argv[3])))
    run_all(Path(sys.argv[1]), set(sys.argv[2:]) or None)
