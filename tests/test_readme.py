"""The README's Python examples run as written."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.rst"


def python_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text)
    return [re.sub(r"^    ", "", block, flags=re.M) for block in blocks]


def test_readme_has_examples():
    assert len(python_blocks()) >= 2


def test_readme_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)  # the examples may save files
    namespace: dict = {}
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), namespace)
    assert (tmp_path / "compare.md").exists()
