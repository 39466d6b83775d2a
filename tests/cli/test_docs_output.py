"""docs/cli.rst shows the output the command line prints: every console block whose commands run
here (``deeplite-like`` on the bundled ``zoo:`` models, and ``echo $?``) is run, and the block
must equal what they print on standard output, as on an 80-column terminal (``COLUMNS=80``
unless the command sets it). Blocks naming what is not here (``models.py``, ``hf:``, ``.onnx``
files) are not run.

A block without times must match byte for byte. Times differ from run to run, so in a block that
shows them the time cells are masked (the ``Execution time`` and ``Throughput`` rows, the per-layer
``Time (hooked)`` column, the sweep's latency columns), a row folded over lines is joined, table
padding and rules are compared without their widths, and the notes (about timing noise, which
depend on how busy the machine is) are left out: every other table cell and the "Measured with"
line must match.

Regenerate the blocks after a change to the output with::

    PYTHONPATH=. python tests/cli/test_docs_output.py --write
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

import pytest

from deeplite_like.cli import main

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.rst"
_BLOCK = re.compile(r"(\.\. code-block:: console\n\n)((?:    .*\n|\n)+)")
_RUNNABLE = re.compile(r"(COLUMNS=\d+ )?deeplite-like (profile|compare|check|demo|memory)( |$)")
_TIMED_ROWS = ("Execution time", "Throughput")
_TIMED_COLUMNS = ("Time (hooked)", "Latency", "Spread (IQR)", "Per sample", "Samples/s")
_TIME = re.compile(r"\b(ns|us|µs|ms|samples/s)\b|Execution time|Time \(hooked\)|Latency")


def console_blocks(text: str) -> list[tuple[re.Match, list[tuple[list[str], str]], str]]:
    """``(match, [(source lines, command)], shown output)`` of every console block of ``text``.

    A command continued with a backslash is joined into one; the shown output is every other line.
    """
    blocks = []
    for match in _BLOCK.finditer(text):
        commands: list[tuple[list[str], str]] = []
        output, continued = [], False
        for line in match.group(2).rstrip("\n").splitlines():
            if continued:
                source, command = commands[-1]
                commands[-1] = (source + [line], command[:-1].rstrip() + " " + line.strip())
            elif line.startswith("    $ "):
                commands.append(([line], line[6:]))
            else:
                output.append(line[4:])
            continued = (continued or line.startswith("    $ ")) and line.endswith("\\")
        blocks.append((match, commands, "\n".join(output) + "\n"))
    return blocks


def runnable(commands: list[str]) -> bool:
    """Whether every command runs here: ``deeplite-like`` on zoo models only, or ``echo $?``."""
    for command in commands:
        if command == "echo $?":
            continue
        if not _RUNNABLE.match(command):
            return False
        specs = [word for word in shlex.split(command)[2:] if not word.startswith("-") and ":" in word]
        if any(not spec.startswith("zoo:") for spec in specs):
            return False
    return bool(commands)


def run_block(commands: list[str], directory: Path) -> list[str]:
    """What each command prints on standard output, run in ``directory`` as on an 80-column terminal."""
    printed, code = [], 0
    previous, columns = os.getcwd(), os.environ.get("COLUMNS")
    os.chdir(directory)
    try:
        for command in commands:
            if command == "echo $?":
                printed.append(f"{code}\n")
                continue
            words = shlex.split(command)
            os.environ["COLUMNS"] = words.pop(0).split("=", 1)[1] if words[0].startswith("COLUMNS=") else "80"
            stdout = io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
                code = main(words[1:])
            printed.append(stdout.getvalue())
    finally:
        os.chdir(previous)
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
    return printed


def without_times(text: str) -> list[str]:
    """``text`` with time cells masked, table widths left out and the notes (timing noise) dropped.

    A table row folded over several lines is joined first (cell by cell, with spaces), so where a
    cell folds, which depends on how wide the times made the columns, does not matter.
    """
    lines, masked_columns, notes, previous_row = [], set(), [], None
    for line in text.splitlines():
        if line.startswith("+"):
            lines.append("+")
            previous_row = None
            continue
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if previous_row is not None and not cells[0] and len(cells) == len(previous_row):
                previous_row[:] = [" ".join(filter(None, pair)) for pair in zip(previous_row, cells)]
                continue
            previous_row = cells
            lines.append(cells)
            continue
        previous_row = None
        if line.startswith(("- ", "note: ")) or not (line.startswith("  ") and notes):
            notes = [line]
            lines.append(line)
        else:  # a note's folded continuation
            notes.append(line)
            lines[-1] += " " + line.strip()
    shown = []
    for line in lines:
        if isinstance(line, list):
            if any(cell in _TIMED_COLUMNS for cell in line):
                masked_columns = {i for i, cell in enumerate(line) if cell in _TIMED_COLUMNS}
            elif line[0] in _TIMED_ROWS:
                line = [line[0]] + ["<time>"] * (len(line) - 1)
            else:
                line = ["<time>" if i in masked_columns and cell else cell for i, cell in enumerate(line)]
            line = "|".join(line)
        elif not line.strip():
            masked_columns = set()
        shown.append(line)
    # What the notes say depends on how busy the machine was (noise, spread): a timed block is held to
    # its tables' untimed cells and its "Measured with" line
    return [line for line in shown if line == "+" or "|" in line or line.startswith("Measured with")]


def checked_blocks() -> list[tuple[list[str], str]]:
    text = DOCS.read_text(encoding="utf-8")
    blocks = [([command for _, command in commands], shown) for _, commands, shown in console_blocks(text)]
    return [(commands, shown) for commands, shown in blocks if runnable(commands)]


def test_the_docs_show_the_runnable_blocks():
    commands = [block[0][-1] for block in checked_blocks()]
    assert "deeplite-like profile zoo:transformer_encoder --causal-half --metrics macs" in commands
    assert "COLUMNS=80 deeplite-like profile zoo:resnet_small" in commands
    assert len(commands) >= 8


@pytest.mark.slow
@pytest.mark.parametrize("commands, shown", checked_blocks(), ids=lambda value: value[-1][:60]
                         if isinstance(value, list) else "")
def test_a_console_block_shows_what_the_command_prints(commands, shown, tmp_path):
    printed = "".join(run_block(commands, tmp_path))
    if _TIME.search(shown) or _TIME.search(printed):
        assert without_times(printed) == without_times(shown)
    else:
        assert printed == shown


def write() -> None:
    """Rewrite every runnable block of docs/cli.rst with what its commands print now."""
    text = DOCS.read_text(encoding="utf-8")
    pieces, end = [], 0
    for match, commands, _ in console_blocks(text):
        if not runnable([command for _, command in commands]):
            continue
        with tempfile.TemporaryDirectory() as directory:
            printed = run_block([command for _, command in commands], Path(directory))
        lines = []
        for (source, _), output in zip(commands, printed):
            lines += source + [("    " + line).rstrip() for line in output.splitlines()]
        blank = len(match.group(2)) - len(match.group(2).rstrip("\n"))
        pieces.append(text[end:match.start(2)] + "\n".join(lines) + "\n" * blank)
        end = match.end(2)
    DOCS.write_text("".join(pieces) + text[end:], encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=. python tests/cli/test_docs_output.py --write")
    write()
