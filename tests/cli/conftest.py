"""Fixtures of the command-line tests: run ``main`` in-process and capture what it prints."""
from __future__ import annotations

import pytest

from deeplite_like.cli import main


@pytest.fixture
def cli(capsys):
    """``cli('profile', 'zoo:lenet5', ...) -> (exit code, stdout, stderr)``."""

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run
