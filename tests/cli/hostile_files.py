"""Hostile files for the security tests: each would create a marker file if its code ran.

``Plant(marker)`` pickles as a call of ``open(marker, "w")``: unpickling it with plain
``pickle`` (or ``torch.load(weights_only=False)``) creates the marker file, and nothing else
does. The archive helpers rewrite one record of a real ``torch.export.save`` archive.
"""
from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Callable

import torch
from torch import nn


class Plant:
    """A pickle whose loading creates ``marker`` (``__reduce__`` -> ``open(marker, "w")``)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def raw_pickle(marker: Path) -> bytes:
    """A plain pickle stream (protocol 2) of ``Plant(marker)``."""
    return pickle.dumps(Plant(marker), protocol=2)


def torch_pickle(marker: Path, wrap: Callable = lambda plant: plant) -> bytes:
    """``torch.save(wrap(Plant(marker)))``: the zip format torch writes, with the plant inside."""
    buffer = io.BytesIO()
    torch.save(wrap(Plant(marker)), buffer)
    return buffer.getvalue()


def export_archive(path: Path, dynamic: bool = False) -> Path:
    """``torch.export.save`` of Linear(4, 3) on a 2x4 input (batch axis dynamic when asked)."""
    torch.manual_seed(0)
    shapes = {"input": {0: torch.export.Dim("batch", max=1024)}} if dynamic else None
    program = torch.export.export(nn.Linear(4, 3), (torch.randn(2, 4),), dynamic_shapes=shapes)
    torch.export.save(program, str(path))
    return path


def rewrite(path: Path, target: Path, change: Callable[[str, bytes], bytes | None],
            extra: dict[str, bytes] | None = None) -> Path:
    """Copy the archive ``path`` to ``target``, each record through ``change(record, data)``.

    ``record`` is the name below the archive's top folder (``data/sample_inputs/model.pt``);
    ``change`` returns the new bytes (``None`` keeps them). ``extra`` adds records.
    """
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        top = source.namelist()[0].split("/", 1)[0]
        for info in source.infolist():
            record = info.filename.split("/", 1)[1]
            data = source.read(info)
            new = change(record, data)
            out.writestr(info.filename, data if new is None else new)
        for record, data in (extra or {}).items():
            out.writestr(f"{top}/{record}", data)
    return target


def replace(record: str, data: bytes) -> Callable[[str, bytes], bytes | None]:
    """A ``change`` for ``rewrite``: the record named ``record`` gets ``data``."""
    return lambda name, old: data if name == record else None


def edit_text(record: str, old: str, new: str) -> Callable[[str, bytes], bytes | None]:
    """A ``change`` for ``rewrite``: replace ``old`` by ``new`` in the text of ``record`` (must occur)."""
    def change(name: str, data: bytes) -> bytes | None:
        if name != record:
            return None
        text = data.decode()
        assert old in text, f"{old!r} is not in {record}"
        return text.replace(old, new).encode()

    return change
