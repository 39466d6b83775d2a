"""Security review of the package source, kept honest by a test.

Every call that could run code from a file or from user text (``eval``, ``exec``, unpickling,
model loaders, imports by name, shells) is found in the package's syntax trees and must be in
``REVIEWED`` below, which says why each remaining use is safe. A new use fails this test until
someone reviews it and adds it; a reviewed use that disappears fails it too (stale reviews
hide nothing). The loaders must also pass their safe options: ``torch.load(weights_only=True)``,
``numpy.load(allow_pickle=False)``, ``keras.saving.load_model(safe_mode=True)``; no call may
pass ``shell=True``.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "deeplite_like"

#: Built-in functions that run or read text as code.
BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "input", "breakpoint"})
#: Last parts of dotted calls that load, unpickle, import or run something.
SUFFIXES = frozenset({"load", "loads", "load_model", "exec_module", "import_module", "system", "popen", "Popen",
                      "run_path", "run_module", "Unpickler", "check_output", "check_call", "startfile"})
#: Modules whose mere import deserves a look.
MODULES = frozenset({"subprocess", "pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib", "runpy", "yaml",
                     "ctypes", "code", "pty"})
#: Safe options a loader must be called with: call -> (keyword, required value).
REQUIRED = {"torch.load": ("weights_only", True), "np.load": ("allow_pickle", False),
            "numpy.load": ("allow_pickle", False), "keras.saving.load_model": ("safe_mode", True)}

REVIEWED = {
    # --- loaders of files named on the command line
    ("cli/loading/torch_files.py", "torch.load"):
        "weights_only=True (checked below): only tensors and plain containers are unpickled",
    ("cli/loading/torch_files.py", "torch.jit.load"):
        "a TorchScript archive: its code is TorchScript run by TorchScript's interpreter, and its pickles are "
        "read by TorchScript's unpickler, which builds TorchScript types only (test_safe_loading plants one)",
    ("cli/loading/torch_files.py", "torch.export.load"):
        "reads only the in-memory copy that export_archive.checked_archive returned after checking every record "
        "(test_export_archive)",
    ("cli/loading/export_archive.py", "torch.load"): "weights_only=True: the check itself",
    ("cli/loading/export_archive.py", "json.loads"): "JSON is data",
    ("cli/model_inputs.py", "torch.load"): "weights_only=True: --inputs tensors only",
    ("cli/model_inputs.py", "np.load"): "allow_pickle=False: object arrays are refused",
    ("cli/loading/keras_files.py", "keras.saving.load_model"): "safe_mode=True: Lambda code is refused",
    ("cli/loading/__init__.py", "json.loads"): "--model-args is JSON, never Python",
    ("roofline.py", "tomllib.loads"): "a device registry is TOML: data, never code (devices.toml, load_devices)",
    ("cli/model_inputs.py", "import pickle"): "for the pickle.UnpicklingError class only",
    ("cli/loading/torch_files.py", "import pickle"): "for the pickle.UnpicklingError class only",
    ("cli/loading/torch_files.py", "importlib.import_module"):
        "'transformers' or 'timm' only (the fixed names of the hf: and timm: forms); the hf: config is read with "
        "trust_remote_code=False, so no code from the hub runs",
    ("backends/onnx/graph.py", "onnx.load_model"):
        "an ONNX file is a protobuf (data, no code); external data is not followed here (load_external_data=False), "
        "then read only from beside the file after check_external_data refused absolute paths and '..'",
    ("backends/onnx/graph.py", "load_model"): "graph.load_model, the ONNX loader above",
    ("backends/onnx/compute.py", "load_model"): "graph.load_model, the ONNX loader above",
    ("backends/onnx/compute.py", "json.loads"):
        "node_times reads the profile trace ONNX Runtime just wrote in our own temporary folder: JSON is data",
    ("cli/loading/onnx_files.py", "load_model"):
        "graph.load_model, the ONNX loader above, on the .onnx file named on the command line (protobuf data; "
        "no custom-op library is loaded; a malformed file is a usage error, tests/onnx/test_onnx_cli.py)",
    ("backends/tflite/graph.py", "load_model"):
        "graph.load_model, the TFLite loader: a .tflite file is a flatbuffer (data, no code) read with LiteRT's "
        "generated schema reader; the interpreter runs builtin kernels only, no custom-op library is registered",
    ("backends/tflite/formulas.py", "load_model"): "graph.load_model, the TFLite loader above",
    ("backends/tflite/compute.py", "load_model"): "graph.load_model, the TFLite loader above",
    ("cli/loading/tflite_files.py", "load_model"):
        "graph.load_model, the TFLite loader above, on the .tflite file named on the command line; a malformed "
        "file is a usage error (tests/tflite/test_tflite_cli.py fuzzes it)",
    # --- user code the user asked to run
    ("cli/loading/__init__.py", "module_spec.loader.exec_module"):
        "imports the Python file the user named as path/to/file.py:factory: running its code is what was asked; "
        "it gets a clean sys.argv and its SystemExit becomes an error",
    ("cli/loading/__init__.py", "importlib.import_module"):
        "imports the module the user named as package.module:factory (an identifier path, checked before)",
    ("cli/commands.py", "load_model"):
        "deeplite_like.cli.loading.load_model, the dispatcher above (the demo: on the bundled zoo's fixed specs)",
    ("cli/check.py", "load_model"): "deeplite_like.cli.loading.load_model, the dispatcher above",
    ("cli/check.py", "json.loads"): "--baseline is a JSON report: JSON is data",
    ("cli/commands.py", "load"):
        "the load callable run_profile passes: loading.load_model with the MODEL spec, once per sequence length",
    # --- imports by name from the package's own fixed tables, never from user text
    ("_moved.py", "importlib.import_module"): "the new path of an old one, from the fixed MOVED table, and the "
                                              "package's own lazy exports table",
    ("backends/__init__.py", "importlib.import_module"): "backend modules from the fixed _BACKENDS table",
    ("backends/__init__.py", "load"): "Backend.load: imports a backend from the fixed _BACKENDS table",
    ("backends/keras/_tf.py", "importlib.import_module"): "'keras' or 'tensorflow' only",
    ("backends/keras/counting/registry.py", "importlib.import_module"): "Keras layer classes named in the table",
    ("zoo/__init__.py", "importlib.import_module"): "the zoo's own factories, named in the zoo table",
}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return None


def _findings() -> tuple[dict[tuple[str, str], list[int]], list[str]]:
    """``(file, call) -> lines`` of every risky use, and the problems found with their options."""
    found: dict[tuple[str, str], list[int]] = {}
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names]
                if isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                for name in names:
                    if name.split(".")[0] in MODULES:
                        found.setdefault((where, f"import {name}"), []).append(node.lineno)
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            if name is None:
                continue
            for keyword in node.keywords:
                if keyword.arg == "shell" and isinstance(keyword.value, ast.Constant) and keyword.value.value:
                    problems.append(f"{where}:{node.lineno}: {name}(shell=True)")
            risky = (isinstance(node.func, ast.Name) and name in BUILTINS) or name.rsplit(".", 1)[-1] in SUFFIXES
            if not risky:
                continue
            found.setdefault((where, name), []).append(node.lineno)
            if name in REQUIRED:
                keyword_name, value = REQUIRED[name]
                given = {k.arg: k.value for k in node.keywords}
                passed = given.get(keyword_name)
                if not (isinstance(passed, ast.Constant) and passed.value is value):
                    problems.append(f"{where}:{node.lineno}: {name} without {keyword_name}={value}")
    return found, problems


def test_every_risky_call_in_the_package_is_reviewed():
    found, _ = _findings()
    unreviewed = {f"{where}:{lines[0]}: {name}" for (where, name), lines in found.items()
                  if (where, name) not in REVIEWED}
    stale = {f"{where}: {name}" for where, name in REVIEWED if (where, name) not in found}
    assert not unreviewed, f"review these and add them to REVIEWED with the reason they are safe: {unreviewed}"
    assert not stale, f"these reviewed uses are gone; remove them from REVIEWED: {stale}"


def test_loaders_are_called_with_their_safe_options_and_nothing_uses_a_shell():
    _, problems = _findings()
    assert problems == []


def test_no_builtin_eval_or_exec_anywhere():
    found, _ = _findings()
    assert not [key for key in found if key[1] in BUILTINS]


def test_export_archive_is_checked_before_torch_reads_it():
    source = (PACKAGE / "cli" / "loading" / "torch_files.py").read_text(encoding="utf-8")
    checked = source.index("archive = checked_archive(spec, path.read_bytes())")
    assert checked < source.index("program = torch.export.load(archive)")


def test_the_review_sees_a_planted_use(tmp_path, monkeypatch):
    # The scanner itself must find what it is for: eval, a pickle import, torch.load(weights_only=False), a shell.
    package = tmp_path / "deeplite_like"
    package.mkdir()
    (package / "bad.py").write_text("import pickle\nimport subprocess\nimport torch\n\n"
                                    "def f(text, path):\n    eval(text)\n    torch.load(path, weights_only=False)\n"
                                    "    subprocess.run(text, shell=True)\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    found, problems = _findings()
    assert set(found) == {("bad.py", "import pickle"), ("bad.py", "import subprocess"), ("bad.py", "eval"),
                          ("bad.py", "torch.load")}
    assert sorted(problems) == ["bad.py:7: torch.load without weights_only=True",
                                "bad.py:8: subprocess.run(shell=True)"]
