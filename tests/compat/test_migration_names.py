"""docs/migration.rst's table of every deeplite / DeepSpeed / cli99 public name is true of the code.

Every ``deeplite_like...`` name in its "here" column exists; every name of a row marked "not
provided" raises ``NotProvidedError`` (an ``ImportError`` saying what to use instead) from the
module its own module maps to, or, for ``FlopsProfiler`` methods, is absent from the class.
"""
import importlib
import re
from pathlib import Path

import pytest

from deeplite_like.errors import NotProvidedError
from deeplite_like.profiling import FlopsProfiler

DOC = (Path(__file__).resolve().parents[2] / "docs" / "migration.rst").read_text(encoding="utf-8")
SECTION = DOC.split("Every public name, and where it lives here", 1)[1].split("deeplite's data-loader layer", 1)[0]

# their module -> ours (the Imports table of the same page)
MODULES = {
    "deeplite.profiler": "deeplite_like", "deeplite.profiler.utils": "deeplite_like",
    "deeplite.profiler.formatter": "deeplite_like", "deeplite.profiler.metrics": "deeplite_like.metrics",
    "deeplite.torch_profiler.torch_inference": "deeplite_like.backends.torch",
    "deeplite.tf_profiler.tf_profiler": "deeplite_like.backends.keras",
    "deeplite.tf_profiler.tf_inference": "deeplite_like.backends.keras",
}


def rows():
    """(theirs, here) cell texts of the section's list-tables."""
    found = []
    for block in re.split(r"\n   \* - ", SECTION)[1:]:
        theirs, _, here = block.partition("\n     - ")
        found.append((" ".join(theirs.split()), " ".join(here.split("\n\n")[0].split())))
    return found


def resolve(dotted):
    module, _, attribute = dotted.rpartition(".")
    while module:
        try:
            owner = importlib.import_module(module)
            break
        except ModuleNotFoundError:
            module, _, parent = module.rpartition(".")
            attribute = f"{parent}.{attribute}"
    for part in attribute.split("."):
        owner = getattr(owner, part)
    return owner


def provided_names():
    return sorted({name for theirs, here in rows() if not here.startswith("not provided")
                   for name in re.findall(r"``(deeplite_like\.[\w.]+)``", here)})


def not_provided_names():
    names = []
    for theirs, here in rows():
        if not here.startswith("not provided"):
            continue
        module_names = re.match(r"``([\w.]+)``: (.*)", theirs)
        if module_names:  # "``module``: ``a``, ``b``"
            module, rest = module_names.groups()
            names += [(MODULES[module], name) for name in re.findall(r"``(\w+)``", rest)]
        elif theirs.startswith("``FlopsProfiler."):  # methods and attributes of the class
            names += [("FlopsProfiler", name.lstrip(".").split(".")[-1])
                      for name in re.findall(r"``\.?([\w.]+)``", theirs)]
        else:
            for token in re.findall(r"``([\w.]+)``", theirs):
                module, _, name = token.rpartition(".")
                names.append((MODULES.get(module, "deeplite_like.profiling"), name))
    return names


def test_the_table_is_found():
    assert len(rows()) >= 25 and len(provided_names()) >= 50 and len(not_provided_names()) >= 25


@pytest.mark.parametrize("dotted", provided_names())
def test_every_name_the_table_places_exists(dotted):
    assert resolve(dotted) is not None


@pytest.mark.parametrize("module, name", not_provided_names())
def test_every_name_not_provided_says_what_to_use(module, name):
    if module == "FlopsProfiler":
        assert not hasattr(FlopsProfiler, name)
        return
    with pytest.raises(NotProvidedError, match=r"is not provided: .+ \(see docs/migration.rst\)"):
        getattr(importlib.import_module(module), name)
