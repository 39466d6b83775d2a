"""The two kinds of command-line error, and the exit codes they map to.

Exit codes: 0 success; 2 a usage error (the command line asks for something that cannot be
done as written: an unknown model spec, a missing optional package, a bad shape, a file that
cannot be loaded safely), found before any model code runs; 1 a failure while the model is
built or profiled. Every error is one line plus a hint; ``--verbose`` adds the traceback.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """An error the command line reports as one line plus a hint.

    Attributes:
        message: what was wrong, and where (which model spec, file or option).
        hint: what to do about it (may be empty).
        exit_code: ``EXIT_USAGE`` (2) or ``EXIT_FAILURE`` (1).
    """

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(CommandError):
    """The command line asks for something that cannot be done as written (exit code 2)."""

    exit_code = EXIT_USAGE


class ProfilingFailed(CommandError):
    """Building or profiling the model failed (exit code 1)."""
