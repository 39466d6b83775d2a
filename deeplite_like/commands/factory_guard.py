"""``package.module:factory`` specs that name no model factory: refused before they run.

A MODEL spec names code to run, by design (the user's own factory). Two kinds of callable are
not model factories and would turn the spec into something else: a standard-library function
(``os:system``, ``builtins:eval``, ``subprocess:getoutput`` with ``--model-args`` as its
argument), and a framework's file loader (``torch:load``, ``numpy:load``,
``keras.saving:load_model``), which ``--model-args`` could call with its unsafe options
(``weights_only=False``, ``allow_pickle=True``, ``safe_mode=False``), bypassing the safe
loading of model files. Standard-library modules are refused before they are imported.

This is a guard against mistakes, not a sandbox (docs/cli.rst, "MODEL specs: what you name
runs"): a spec is a command the user chose, like ``python -m module``, and any other installed
function that evaluates its argument runs if named. That is why a spec is taken only from the
command line, never from a file.
"""
from __future__ import annotations

import re
import sys
from typing import Any

from deeplite_like.commands.errors import UsageError

#: Python 3.9 has no ``sys.stdlib_module_names``: the modules that matter most, then.
_STDLIB_FALLBACK = frozenset({"os", "sys", "subprocess", "builtins", "pickle", "shutil", "pty", "runpy", "code",
                              "importlib", "ctypes", "socket", "webbrowser", "antigravity", "this", "shelve",
                              "marshal", "posix", "nt", "io", "pathlib", "tempfile", "urllib", "http", "ftplib",
                              "smtplib", "multiprocessing", "threading", "signal", "operator", "functools"})
STDLIB = frozenset(getattr(sys, "stdlib_module_names", _STDLIB_FALLBACK))
#: Packages whose file loaders can unpickle or deserialise code.
FRAMEWORKS = frozenset({"torch", "numpy", "keras", "tensorflow", "tf_keras", "joblib", "dill", "cloudpickle",
                        "pandas", "scipy", "h5py", "sympy"})
_LOADER = re.compile(r"(^|_)(un)?(load|loads|pickle|unpickle|load_model|sympify|lambdify|parse_expr)($|_)")
_HINT = ("name your own function that builds the model (models.py:build), or pass a saved model file itself "
         "(model.pt2, model.pt, model.keras), which is loaded safely")


def refuse_stdlib_module(spec: str, module_name: str) -> None:
    """Raise ``UsageError`` if ``module_name`` is in the standard library (checked before importing it)."""
    top = module_name.split(".")[0]
    if top in STDLIB:
        raise UsageError(f"{spec!r}: {module_name!r} is a standard-library module, not one that builds models; "
                         "deeplite-like does not call its functions", _HINT + "; a file of yours named like a "
                         f"standard module can be named by its path: ./{top}.py:FACTORY")


def refuse_loader(spec: str, factory: Any) -> None:
    """Raise ``UsageError`` if ``factory`` is a framework's file loader or a standard-library function."""
    module = getattr(factory, "__module__", None) or ""
    name = getattr(factory, "__name__", "") or ""
    top = module.split(".")[0]
    if top in STDLIB:
        raise UsageError(f"{spec!r} names {module}.{name}, a standard-library function, not a model factory",
                         _HINT)
    if top in FRAMEWORKS and _LOADER.search(name.lower()):
        raise UsageError(f"{spec!r} names {module}.{name}, a loader of files or text, not a model factory; "
                         "through it --model-args could load a file with unsafe options or evaluate text, so "
                         "deeplite-like refuses", _HINT)
