"""Command line: ``deeplite-like demo`` (also ``python -m deeplite_like demo``)."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence


def _demo(args: argparse.Namespace) -> int:
    """Profile every bundled teacher/student pair and print their compare reports."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("deeplite-like demo: the bundled models need PyTorch; install it with "
              "pip install 'deeplite-like[torch]'", file=sys.stderr)
        return 1
    from deeplite_like import compare
    from deeplite_like.backends.torch import TorchProfiler
    from deeplite_like.zoo import ZOO, get

    options = dict(batch_size=args.batch_size, min_run_time=args.min_run_time)
    pairs = [(name, entry.student) for name, entry in ZOO.items() if entry.student and entry.framework == "torch"]
    singles = [name for name, entry in ZOO.items() if not entry.student and not entry.teacher]
    for name in singles:
        entry = get(name)
        profiler = TorchProfiler(entry.build(), entry.synthetic_splits(batch_size=args.batch_size), name=name)
        print(profiler.compute_network_status(**options), end="\n\n")
    for teacher_name, student_name in pairs:
        profilers = []
        for name in (teacher_name, student_name):
            entry = get(name)
            profilers.append(TorchProfiler(entry.build(), entry.synthetic_splits(batch_size=args.batch_size),
                                           name=name))
        print(compare(profilers, **options), end="\n\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deeplite-like", description="Profile and compare deep-learning models.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="profile and compare the bundled example models")
    demo.add_argument("--batch-size", type=int, default=1, help="samples per batch (default 1)")
    demo.add_argument("--min-run-time", type=float, default=0.2,
                      help="seconds of timed runs per model, after warm-up (default 0.2)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
