"""The docs say true things: named tests and API names exist, every option is documented,
and the user guide's Python blocks run."""
from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from deeplite_like.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_every_test_the_conventions_table_names_exists():
    text = (DOCS / "conventions.rst").read_text(encoding="utf-8")
    references = sorted(set(re.findall(r"``(tests/[\w/]+\.py)::(test_\w+)``", text)))
    assert len(references) >= 30
    for path, name in references:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in defined, f"docs/conventions.rst names {path}::{name}, which does not exist"


def _owner(dotted: str) -> tuple[object, str]:
    """The deepest importable module of a documented dotted name, and the attribute path below it."""
    module, _, attribute = dotted.rpartition(".")
    while True:
        try:
            return importlib.import_module(module), attribute
        except ModuleNotFoundError:
            module, _, parent = module.rpartition(".")
            attribute = f"{parent}.{attribute}"


def test_every_api_name_exists():
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    names = re.findall(r"^\.\. py:(?:class|function|data|exception):: ([\w.]+)", text, re.M)
    assert len(names) >= 40
    for dotted in names:
        owner, attribute = _owner(dotted)
        first, *rest = attribute.split(".")
        if not rest and first in getattr(owner, "__all__", ()):
            continue  # a lazily exported name: listed without importing its framework (TensorFlow is slow)
        value = owner
        for part in attribute.split("."):
            value = getattr(value, part)  # AttributeError names what the docs got wrong


def test_every_command_line_option_is_documented():
    text = (DOCS / "cli.rst").read_text(encoding="utf-8")
    commands = build_parser()._subparsers._group_actions[0].choices
    for name, parser in commands.items():
        assert f"deeplite-like {name}" in text
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"``{option}" in text or f"{option} " in text, f"docs/cli.rst misses {name} {option}"


def test_index_links_every_page():
    index = (DOCS / "index.rst").read_text(encoding="utf-8")
    for page in ("user_guide", "cli", "conventions", "api", "zoo", "benchmarks"):
        assert f"\n   {page}\n" in index


def test_user_guide_python_blocks_run(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    text = (DOCS / "user_guide.rst").read_text(encoding="utf-8")
    blocks = [re.sub(r"^    ", "", b, flags=re.M)
              for b in re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text)]
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)  # the blocks save files
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/user_guide.rst", "exec"), namespace)
    assert (tmp_path / "resnet_small.md").exists() and (tmp_path / "resnet_small.html").exists()
    # docs/zoo.rst: 12,501,632 / 3,236,160 MACs = 3.863 -> "3.86x fewer"
    assert namespace["row"]["changes"]["resnet_small_student"]["text"] == "3.86x fewer"


def test_every_documented_signature_names_the_real_parameters():
    """docs/api.rst's signatures list each function's parameters as ``inspect.signature`` has them (a ``...``
    stands for the rest of a long peer-compatible list), so an option added to the code is added there too."""
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    checked = 0
    for dotted, listed in re.findall(r"^\.\. py:function:: ([\w.]+)\((.*)\)\s*$", text, re.M):
        value, attribute = _owner(dotted)
        for part in attribute.split("."):
            value = getattr(value, part)
        try:
            real = [name for name in inspect.signature(value).parameters if name != "self"]
        except (TypeError, ValueError):  # (a builtin without a signature)
            continue
        documented = [re.split(r"[=:]", item.strip())[0].lstrip("*") for item in re.split(r",\s*(?![^()]*\))", listed)
                      if item.strip() not in ("", "*", "/")]
        if "..." in documented:
            documented.remove("...")
            assert set(documented) <= set(real), (dotted, sorted(set(documented) - set(real)))
        else:
            assert documented == real, (dotted, documented, real)
        checked += 1
    assert checked >= 30
