"""The counting core knows nothing of ``distributed/``: that package registers its behaviour with the recorder.

Two checks: no module of ``counting/`` imports ``distributed/`` (read from the source, deferred
imports included), and a plain count runs no code of ``distributed/recording.py``.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import torch

import deeplite_like.backends.torch.counting as counting
import deeplite_like.backends.torch.distributed.recording as recording
from deeplite_like.backends.torch import count_ops
from deeplite_like.backends.torch.counting import recorder


def test_the_counting_core_imports_nothing_of_distributed():
    found = []
    for path in Path(counting.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                name = ("." * node.level) + (node.module or "")
                names = [name] + [f"{name}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [f"{path.name}: {n}" for n in names if "distributed" in n.split(".")]
    assert found == []


def test_the_backend_registers_the_distributed_recording():
    assert [type(hook).__module__ for hook in recorder._distributed] == [recording.__name__]


def test_a_plain_count_runs_no_distributed_code():
    model, x = torch.nn.Linear(3, 4), torch.zeros(2, 3)
    ran = []

    def watch(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == recording.__file__:
            ran.append(frame.f_code.co_name)

    sys.setprofile(watch)
    try:
        result = count_ops(model, x, backward=True)
    finally:
        sys.setprofile(None)
    assert result.macs == 2 * (2 * 3 * 4)  # forward (2, 3) @ (3, 4): 24; backward: grad_weight only (x needs none): 24
    assert ran == []
