"""JSON reports carry ``schema_version`` and the tool's version, and say what docs/cli.rst says they do.

The fields documented in docs/cli.rst's "JSON reports" tables (``.. schema: KIND``) are read
and checked against real reports: every documented field exists, and every top-level field
of a report is documented.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import deeplite_like
from deeplite_like.cli.output import SCHEMA_VERSION, schema_major

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.rst"
TINY = ("tests.cli.fixture_models:tiny", "--input-shape", "2,4")
FAST = ("--min-run-time", "0.01", "--no-progress")
COMMON = ["schema_version", "report", "tool", "tool_version"]
# objects keyed by column, model, operator, module or phase name
OPAQUE = {"details", "values", "changes", "rows", "by_operator", "by_module", "by_phase"}


def documented(kind: str) -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split(f".. schema: {kind}\n", 1)[1].split("\n.. ", 1)[0]
    return re.findall(r"^``([\w.\[\]-]+)``", section, re.M)


def paths(value, prefix: str = "") -> set[str]:
    """Every field path of ``value`` (``status.metrics[].key``), not entering ``OPAQUE`` objects."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            found.add(path)
            if key not in OPAQUE:
                found |= paths(item, path)
    elif isinstance(value, list):
        for item in value:
            found |= paths(item, prefix + "[]")
    return found


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    from deeplite_like.cli import main

    out = tmp_path_factory.mktemp("json")
    files = {"profile": out / "p.json", "compare-run": out / "c.json", "check": out / "k.json",
             "sweep": out / "s.json"}
    assert main(["profile", *TINY, *FAST, "-o", str(files["profile"])]) == 0
    assert main(["compare", *TINY[:1], *TINY, *FAST, "-o", str(files["compare-run"])]) == 0
    assert main(["check", *TINY, *FAST, "--max-macs", "1G", "--baseline", str(files["profile"]),
                 "--tolerance", "1000%", "-o", str(files["check"])]) == 0
    assert main(["profile", *TINY, *FAST, "--batch-sizes", "1,2", "-o", str(files["sweep"])]) == 0
    files["profile-serving"] = out / "r.json"
    assert main(["profile", "tests.cli.fixture_models:tiny_llama", *FAST, "--metrics", "macs", "--device-model",
                 "h100", "--decode", "16", "-o", str(files["profile-serving"])]) == 0
    files["profile-node-times"] = out / "n.json"
    assert main(["profile", str(_tiny_onnx(out / "tiny.onnx")), *FAST, "--metrics", "macs", "--node-times",
                 "-o", str(files["profile-node-times"])]) == 0
    return {kind: json.loads(path.read_text()) for kind, path in files.items()}


def _tiny_onnx(path: Path) -> Path:
    """x[2, 4] -> Gemm W[3, 4] + b -> Relu: a file ORT fuses (FusedGemm), so both node lists are filled."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "b"], ["g"], name="/fc/Gemm", transB=1),
         helper.make_node("Relu", ["g"], ["y"], name="/act/Relu")],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(np.ones((3, 4), np.float32), "W"),
                     numpy_helper.from_array(np.zeros(3, np.float32), "b")])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


KINDS = ["profile", "compare-run", "check", "sweep", "profile-serving", "profile-node-times"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_report_starts_with_its_version_and_the_tool(reports, kind):
    data = reports[kind]
    assert list(data)[:4] == COMMON
    assert data["schema_version"] == SCHEMA_VERSION == "1.1" and data["report"] == kind.split("-serving")[0].split("-node")[0]
    assert data["tool"] == "deeplite-like" and data["tool_version"] == deeplite_like.__version__


@pytest.mark.parametrize("kind", KINDS)
def test_the_documented_fields_are_the_real_ones(reports, kind):
    fields = documented(kind)
    assert len(fields) >= (7 if kind == "sweep" else 10)
    real = paths(reports[kind])
    missing = [field for field in fields if field not in real]
    assert not missing, f"docs/cli.rst documents {kind} fields the report lacks: {missing}"
    top = {field.split(".")[0].split("[")[0] for field in fields} | set(COMMON)
    assert set(reports[kind]) == top, "every top-level field is documented, and only those"


def test_demo_json_is_stamped_too(cli):
    code, out, _ = cli("demo", "--format", "json", "--metrics", "macs", "--no-progress")
    data = json.loads(out)
    assert code == 0 and list(data)[:4] == COMMON and data["report"] == "demo"


def test_schema_major():
    assert schema_major("1.0") == 1 and schema_major("12.3") == 12
    assert schema_major(None) is None and schema_major("one") is None and schema_major(1) is None
