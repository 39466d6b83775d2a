"""Every loader the command line uses, fed a hostile file: nothing runs, and the refusal is clear.

Each hostile file would create the marker file if its code ran (``tests.cli.hostile_files``);
the ``marker`` fixture fails the test if it exists afterwards. ``.pt2`` archives have their own
file (``test_export_archive.py``).
"""
from __future__ import annotations

import json
import os
import zipfile

import numpy as np
import pytest
import torch
from torch import nn

from tests.cli.hostile_files import Plant, raw_pickle, torch_pickle

TINY = "tests.cli.fixture_models:tiny"
FAST = ("--min-run-time", "0.01", "--no-progress")


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "MARKER"
    yield path
    assert not path.exists(), "code planted in a file ran"


def _one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("deeplite-like: error: ") and lines[1].startswith("  hint: "), err
    return lines[0]


# ------------------------------------------------------------------------------ pickles in .pt files
@pytest.mark.parametrize("suffix", [".pt", ".pth", ".bin", ".ckpt"])
@pytest.mark.parametrize("kind", ["torch.save zip", "raw pickle"])
def test_model_file_with_reduce_runs_nothing(tmp_path, cli, marker, suffix, kind):
    path = tmp_path / f"evil{suffix}"
    path.write_bytes(torch_pickle(marker) if kind == "torch.save zip" else raw_pickle(marker))
    code, out, err = cli("profile", str(path), *FAST)
    assert code == 2 and out == ""
    line = _one_error(err)
    assert "refuses" in line or "cannot read" in line


def test_weights_file_with_reduce_runs_nothing(tmp_path, cli, marker):
    path = tmp_path / "weights.pt"
    path.write_bytes(torch_pickle(marker, wrap=lambda plant: {"weight": plant}))
    code, _, err = cli("profile", TINY, "--weights", str(path), "--input-shape", "2,4", *FAST)
    assert code == 2
    assert f"--weights {str(path)!r} is a pickled Python object, not plain weights" in _one_error(err)


def test_inputs_pt_with_reduce_runs_nothing(tmp_path, cli, marker):
    path = tmp_path / "x.pt"
    path.write_bytes(torch_pickle(marker, wrap=lambda plant: (torch.ones(2, 4), plant)))
    code, _, err = cli("profile", TINY, "--inputs", str(path), *FAST)
    assert code == 2
    assert f"--inputs {str(path)!r} holds pickled Python objects" in _one_error(err)


@pytest.mark.parametrize("name", ["x.npy", "x.npz"])
def test_inputs_numpy_object_array_runs_nothing(tmp_path, cli, marker, name):
    objects = np.empty(1, dtype=object)
    objects[0] = Plant(marker)
    path = tmp_path / name
    if name.endswith(".npy"):
        np.save(path, objects, allow_pickle=True)
    else:
        np.savez(path, np.ones((2, 4), np.float32), mask=objects)
    code, _, err = cli("profile", TINY, "--inputs", str(path), *FAST)
    assert code == 2
    assert (f"--inputs {str(path)!r} holds an object array (pickled Python objects); loading it would run code "
            "from the file, so deeplite-like refuses to") in _one_error(err)


def test_torchscript_archive_with_planted_pickle_runs_nothing(tmp_path, cli, marker):
    # TorchScript's own unpickler resolves only TorchScript types: a planted data.pkl cannot run Python.
    script = tmp_path / "script.pt"
    torch.jit.script(nn.Linear(4, 3)).save(str(script))
    evil = tmp_path / "evil.pt"
    with zipfile.ZipFile(script) as source, zipfile.ZipFile(evil, "w") as out:
        for info in source.infolist():
            data = raw_pickle(marker) if info.filename.endswith("/data.pkl") else source.read(info)
            out.writestr(info.filename, data)
    code, _, err = cli("profile", str(evil), "--input-shape", "2,4", *FAST)
    assert code == 2
    assert "looks like a TorchScript archive but cannot be loaded" in _one_error(err)


# ------------------------------------------------------------------------------ files that are not models
@pytest.mark.parametrize("name, content, kind", [
    ("notes.pth", b"these are my notes\n", "a text file"),
    ("empty.pt", b"", "an empty file"),
    ("noise.pt", bytes(range(256)) * 4, "a binary file of an unknown kind"),
    ("cut.pth", b"PK\x03\x04\x14\x00\x00\x00", "a truncated or damaged zip archive"),
])
def test_file_with_a_model_extension_that_is_not_one(tmp_path, cli, name, content, kind):
    path = tmp_path / name
    path.write_bytes(content)
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2
    assert f"{str(path)!r} is not a PyTorch file: it is {kind}" in _one_error(err)


@pytest.mark.parametrize("name, content, description", [
    ("passwd", b"root:x:0:0:root:/root:/bin/bash\nsecret-token-123\n", "a text file with no extension"),
    ("data.csv", b"a,b\n1,secret-token-123\n", "a text file with the extension '.csv'"),
    ("blob.dat", b"\x00\x01secret-token-123\xff\xfe", "a binary file of an unknown kind with the extension '.dat'"),
])
def test_existing_file_that_is_no_model_is_refused_without_its_content(tmp_path, cli, monkeypatch, name, content,
                                                                       description):
    (tmp_path / "sub" / "dir").mkdir(parents=True)
    (tmp_path / name).write_bytes(content)
    monkeypatch.chdir(tmp_path / "sub" / "dir")
    spec = f"../../{name}"
    code, out, err = cli("profile", spec, *FAST)
    assert code == 2 and out == ""
    assert f"{spec!r} is not a model file deeplite-like can load: it is {description}" in _one_error(err)
    assert "secret-token-123" not in err and "root:x" not in err


def test_python_file_without_a_factory(tmp_path, cli):
    (tmp_path / "models.py").write_text("raise SystemExit('must not be imported')\n")
    code, _, err = cli("profile", str(tmp_path / "models.py"), *FAST)
    assert code == 2
    assert "is a Python file; name the function in it that builds the model" in _one_error(err)


# ------------------------------------------------------------------------------ .keras files
keras_only = pytest.mark.skipif(__import__("importlib").util.find_spec("keras") is None,
                                reason="keras is not installed here")


@keras_only
def test_keras_lambda_with_code_runs_nothing(tmp_path, cli, marker):
    import keras

    inputs = keras.Input((4,))
    plant = str(marker)
    outputs = keras.layers.Lambda(lambda x: (open(plant, "w").close(), x)[1])(inputs)
    path = tmp_path / "lambda.keras"
    keras.Model(inputs, outputs).save(path)
    marker.unlink()  # building the model ran the lambda once; loading must not
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2
    line = _one_error(err)
    assert f"{str(path)!r} holds Python code (such as a Lambda layer's function)" in line
    assert "safe_mode=True" in line and "Lambda" in line


@keras_only
def test_keras_config_naming_a_python_module_runs_nothing(tmp_path, cli, marker):
    import keras

    path = tmp_path / "dense.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).save(path)
    evil = tmp_path / "evil.keras"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(evil, "w") as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "config.json":
                config = json.loads(data)
                layer = config["config"]["layers"][-1]
                layer.update({"module": "builtins", "class_name": "open", "registered_name": None,
                              "config": {"file": str(marker), "mode": "w"}})
                data = json.dumps(config).encode()
            out.writestr(info, data)
    code, _, err = cli("profile", str(evil), *FAST)
    assert code == 2
    line = _one_error(err)  # Keras resolves classes from its own modules and registered ones only
    assert f"{str(evil)!r} is a corrupt Keras model file" in line and "could not be deserialized" in line


@keras_only
@pytest.mark.parametrize("content, kind", [
    (bytes(range(256)), "a binary file of an unknown kind"),
    (b"PK\x03\x04\x14\x00\x00\x00truncated", "a truncated or damaged zip archive"),
    (b"model: not really\n", "a text file"),
])
def test_corrupt_keras_file_says_corrupt_not_missing(tmp_path, cli, content, kind):
    path = tmp_path / "broken.keras"
    path.write_bytes(content)
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2
    line = _one_error(err)
    assert f"{str(path)!r} is not a Keras model file: it is {kind}" in line and "File not found" not in line


@keras_only
def test_keras_zip_with_damaged_content_is_called_corrupt(tmp_path, cli):
    path = tmp_path / "hollow.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("metadata.json", "{}")
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2
    line = _one_error(err)
    assert f"{str(path)!r}" in line and "File not found" not in line
