"""Before a MODEL spec is loaded: the record every loader returns, and the checks made before
anything is read, imported, called or allocated.

* ``LoadedModel``: a model named on the command line, ready to profile; the spec forms
  (``FORMS``) and model file extensions the loaders share; ``require_framework`` and
  ``require_known_model``, refusing a spec whose framework is missing or whose name is unknown.
* What a file holds, told from its first bytes (``kind_of``, ``describe``): errors name a
  file's kind ("it is a text file", "it is not a zip archive") instead of passing on what a
  loader says about bytes it did not expect; they never show the file's content.
* ``package.module:factory`` specs that name no model factory (``refuse_stdlib_module``,
  ``refuse_loader``). A MODEL spec names code to run, by design (the user's own factory). Two
  kinds of callable are not model factories and would turn the spec into something else: a
  standard-library function (``os:system``, ``builtins:eval``, ``subprocess:getoutput`` with
  ``--model-args`` as its argument), and a framework's file loader (``torch:load``,
  ``numpy:load``, ``keras.saving:load_model``), which ``--model-args`` could call with its unsafe
  options (``weights_only=False``, ``allow_pickle=True``, ``safe_mode=False``), bypassing the safe
  loading of model files. Standard-library modules are refused before they are imported. This
  is a guard against mistakes, not a sandbox (docs/cli.rst, "MODEL specs: what you name runs"):
  a spec is a command the user chose, like ``python -m module``, and any other installed
  function that evaluates its argument runs if named. That is why a spec is taken only from the
  command line, never from a file.
* Inputs too large for this machine (``check_input_bytes``). ``--input-shape
  100000,3,224,224`` or ``--batch-size 1000000000`` would ask for more memory than the machine
  has and die in the allocator (a bare ``MemoryError``, or the kernel's OOM killer). The input
  tensors' size is known before anything is allocated: bytes = elements x bytes per element.
  Profiling needs the inputs and at least as much again for the activations, so inputs above
  half of the memory available here are refused, with the estimate.
"""
from __future__ import annotations

import difflib
import importlib.util
import math
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from deeplite_like.errors import MEMORY_SHARE as SHARE, available_memory
from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.units import format_bytes

FORMS = ("zoo:NAME", "hf:NAME_OR_DIR[?task=causal-lm]", "timm:NAME", "torchvision:NAME", "keras.applications:NAME",
         "path/to/file.py:factory",
         "package.module:factory", "a TorchScript file (.pt, .pth, .ts)", "a torch.export file (.pt2)",
         "a Keras file (.keras)", "an ONNX file (.onnx)", "a TFLite file (.tflite)")
FORMS_HINT = "MODEL is one of: " + "; ".join(FORMS)

TORCH_FILE_SUFFIXES = (".pt", ".pth", ".ts", ".jit", ".bin", ".ckpt")
EXPORT_SUFFIXES = (".pt2",)
KERAS_SUFFIXES = (".keras",)
ONNX_SUFFIXES = (".onnx",)
TFLITE_SUFFIXES = (".tflite",)
MODEL_FILE_SUFFIXES = TORCH_FILE_SUFFIXES + EXPORT_SUFFIXES + KERAS_SUFFIXES + ONNX_SUFFIXES + TFLITE_SUFFIXES


@dataclass
class LoadedModel:
    """A model named on the command line, ready to profile.

    Attributes:
        spec: the MODEL argument as given.
        name: the name shown in reports (the zoo name, the factory's name, the file's stem).
        framework: ``"torch"``, ``"keras"``, ``"onnx"`` (an ``onnx.ModelProto``) or ``"tflite"``
            (a read ``TFLiteModel``).
        model: the model object.
        example: default inputs ``(args, kwargs)`` known from the spec (a zoo model's example,
            a factory's ``(model, example)``, an exported program's sample inputs), or ``None``.
        input_shapes: default input shapes when no example tensors are known (torchvision's
            ``1x3x224x224``, a Keras model's input shape), or ``None``.
        notes: what the loader wants the user to know (shown under the reports).
        limits: status keys this kind of model cannot compute, key -> reason (a TorchScript
            module takes no forward hooks, so it has no per-layer table).
    """

    spec: str
    name: str
    framework: str
    model: Any
    example: tuple[tuple, dict] | None = None
    input_shapes: list[tuple[int, ...]] | None = None
    notes: list[str] = field(default_factory=list)
    limits: dict[str, str] = field(default_factory=dict)


def require_known_model(spec: str, name: str, available: list[str], library: str, otherwise: str) -> None:
    """Raise a ``UsageError`` when ``library`` has no model ``name``, with the closest names (else ``otherwise``)."""
    if name not in available:
        close = difflib.get_close_matches(name, available, n=3)
        raise UsageError(f"{spec!r}: {library} has no model named {name!r}",
                         f"did you mean {', '.join(close)}?" if close else otherwise)


def require_framework(framework: str, spec: str) -> None:
    """Raise a ``UsageError`` naming the extra to install when ``framework`` is missing."""
    if importlib.util.find_spec(framework) is None:
        raise UsageError(f"{spec!r} needs {framework}, which is not installed here",
                         f"install it with: pip install 'deeplite-like[{framework}]'")


# ------------------------------------------------------------------------------ what a file holds
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


def file_kind(path: Path) -> str:
    """What the file at ``path`` is, in words (``describe(kind_of(path))``), or that it cannot be read."""
    try:
        return describe(kind_of(path))
    except OSError as exc:
        return f"a file that cannot be read ({exc.strerror})"


def not_loadable(spec: str, path: Path, what: str, exc: BaseException, hint: str) -> UsageError:
    """The usage error of a file its loader refused: what the file is, and the loader's first line."""
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return UsageError(f"{spec!r} is not a loadable {what} model: it is {file_kind(path)}; {first}", hint)


# ------------------------------------------------------------------------------ callables that build no model
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
_FACTORY_HINT = ("name your own function that builds the model (models.py:build), or pass a saved model file "
                 "itself (model.pt2, model.pt, model.keras), which is loaded safely")


def refuse_stdlib_module(spec: str, module_name: str) -> None:
    """Raise ``UsageError`` if ``module_name`` is in the standard library (checked before importing it)."""
    top = module_name.split(".")[0]
    if top in STDLIB:
        raise UsageError(f"{spec!r}: {module_name!r} is a standard-library module, not one that builds models; "
                         "deeplite-like does not call its functions", _FACTORY_HINT + "; a file of yours named like "
                         f"a standard module can be named by its path: ./{top}.py:FACTORY")


def refuse_loader(spec: str, factory: Any) -> None:
    """Raise ``UsageError`` if ``factory`` is a framework's file loader or a standard-library function."""
    module = getattr(factory, "__module__", None) or ""
    name = getattr(factory, "__name__", "") or ""
    top = module.split(".")[0]
    if top in STDLIB:
        raise UsageError(f"{spec!r} names {module}.{name}, a standard-library function, not a model factory",
                         _FACTORY_HINT)
    if top in FRAMEWORKS and _LOADER.search(name.lower()):
        raise UsageError(f"{spec!r} names {module}.{name}, a loader of files or text, not a model factory; "
                         "through it --model-args could load a file with unsafe options or evaluate text, so "
                         "deeplite-like refuses", _FACTORY_HINT)


# ------------------------------------------------------------------------------ inputs too large for this machine
_MEMORY_HINT = ("use a smaller batch or shape: MACs and FLOPs grow linearly with the batch size, so profile a batch "
                "that fits and scale the counts")


def shape_bytes(shape: Iterable[int], itemsize: int) -> int:
    """Bytes of a dense tensor of ``shape`` with ``itemsize`` bytes per element (exact, no overflow)."""
    return math.prod(shape) * itemsize


def check_input_bytes(option: str, what: str, nbytes: int, available: int | None = None) -> None:
    """Raise a ``UsageError`` naming ``option`` when ``nbytes`` of inputs exceed ``SHARE`` of the memory here.

    ``what`` says how the estimate was made (``'one 100000x3x224x224 float32 tensor'``);
    ``available`` defaults to ``available_memory()`` (``None``: unknown, nothing is refused).
    """
    available = available_memory() if available is None else available
    if available is None or nbytes <= SHARE * available:
        return
    raise UsageError(f"{option}: the inputs alone would take {format_bytes(nbytes)} ({what}), more than half of the "
                     f"{format_bytes(available)} of memory available here; refused before allocating them",
                     _MEMORY_HINT)


def sample_bytes(inputs: tuple[tuple, dict]) -> int:
    """Bytes per sample of batched inputs: each array's bytes divided by its first (batch) axis."""
    total = 0
    for leaf in _leaves(inputs):
        shape = tuple(getattr(leaf, "shape", ()))
        if not shape or shape[0] == 0:
            continue
        nbytes = getattr(leaf, "nbytes", None)  # numpy arrays (and torch >= 2.1 tensors)
        if nbytes is None and hasattr(leaf, "element_size"):
            nbytes = leaf.element_size() * leaf.numel()
        if nbytes is not None:
            total += int(nbytes) // int(shape[0])
    return total


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value
