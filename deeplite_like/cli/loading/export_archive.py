"""Checking a ``torch.export`` archive (``.pt2``) before torch reads it.

``torch.export.load`` trusts its file. Reading an archive, torch 2.x:

* unpickles the sample inputs (``data/sample_inputs/<model>.pt``), legacy weight and constant
  records and the top-level ``serialized_*.pt`` of the older format, and retries each with
  ``weights_only=False`` when the safe load fails: a pickle in any of them runs its code;
* unpickles weights and constants saved with ``use_pickle`` with ``weights_only=False``, and
  custom-object / opaque-object constants with no restriction at all;
* parses every symbolic shape (``expr_str``) with ``sympy.sympify``, which evaluates Python;
* resolves operator names by ``getattr`` from ``torch`` (``torch.os.system`` resolves);
* writes parameter, buffer and node names and stack traces into the Python code that
  ``torch.fx`` generates and executes;
* loads the compiled native libraries under ``data/aotinductor/``.

``checked_archive`` reads the archive itself (``zipfile``, ``json``,
``torch.load(weights_only=True)``), refuses every one of those with the record that holds it
and what to do instead, and returns a copy of the checked records in memory: the bytes torch
then reads are the bytes that were checked (no second read of a file that may have changed).
"""
from __future__ import annotations

import ast
import io
import json
import re
import zipfile
from typing import Any, Iterator

import deeplite_like.cli.loading.preflight as preflight
from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.units import format_bytes

EXPORT_HINT = ("re-export it from the model's code: torch.export.save(torch.export.export(model, (x,)), "
               "'model.pt2'), with tensors as sample inputs; or profile the model's factory instead: "
               "deeplite-like profile models.py:build")

#: Records torch's older (2.7) archive format unpickles, wherever they sit in the archive.
_LEGACY_PICKLES = ("serialized_state_dict.pt", "serialized_constants.pt", "serialized_example_inputs.pt")
#: JSON keys whose string values become Python names or attribute paths in generated code.
_NAME_KEYS = frozenset({"name", "as_name", "parameter_name", "buffer_name", "tensor_constant_name",
                        "custom_obj_name", "user_input_name", "fqn", "class_fqn", "path_name", "field_names"})
_SAFE_NAME = re.compile(r"[\w.\-]*")
_SYMBOL_NAME = re.compile(r"[a-z]+\d+")  # the names torch gives shape symbols: s0, u1, zuf2
_OPERATOR_NAMES = frozenset({"getitem"})  # beside torch's own table of symbolic operators


class ArchiveRefused(UsageError):
    """A ``.pt2`` archive holds something that would run code when torch reads it (exit code 2)."""


def checked_archive(spec: str, data: bytes) -> io.BytesIO:
    """The archive ``data`` rebuilt in memory from its checked records; ``ArchiveRefused`` if unsafe.

    ``spec`` names the file in messages. Every refusal names the record inside the archive
    (``data/sample_inputs/model.pt``, ``models/model.json``, ...) and says what to do instead.
    """
    records = _read_records(spec, data)
    pickled: dict[str, str] = {}  # record -> why torch unpickles it
    refused: dict[str, str] = {}  # record -> why it is refused outright
    for name in records:
        if name.startswith("data/aotinductor/"):
            refused[name] = "it is AOTInductor compiled code, which torch loads as a native library"
        elif name.endswith((".pt", ".pkl")) or name.rsplit("/", 1)[-1] in _LEGACY_PICKLES:
            pickled[name] = "a pickled record"
    for name, raw in list(records.items()):
        if name.endswith(".json"):
            document = _parse_json(spec, name, raw)
            _check_json(spec, name, document)
            _payloads(name, document, records, pickled, refused)
    for name, why in refused.items():
        raise ArchiveRefused(f"{spec!r}: the record {name!r} inside the archive cannot be loaded safely: {why}; "
                             "deeplite-like refuses to load the archive", EXPORT_HINT)
    for name, why in pickled.items():
        _check_pickle(spec, name, records[name], why)
    return _rebuilt(data)


# ------------------------------------------------------------------------------ the records
def _read_records(spec: str, data: bytes) -> dict[str, bytes]:
    """Record name (the path below the archive's top folder, as torch reads it) -> its bytes."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
        names = [info.filename for info in infos]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ArchiveRefused(f"{spec!r}: the archive holds the record {duplicates[0]!r} more than once, so what "
                                 "torch reads may not be what was checked; deeplite-like refuses to load it",
                                 EXPORT_HINT)
        _refuse_oversized(spec, infos)
        records = {}
        for info in infos:  # each entry by its own header: nothing read here is skipped by the check
            if info.is_dir():
                continue
            records[info.filename.split("/", 1)[-1]] = archive.read(info)
        return records
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, NotImplementedError) as exc:
        raise ArchiveRefused(f"{spec!r} is not a readable torch.export archive (a zip file): {exc}",
                             EXPORT_HINT) from None


def _refuse_oversized(spec: str, infos: list[zipfile.ZipInfo]) -> None:
    """Refuse an archive that unpacks to more than the memory here (a zip bomb), before unpacking it."""
    unpacked = sum(info.file_size for info in infos)  # zipfile never reads past an entry's declared size
    available = preflight.available_memory()  # looked up when called: a test may stand in for it
    if available is not None and unpacked > available:
        raise ArchiveRefused(f"{spec!r}: the archive unpacks to {format_bytes(unpacked)}, more than the "
                             f"{format_bytes(available)} of memory available here; refused before unpacking it",
                             EXPORT_HINT)


def _rebuilt(data: bytes) -> io.BytesIO:
    """The same entries, in the same order, as a fresh zip (no prefix bytes, no stale directory)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            target.writestr(info.filename, source.read(info))
    buffer.seek(0)
    return buffer


def _parse_json(spec: str, name: str, raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise ArchiveRefused(f"{spec!r}: the record {name!r} inside the archive nests its JSON too deeply to read",
                             EXPORT_HINT) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArchiveRefused(f"{spec!r}: the record {name!r} inside the archive is not valid JSON ({exc})",
                             EXPORT_HINT) from None


def _payloads(name: str, document: Any, records: dict[str, bytes], pickled: dict[str, str],
              refused: dict[str, str]) -> None:
    """Weights and constants configs: which payloads torch unpickles, and which it must never read."""
    if not (isinstance(document, dict) and isinstance(document.get("config"), dict)):
        return
    folder = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
    for fqn, meta in document["config"].items():
        if not isinstance(meta, dict) or not isinstance(meta.get("path_name"), str):
            continue
        payload = folder + meta["path_name"]
        if meta["path_name"].startswith(("custom_obj", "opaque_obj")):
            refused[payload] = (f"it holds the constant {fqn!r} as a pickled Python object, which torch unpickles "
                                "with no restriction")
        elif meta.get("use_pickle"):
            pickled[payload] = f"the pickled value of {fqn!r}"
            records.setdefault(payload, b"")  # a missing record fails the check, not torch's unchecked read


def _check_pickle(spec: str, name: str, raw: bytes, why: str) -> None:
    """Load the record with ``weights_only=True``: what loads so is what torch's retry would read."""
    import torch

    try:
        torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError, RuntimeError, EOFError...: every failure is a refusal
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        match = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
        if match:
            reason = f"it needs the Python object {match.group(1)}"
        raise ArchiveRefused(f"{spec!r}: the record {name!r} inside the archive ({why}) does not load with "
                             f"weights_only=True ({reason[:200]}); torch.export.load would retry it with "
                             "weights_only=False, which runs any code the record holds, so deeplite-like refuses "
                             "to load the archive", EXPORT_HINT) from None


# ------------------------------------------------------------------------------ the program
def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """``(key, value)`` for every value in a JSON document, dict keys included (with key ``"<key>"``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield "<key>", k
            yield from _walk(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, key)
    else:
        yield key, value


def _check_json(spec: str, name: str, document: Any) -> None:
    def refuse(what: str) -> ArchiveRefused:
        return ArchiveRefused(f"{spec!r}: the record {name!r} inside the archive {what}; torch would run it as "
                              "Python code while loading, so deeplite-like refuses to load the archive", EXPORT_HINT)

    try:
        values = list(_walk(document))
    except RecursionError:
        raise ArchiveRefused(f"{spec!r}: the record {name!r} inside the archive nests its JSON too deeply to read",
                             EXPORT_HINT) from None
    for key, value in values:
        if not isinstance(value, str):
            continue
        if "\r" in value:  # a carriage return ends a comment line in the code torch.fx generates
            raise refuse(f"holds a carriage return in {key!r} ({value[:60]!r})")
        if key == "expr_str" and not _is_shape_expression(value):
            raise refuse(f"holds the symbolic shape {value[:80]!r}, which is not a shape expression")
        if key in ("target", "as_operator") and not _is_operator(value):
            raise refuse(f"names {value[:80]!r} as an operator, which is not a torch operator")
        if (key in _NAME_KEYS or key == "<key>") and not _SAFE_NAME.fullmatch(value):
            raise refuse(f"holds the name {value[:80]!r}, which is not a Python name or dotted path")


def _is_operator(target: str) -> bool:
    """True for what torch.export writes as a node's target: a torch operator or a symbolic one.

    Resolved the way torch resolves it (``getattr`` from ``torch``, ``_operator`` or ``math``);
    anything else (``torch.os.system``, ``torch.load``) is refused before torch resolves it.
    """
    import math
    import operator

    import torch
    from torch._ops import OperatorBase, OpOverloadPacket

    head, _, rest = target.partition(".")
    roots = {"torch": torch, "_operator": operator, "math": math}
    if head not in roots or not rest:
        return False
    value: Any = roots[head]
    for part in rest.split("."):
        if part.startswith("__") or not hasattr(value, part):
            return False
        value = getattr(value, part)
    if isinstance(value, (OperatorBase, OpOverloadPacket)):
        return True
    if head == "_operator" and rest in _OPERATOR_NAMES:
        return True
    try:
        from torch._export.serde.serialize import _SYM_OPS
    except ImportError:  # a torch without that table: only real operators pass
        return False
    return value in _SYM_OPS


#: Shape functions an expression may call, each costing at most its largest argument (bits + 1):
#: sympy's ``srepr`` classes that torch writes, and torch's own shape functions
#: (``torch.utils._sympy.functions``) but the ones that raise to a power.
_SHAPE_FUNCTIONS = frozenset({
    "Add", "Mul", "Integer", "Rational", "Float", "Max", "Min", "Mod", "Abs", "floor", "ceiling",
    "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality", "StrictLessThan", "StrictGreaterThan",
    "LessThan", "GreaterThan", "And", "Or", "Not", "Piecewise", "ExprCondPair",
    "CeilDiv", "CeilToInt", "CleanDiv", "FloatTrueDiv", "FloorDiv", "FloorToInt", "Identity", "IntTrueDiv",
    "IsNonOverlappingAndDenseIndicator", "ModularIndexing", "PythonMod", "RoundDecimal", "RoundToInt", "ToFloat",
    "TruncToFloat", "TruncToInt", "Where", "BitwiseFn_bitwise_and", "BitwiseFn_bitwise_or",
    "BitwiseFn_bitwise_xor",
})
#: Calls that raise their first argument to the power of their second: ``Pow(s0, 2)``.
_POWER_FUNCTIONS = frozenset({"Pow", "PowByNatural", "FloatPow"})
_CONSTANTS = frozenset({"True", "False", "oo", "zoo", "nan", "pi", "E"})
#: Bounds on the work sympy does to read one expression: its length, its nodes, the bits of any
#: value it can compute (a shape is an int64: 63 bits; 4096 leaves room for products of them),
#: and the largest literal power.
MAX_EXPRESSION_CHARS = 10_000
MAX_EXPRESSION_NODES = 2_000
MAX_VALUE_BITS = 4096
MAX_EXPONENT = 64
_SYMBOL_BITS = 63


class _Unbounded(ValueError):
    """A shape expression outside the grammar, or one whose value could be too large to compute quickly."""


def _is_shape_expression(text: str) -> bool:
    """True when ``text`` is a shape expression that sympy reads quickly and with nothing Python could run.

    ``text`` is never evaluated here: it is parsed by ``ast`` (which runs nothing) and walked.
    Allowed: calls of the shape functions torch writes (``Symbol('s77', positive=True,
    integer=True)``, ``Mul``, ``Add``, ``Max``, ``FloorDiv``, ...; ``_SHAPE_FUNCTIONS``), symbol
    names (``s0``), numbers, arithmetic and comparisons. No attribute access, indexing, other
    names or strings. The work is bounded: at most ``MAX_EXPRESSION_CHARS`` characters and
    ``MAX_EXPRESSION_NODES`` nodes, a power only to a literal exponent of at most ``MAX_EXPONENT``,
    and no value that could exceed ``MAX_VALUE_BITS`` bits (``s + 2**2**40`` is refused: sympy
    would compute 2**(2**40) before anything else).
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        return False
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # (too many nested parentheses, ...)
        return False
    if sum(1 for _ in ast.walk(tree)) > MAX_EXPRESSION_NODES:
        return False
    try:
        return _value_bits(tree.body) <= MAX_VALUE_BITS
    except (_Unbounded, RecursionError):
        return False


def _exponent(node: ast.expr) -> int:
    """A literal exponent (``2``, ``Integer(2)``, ``-1``) of at most ``MAX_EXPONENT``; else ``_Unbounded``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _exponent(node.operand)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Integer" \
            and len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) <= MAX_EXPONENT:
        return abs(node.value)
    raise _Unbounded("a power needs a literal exponent")


def _value_bits(node: ast.expr) -> int:
    """An upper bound on the bits of the value ``node`` computes (symbols are int64 shapes); ``_Unbounded``
    for anything outside the grammar (see ``_is_shape_expression``)."""
    if isinstance(node, ast.Constant):
        if type(node.value) is bool or node.value is None:
            return 1
        if type(node.value) is int:
            return max(node.value.bit_length(), 1)
        if type(node.value) is float:
            return 64
        raise _Unbounded("a string outside Symbol(...)")
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS or _SYMBOL_NAME.fullmatch(node.id):
            return _SYMBOL_BITS
        raise _Unbounded(f"the name {node.id}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not, ast.Invert)):
        return _value_bits(node.operand)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow):
            return _value_bits(node.left) * max(_exponent(node.right), 1)
        left, right = _value_bits(node.left), _value_bits(node.right)
        if isinstance(node.op, ast.Mult):
            return left + right
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.BitAnd, ast.BitOr,
                                ast.BitXor)):
            return max(left, right) + 1
        raise _Unbounded("an operator outside shape arithmetic")  # <<, >>, @
    if isinstance(node, (ast.Compare, ast.BoolOp)):
        parts = [node.left, *node.comparators] if isinstance(node, ast.Compare) else node.values
        for part in parts:
            _value_bits(part)
        return _SYMBOL_BITS
    if isinstance(node, ast.Tuple):
        return max((_value_bits(item) for item in node.elts), default=1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name == "Symbol":
            if not (node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and _SYMBOL_NAME.fullmatch(node.args[0].value) and len(node.args) == 1):
                raise _Unbounded("Symbol takes one symbol name")
            if not all(k.arg and isinstance(k.value, ast.Constant) and type(k.value.value) is bool
                       for k in node.keywords):
                raise _Unbounded("Symbol's assumptions are True or False")
            return _SYMBOL_BITS
        if node.keywords and name != "Float":
            raise _Unbounded(f"keywords of {name}")
        if name in _POWER_FUNCTIONS:
            if len(node.args) != 2:
                raise _Unbounded(f"{name} takes a base and an exponent")
            return _value_bits(node.args[0]) * max(_exponent(node.args[1]), 1)
        if name in _SHAPE_FUNCTIONS:
            if name == "Float" and any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args):
                raise _Unbounded("Float of a string")
            if name == "Mul":
                return sum(_value_bits(arg) for arg in node.args) or 1
            return max((_value_bits(arg) for arg in node.args), default=1) + len(node.args)
        if name.startswith("OpaqueUnaryFn_") and len(node.args) == 1:  # sin, log, ...: floats
            _value_bits(node.args[0])
            return 64
    raise _Unbounded(type(node).__name__)
