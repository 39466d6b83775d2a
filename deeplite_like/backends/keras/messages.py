"""Keras' exception text made fit for one line of our own messages.

Keras 3 wraps a layer's failure as ``"Exception encountered when calling Dense.call().\\n\\n
\\x1b[1m<what went wrong>\\x1b[0m\\n\\nArguments received by Dense.call():\\n  • inputs=..."``:
terminal escape codes (bold) around the one useful sentence, and a listing of the arguments.
``keras_message`` keeps the sentence and the layer call it happened in, without escape codes.
"""
from __future__ import annotations

import re

__all__ = ["keras_message", "strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_WRAPPED = re.compile(r"Exception encountered when calling (?P<where>[^\n]*?)\.?\n\s*\n(?P<what>.*?)"
                      r"(?:\n\s*\nArguments received by .*)?$", re.S)


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, bold)."""
    return _ANSI.sub("", text)


def keras_message(exc: BaseException) -> str:
    """``'TypeName: sentence (in Dense.call())'`` from a Keras exception, on one line, without escape codes."""
    text = strip_ansi(str(exc)).strip()
    match = _WRAPPED.search(text)
    if match is not None:
        text = f"{match.group('what').strip()} (in {match.group('where').strip()})"
    return f"{type(exc).__name__}: {' '.join(text.split())}"
