"""Talking to Keras and TensorFlow: lazy, quiet imports, silencing of TensorFlow's native output,
and Keras' exception text made fit for one line of our own messages.

Nothing here runs at import time: Keras (and with it TensorFlow, on Keras' TensorFlow
backend) is imported the first time a Keras model is profiled, and only if the user has not
imported it already (the usual case: they built the model).

Why the file descriptor, and not ``TF_CPP_MIN_LOG_LEVEL``
    TensorFlow's C++ runtime writes its start-up lines (oneDNN, CPU feature guard, absl's
    "log messages before absl::InitializeLog()") straight to file descriptor 2, below Python's
    ``sys.stderr``. Setting ``TF_CPP_MIN_LOG_LEVEL`` would change TensorFlow's behaviour for
    the rest of the user's process (and TensorFlow 2.21 prints some of these lines whatever
    its value), and the team rule is never to set a TensorFlow environment variable for the
    user. So ``native_output_silenced`` points fds 1 and 2 at a temporary file for the
    duration of one call (the import, or the TF profiler, which prints from C++ too), then
    puts them back in ``finally``; what was written is returned and shown only if the call
    fails. Python's own ``warnings``/``logging`` are untouched, so a user's handlers keep
    working.

Asking for the logs
    A user who has set ``TF_CPP_MIN_LOG_LEVEL`` themselves has chosen how much TensorFlow
    should say: then nothing is redirected and TensorFlow's own filtering applies. Passing
    ``quiet=False`` to the helpers has the same effect.

Caveat: while a call is silenced (the import: about 2 s once per process; a profile: well
under a second), native output from other threads of the process is captured too. File
descriptors are process-wide, so silenced blocks are serialised by a lock (re-entrant: a
block may nest in the same thread): two threads cannot save and restore them in the wrong
order and leave the process's output redirected.

Keras' exception text
    Keras 3 wraps a layer's failure as ``"Exception encountered when calling Dense.call().\\n\\n
    \\x1b[1m<what went wrong>\\x1b[0m\\n\\nArguments received by Dense.call():\\n  • inputs=..."``:
    terminal escape codes (bold) around the one useful sentence, and a listing of the arguments.
    ``keras_message`` keeps the sentence and the layer call it happened in, without escape codes.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import tempfile
import threading
from types import ModuleType
from typing import Iterator

#: The environment variable whose presence means "the user manages TensorFlow's log level".
USER_LOG_LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"


def _should_silence(quiet: bool | None) -> bool:
    if quiet is not None:
        return quiet
    return USER_LOG_LEVEL_VARIABLE not in os.environ


#: Held while file descriptors 1 and 2 are redirected (see the module docstring).
_REDIRECTING = threading.RLock()


class CapturedOutput:
    """What native code wrote while silenced (filled in when the block ends)."""

    text: str = ""


@contextlib.contextmanager
def native_output_silenced(quiet: bool | None = None) -> Iterator[CapturedOutput]:
    """Redirect fds 1 and 2 to a temporary file for the block; restore them in ``finally``.

    Yields a ``CapturedOutput`` whose ``text`` holds what was written (for error messages).
    Does nothing (and captures nothing) when ``quiet`` is False, or when it is None and the
    user has set ``TF_CPP_MIN_LOG_LEVEL``.
    """
    captured = CapturedOutput()
    if not _should_silence(quiet):
        yield captured
        return
    with _REDIRECTING:
        yield from _redirected(captured)


def _redirected(captured: CapturedOutput) -> Iterator[CapturedOutput]:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.flush()  # what Python buffered so far belongs before the redirect
    saved: list[tuple[int, int]] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        try:
            for fd in (1, 2):
                try:
                    saved.append((fd, os.dup(fd)))
                except OSError:  # no such descriptor (a daemon, an embedded interpreter)
                    continue
                os.dup2(sink.fileno(), fd)
            yield captured
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(AttributeError, ValueError, OSError):
                    stream.flush()
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")


def _import_quietly(name: str, quiet: bool | None, extra: str) -> ModuleType:
    module = sys.modules.get(name)
    if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
        return module  # imported (a module another thread is still importing is waited for below)
    with native_output_silenced(quiet) as captured:
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            error = exc
    detail = f"\n{name} wrote while importing:\n{captured.text.strip()}" if captured.text.strip() else ""
    raise ImportError(f"the Keras backend of deeplite_like needs {name}, which could not be imported "
                      f"({type(error).__name__}: {error}); install it with: pip install "
                      f"'deeplite-like[{extra}]'{detail}") from error


def import_keras(quiet: bool | None = None) -> ModuleType:
    """``keras`` (Keras 3), imported on first use with TensorFlow's native start-up lines silenced."""
    keras = _import_quietly("keras", quiet, "keras")
    version = getattr(keras, "__version__", "0")
    if int(version.split(".")[0]) < 3:
        raise ImportError(f"deeplite_like's Keras backend needs Keras 3; keras {version} is installed. "
                          "Upgrade with: pip install -U 'keras>=3'")
    return keras


def import_tensorflow(quiet: bool | None = None) -> ModuleType:
    """``tensorflow``, imported on first use with its native start-up lines silenced."""
    return _import_quietly("tensorflow", quiet, "tensorflow")


def keras_backend() -> str:
    """The backend Keras runs on (``keras.config.backend()``: 'tensorflow', 'torch', 'jax', ...)."""
    return import_keras().config.backend()


# -- Keras' exception text ----------------------------------------------------------------------
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
