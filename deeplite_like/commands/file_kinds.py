"""What a file holds, told from its first bytes, before any loader reads it.

The command line names a file's kind in its errors ("it is a text file", "it is not a zip
archive") instead of passing on what a loader says about bytes it did not expect; it never
shows the file's content.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

ZIP = "zip"
PICKLE = "pickle"
NUMPY = "numpy"
TEXT = "text"
EMPTY = "empty"
BINARY = "binary"
BROKEN_ZIP = "broken zip"

_DESCRIPTIONS = {ZIP: "a zip archive", PICKLE: "a Python pickle", NUMPY: "a numpy array file",
                 TEXT: "a text file", EMPTY: "an empty file",
                 BROKEN_ZIP: "a truncated or damaged zip archive", BINARY: "a binary file of an unknown kind"}


def kind_of(path: Path) -> str:
    """``'zip'``, ``'broken zip'``, ``'pickle'``, ``'numpy'``, ``'text'``, ``'empty'`` or ``'binary'``.

    Told from the first 4 KiB (a zip archive also by its central directory, at the end).
    """
    with open(path, "rb") as file:
        head = file.read(4096)
    if not head:
        return EMPTY
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return ZIP if zipfile.is_zipfile(path) else BROKEN_ZIP
    if head[:1] == b"\x80" and len(head) > 1 and head[1] <= 5:  # the PROTO opcode, protocols 2 to 5
        return PICKLE
    if head.startswith(b"\x93NUMPY"):
        return NUMPY
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at the 4 KiB boundary
            return BINARY
        text = head[:exc.start].decode("utf-8")
    printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in text)
    return TEXT if printable >= 0.95 * max(len(text), 1) else BINARY


def describe(kind: str) -> str:
    """``'a text file'``, ``'a zip archive'``, ... for a ``kind_of`` result."""
    return _DESCRIPTIONS[kind]
