"""Command line: ``deeplite-like`` (also ``python -m deeplite_like``).

::

    deeplite-like profile MODEL [--input-shape 1,3,224,224 | --inputs FILE] [--format html -o report.html]
    deeplite-like compare MODEL_A MODEL_B [MODEL_C ...]
    deeplite-like check MODEL [--baseline report.json --tolerance 2%] [--max-macs 2G --max-latency 5ms ...]
    deeplite-like demo
    deeplite-like memory MODEL --train [--optimizer adamw] [--fit 80GiB]

This module holds the entry point (``main``) and the parser. The package around it:
``commands`` (``profile``, ``compare``, ``demo``, ``memory``) and ``check`` (the CI gate), with
``sweep`` for profile's ``--batch-sizes`` / ``--seq-lens``; ``loading`` (MODEL specs: zoo, hub,
factories and model files, loaded without running untrusted code); ``model_inputs``
(``--input-shape``, ``--inputs``, ``--dtype``); ``runner`` (profiling a loaded model);
``flags`` (the shared options and the strict parsing of ``2G``, ``5ms``, ``100MiB``, ``2%``);
``output`` (formats, ``--output``, the JSON schema version); ``progress`` (the terminal
progress bar); ``exit_codes``. Errors are one line plus a hint on standard error; exit code 2
for a usage error, 1 for a failure while profiling (see ``deeplite_like.cli.exit_codes``);
``--verbose`` adds the traceback.
"""
from __future__ import annotations

import argparse
import sys
import traceback
import warnings
from typing import IO, Any, Sequence

from deeplite_like._version import __version__
from deeplite_like.cli import check
from deeplite_like.cli.commands import (add_compare_parser, add_demo_parser, add_memory_parser,
                                        add_profile_parser)
from deeplite_like.cli.exit_codes import (EXIT_FAILURE, EXIT_INTERRUPTED, CommandError, ProfilingFailed, interrupted,
                                          watching_interrupts)

PROG = "deeplite-like"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Profile and compare deep-learning models: MACs, "
                                     "FLOPs, parameters, size, memory and latency, per model and per layer.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_profile_parser(commands)
    add_compare_parser(commands)
    check.add_parser(commands)
    add_demo_parser(commands)
    add_memory_parser(commands)
    return parser


def report_error(error: BaseException, verbose: bool, stderr: IO[str], quiet: bool = False) -> int:
    """Print ``error`` as one line plus a hint (and the traceback when ``verbose``); return the exit code.

    ``quiet``: print nothing unless ``verbose`` (the error followed a Ctrl-C, which is what is reported).
    """
    if quiet and not verbose:
        return EXIT_INTERRUPTED
    if verbose:
        traceback.print_exception(type(error), error, error.__traceback__, file=stderr)
    if isinstance(error, CommandError):
        print(f"{PROG}: error: {error.message}", file=stderr)
        if error.hint:
            print(f"  hint: {error.hint}", file=stderr)
        return error.exit_code
    print(f"{PROG}: error: unexpected {type(error).__name__}: {error}", file=stderr)
    if not verbose:
        print("  hint: run again with --verbose for the traceback, and report it if it looks like a bug",
              file=stderr)
    return EXIT_FAILURE


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
                  line: str | None = None) -> None:
    """A warning on the command line: one line naming its kind (``deeplite-like: SeededShapesWarning: ...``), not
    the source line of the library that raised it."""
    print(f"{PROG}: {category.__name__}: {message}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    args = build_parser().parse_args(argv)  # usage errors exit here with code 2
    with warnings.catch_warnings():  # (showwarning put back on return)
        warnings.showwarning = _show_warning
        return _run(args)


def _run(args: Any) -> int:
    try:
        with watching_interrupts():
            try:
                code = args.run(args)
            except KeyboardInterrupt:
                code = EXIT_INTERRUPTED
            except SystemExit as exc:  # the model's own code exited while it ran: never a silent success
                error = ProfilingFailed(f"the model's code called sys.exit({exc.code!r}) while deeplite-like was "
                                        "running it", "models must return or raise, not exit; --verbose shows where "
                                        "it exited")
                error.__traceback__ = exc.__traceback__
                code = report_error(error, getattr(args, "verbose", False), sys.stderr, quiet=interrupted())
            except Exception as error:  # every error becomes one line and an exit code; --verbose shows the rest
                code = report_error(error, getattr(args, "verbose", False), sys.stderr, quiet=interrupted())
            # A Ctrl-C swallowed on its way (by a __del__, a callback, a broad except) still ends the command.
            if interrupted():
                code = EXIT_INTERRUPTED
    except KeyboardInterrupt:  # a second Ctrl-C while the first was being handled
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        print(f"\n{PROG}: interrupted", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
