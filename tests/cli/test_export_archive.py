"""Hostile ``torch.export`` archives (``.pt2``): every way torch 2.x would run code from one is refused.

Each test plants code that creates a marker file, checks the CLI refuses the archive with the
record's name and the safe alternative, and that the marker does not exist. The "control"
tests show the plant is real: plain ``torch.export.load`` on the same file runs it.

Costs of the legitimate archives: Linear(4, 3) on a batch of 2: MACs 2 * 4 * 3 = 24,
FLOPs 2 * 24 + 2 * 3 bias adds = 54; on a batch of 5: MACs 60, FLOPs 120 + 15 = 135.
"""
from __future__ import annotations

import json
import logging
import re
import zipfile

import pytest
import torch

from deeplite_like.cli.loading.export_archive import _is_operator, _is_shape_expression, checked_archive
from tests.cli.hostile_files import edit_text, export_archive, raw_pickle, replace, rewrite, torch_pickle

FAST = ("--min-run-time", "0.01", "--no-progress")
SAMPLE = "data/sample_inputs/model.pt"
PROGRAM = "models/model.json"
WEIGHTS_CONFIG = "data/weights/model_weights_config.json"
CONSTANTS_CONFIG = "data/constants/model_constants_config.json"
SYMBOL = "Symbol('s77', positive=True, integer=True)"  # the form torch writes; the number varies


def _symbol(path) -> str:
    """The first symbolic shape torch wrote into the archive's program."""
    with zipfile.ZipFile(path) as archive:
        text = archive.read(f"{path.stem}/{PROGRAM}").decode()
    return re.search(r"Symbol\('s\d+', positive=True, integer=True\)", text).group(0)


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "MARKER"
    yield path
    assert not path.exists(), "code planted in a file ran"


def _values(out: str) -> dict:
    return {m["key"]: m["value"] for m in json.loads(out)["status"]["metrics"]}


def _refused(cli, path, record: str) -> str:
    code, out, err = cli("profile", str(path), *FAST)
    assert code == 2 and out == "", err
    assert f"the record {record!r} inside the archive" in err
    assert "hint: re-export it from the model's code: torch.export.save(torch.export.export(model, (x,))" in err
    assert len(err.strip().splitlines()) == 2  # one line, one hint
    return err


def _torch_runs_it(path, marker) -> bool:
    """Control: plain torch.export.load, module() and a forward on ``path``; True if that created the marker."""
    logging.disable(logging.WARNING)  # torch logs the failed safe load before retrying it
    try:
        torch.export.load(str(path)).module(check_guards=False)(torch.ones(2, 4))
    except Exception:  # noqa: BLE001 - the control only asks whether the plant ran
        pass
    finally:
        logging.disable(logging.NOTSET)
    ran = marker.exists()
    marker.unlink(missing_ok=True)
    return ran


# ------------------------------------------------------------------------------ legitimate archives
def test_legitimate_archives_still_load_and_profile(tmp_path, cli):
    code, out, err = cli("profile", str(export_archive(tmp_path / "static.pt2")), "--metrics", "macs,flops",
                         "--format", "json", *FAST)
    assert code == 0, err
    assert _values(out) == {"macs": 24, "flops": 54}
    dynamic = export_archive(tmp_path / "dynamic.pt2", dynamic=True)
    assert _symbol(dynamic).startswith("Symbol('s")  # a symbolic batch axis, parsed by sympify when loaded
    code, out, err = cli("profile", str(dynamic), "--input-shape", "5,4", "--metrics", "macs,flops",
                         "--format", "json", *FAST)
    assert code == 0, err
    assert _values(out) == {"macs": 60, "flops": 135}


# ------------------------------------------------------------------------------ pickled records
@pytest.mark.parametrize("kind", ["torch.save zip", "raw pickle"])
def test_sample_inputs_pickle_with_reduce_is_refused(tmp_path, cli, marker, kind):
    plant = torch_pickle(marker) if kind == "torch.save zip" else raw_pickle(marker)
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2", replace(SAMPLE, plant))
    assert _torch_runs_it(evil, marker)  # the attack of the issue: torch retries with weights_only=False
    err = _refused(cli, evil, SAMPLE)
    assert "does not load with weights_only=True" in err and "runs any code the record holds" in err


def test_plant_nested_inside_legitimate_sample_inputs_is_refused(tmp_path, cli, marker):
    plant = torch_pickle(marker, wrap=lambda p: ((torch.ones(2, 4), p), {}))
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2", replace(SAMPLE, plant))
    err = _refused(cli, evil, SAMPLE)
    assert "it needs the Python object io.open" in err or "builtins.open" in err


def test_pickled_weight_is_refused(tmp_path, cli, marker):
    config = '"path_name": "weight_0", "is_param": true, "use_pickle": false'
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2",
                   lambda name, data: (torch_pickle(marker) if name == "data/weights/weight_0" else
                                       edit_text(WEIGHTS_CONFIG, config, config.replace("false", "true"))(name, data)))
    assert _torch_runs_it(evil, marker)
    err = _refused(cli, evil, "data/weights/weight_0")
    assert "the pickled value of 'weight'" in err


def test_legacy_weights_record_is_refused(tmp_path, cli, marker):
    # torch reads data/weights/<model>.pt (the older layout) instead of the config when it exists.
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2", lambda n, d: None,
                   extra={"data/weights/model.pt": torch_pickle(marker)})
    assert _torch_runs_it(evil, marker)
    _refused(cli, evil, "data/weights/model.pt")


@pytest.mark.parametrize("record, path_name, why", [
    ("data/constants/tensor_constant_0", "tensor_constant_0", "does not load with weights_only=True"),
    ("data/constants/custom_obj_0", "custom_obj_0", "as a pickled Python object"),
    ("data/constants/opaque_obj_0", "opaque_obj_0", "as a pickled Python object"),
])
def test_pickled_constants_are_refused(tmp_path, cli, marker, record, path_name, why):
    config = json.dumps({"config": {"c": {"path_name": path_name, "is_param": False, "use_pickle": True,
                                          "tensor_meta": None}}})
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2",
                   replace(CONSTANTS_CONFIG, config.encode()), extra={record: torch_pickle(marker)})
    err = _refused(cli, evil, record)
    assert why in err


@pytest.mark.parametrize("record", ["serialized_example_inputs.pt", "extra/notes.pkl"])
def test_any_other_pickle_record_is_checked(tmp_path, cli, marker, record):
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2", lambda n, d: None,
                   extra={record: raw_pickle(marker)})
    _refused(cli, evil, record)


# ------------------------------------------------------------------------------ the program's JSON
@pytest.mark.parametrize("expression", [
    "Symbol('s77', positive=(__import__('builtins').open('{marker}', 'w') and True), integer=True)",
    "open('{marker}', 'w') and " + SYMBOL,
    "Symbol('s77', positive=True, integer=True).func.__globals__",
])
def test_shape_expression_with_code_is_refused(tmp_path, cli, marker, expression):
    # torch parses every symbolic shape with sympy.sympify, which evaluates Python.
    archive = export_archive(tmp_path / "m.pt2", dynamic=True)
    symbol = _symbol(archive)
    text = expression.replace(SYMBOL, symbol).replace("'s77'", symbol[7:12]).format(marker=marker)
    evil = rewrite(archive, tmp_path / "evil.pt2", edit_text(PROGRAM, symbol, text))
    if expression.startswith("Symbol('s77', positive=("):
        assert _torch_runs_it(evil, marker)
    err = _refused(cli, evil, PROGRAM)
    assert "which is not a shape expression" in err


@pytest.mark.parametrize("target", ["torch.os.system", "torch.load", "builtins.open",
                                    "torch.ops.aten.linear.default.__class__"])
def test_node_target_that_is_not_an_operator_is_refused(tmp_path, cli, target):
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2",
                   edit_text(PROGRAM, '"torch.ops.aten.linear.default"', json.dumps(target)))
    err = _refused(cli, evil, PROGRAM)
    assert f"names {target!r} as an operator, which is not a torch operator" in err


def test_name_written_into_generated_code_is_refused(tmp_path, cli, marker):
    # A parameter name becomes getattr(self, "NAME") in the code torch.fx generates, and the
    # forward runs it: getattr(self, "bias"); open("MARKER", "w"); ("") (no "." in the plant:
    # fx splits the name on dots).
    name = json.dumps(f'bias"); open("{marker}", "w"); ("').encode()

    def plant(record: str, data: bytes) -> bytes | None:
        if record == PROGRAM:
            return data.replace(b'"parameter_name": "weight"', b'"parameter_name": ' + name)
        return data.replace(b'{"weight": {', b"{" + name + b": {") if record == WEIGHTS_CONFIG else None

    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2", plant)
    assert _torch_runs_it(evil, marker)
    err = _refused(cli, evil, WEIGHTS_CONFIG)  # the config comes first in the archive
    assert "which is not a Python name or dotted path" in err


def test_carriage_return_in_a_stack_trace_is_refused(tmp_path, cli):
    # Defence in depth: fx writes a node's last stack-trace line into a comment of the code it
    # generates when asked to (not in module()'s code here); a carriage return would end it.
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2",
                   edit_text(PROGRAM, "return F.linear(", "return F.linear(\\rimport os #"))
    err = _refused(cli, evil, PROGRAM)
    assert "holds a carriage return in 'stack_trace'" in err


def test_guards_code_is_never_executed(tmp_path, cli, marker):
    # torch.export turns guards_code into Python with exec() only for module(check_guards=True);
    # the command line builds the module with check_guards=False.
    guard = f"open('{marker}', 'w') is None"
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2",
                   edit_text(PROGRAM, '"guards_code": []', json.dumps({"guards_code": [guard]})[1:-1]))
    code, out, err = cli("profile", str(evil), "--metrics", "macs", "--format", "json", *FAST)
    assert code == 0, err
    assert _values(out) == {"macs": 24}


# ------------------------------------------------------------------------------ the archive itself
def test_aotinductor_native_code_is_refused(tmp_path, cli):
    evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2", lambda n, d: None,
                   extra={"data/aotinductor/model/model.so": b"\x7fELF not really"})
    err = _refused(cli, evil, "data/aotinductor/model/model.so")
    assert "torch loads as a native library" in err


def test_duplicate_record_is_refused(tmp_path, cli, marker):
    # Two entries of one name: zip readers disagree on which one is read.
    with pytest.warns(UserWarning, match="Duplicate name"):
        evil = rewrite(export_archive(tmp_path / "m.pt2"), tmp_path / "evil.pt2", lambda n, d: None,
                       extra={SAMPLE: torch_pickle(marker)})
    assert zipfile.ZipFile(evil).namelist().count(f"m/{SAMPLE}") == 2
    code, _, err = cli("profile", str(evil), *FAST)
    assert code == 2 and "holds the record 'm/data/sample_inputs/model.pt' more than once" in err


@pytest.mark.parametrize("content", [b"not a zip at all", b"PK\x03\x04truncated"])
def test_corrupt_archive_is_refused(tmp_path, cli, content):
    path = tmp_path / "broken.pt2"
    path.write_bytes(content)
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2 and "'" + str(path) + "' is not a readable torch.export archive (a zip file)" in err


def test_checked_archive_reads_the_same_program(tmp_path):
    path = export_archive(tmp_path / "m.pt2")
    program = torch.export.load(checked_archive("m.pt2", path.read_bytes()))
    x = torch.ones(2, 4)
    assert torch.equal(program.module()(x), torch.export.load(str(path)).module()(x))


# ------------------------------------------------------------------------------ the two grammars
@pytest.mark.parametrize("text, safe", [
    (SYMBOL, True),
    ("s0 + 2*s1 - 1", True),
    ("FloorDiv(s0, 2) + Max(s1, 3)", True),
    ("Eq(Mod(s0, 4), 0) & (s0 <= 1024)", True),
    ("1.5*s0", True),
    ("__import__('os')", False),
    ("eval('1')", False),
    ("s0.func", False),
    ("Symbol('s0; import os')", False),
    ("[s0][0]", False),
    ("lambda: 1", False),
    ("sympify('1')", False),
    ("parse_expr('1')", False),
])
def test_shape_expression_grammar(text, safe):
    assert _is_shape_expression(text) is safe


@pytest.mark.parametrize("target, safe", [
    ("torch.ops.aten.linear.default", True),
    ("torch.ops.aten._to_copy.default", True),
    ("torch.ops.higher_order.cond", True),
    ("_operator.getitem", True),
    ("_operator.add", True),
    ("torch.sym_max", True),
    ("math.trunc", True),
    ("_operator.attrgetter", False),
    ("_operator.call", False),
    ("math.__loader__", False),
    ("torch.hub.load", False),
    ("torch.ops.load_library", False),
    ("os.system", False),
    ("torch", False),
])
def test_operator_grammar(target, safe):
    assert _is_operator(target) is safe


def test_archive_larger_than_memory_is_refused_before_unpacking(tmp_path, cli, monkeypatch):
    from deeplite_like.cli.loading import preflight as input_memory
    from deeplite_like.units import format_bytes

    path = export_archive(tmp_path / "m.pt2")
    unpacked = sum(info.file_size for info in zipfile.ZipFile(path).infolist())
    monkeypatch.setattr(input_memory, "available_memory", lambda: unpacked - 1)  # a zip bomb, as this machine sees it
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2
    assert (f"the archive unpacks to {format_bytes(unpacked)}, more than the {format_bytes(unpacked - 1)} of memory "
            "available here; refused before unpacking it") in err
