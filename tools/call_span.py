"""How many of the package's files one call runs code from, and how deep its own frames nest.

    python tools/call_span.py            # count_ops, compute_network_status, the CLI's profile

A call that crosses many rooms is hard to follow; this measures it for three calls on the zoo's
LeNet-5: the files of ``deeplite_like`` whose code runs (imports excluded: every module is imported
before the call), and the deepest stack of ``deeplite_like`` frames at any moment.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings


def _span(call) -> tuple[int, int]:
    package = os.path.dirname(__import__("deeplite_like").__file__)
    files, deepest = set(), 0

    def profile(frame, event, arg):
        nonlocal deepest
        if event != "call" or not frame.f_code.co_filename.startswith(package):
            return
        files.add(frame.f_code.co_filename)
        depth, f = 0, frame
        while f is not None:
            depth += f.f_code.co_filename.startswith(package)
            f = f.f_back
        deepest = max(deepest, depth)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return len(files), deepest


def main() -> None:
    warnings.simplefilter("ignore")
    from deeplite_like.backends.torch import TorchProfiler, count_ops
    from deeplite_like.cli import main as cli_main
    from deeplite_like.zoo import get

    spec = get("lenet5")
    model, x = spec.build(), spec.example_input(batch_size=1)
    splits = {"train": [(x, None)], "test": [(x, None)]}

    def status():
        TorchProfiler(model, splits).compute_network_status(min_run_time=0.01)

    def cli():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cli_main(["profile", "zoo:lenet5", "--min-run-time", "0.01", "--no-progress"])

    for call in (lambda: count_ops(model, x), status, cli):   # warm: imports and first-call caches
        call()
    for name, call in (("count_ops", lambda: count_ops(model, x)), ("compute_network_status", status),
                       ("cli profile", cli)):
        files, depth = _span(call)
        print(f"{name:24s} {files:3d} files  {depth:3d} frames deep")


if __name__ == "__main__":
    main()
