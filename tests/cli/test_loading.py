"""Every MODEL form of the command line, and every way a spec can be wrong.

Costs quoted below are for ``tests.cli.fixture_models.tiny`` (Linear(4, 3)) on a batch of 2:
MACs = 2 * 4 * 3 = 24; FLOPs = 2 * 24 + 2 * 3 bias adds = 54.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import types
import warnings

import pytest
import torch
from torch import nn

from deeplite_like.cli.exit_codes import ProfilingFailed, UsageError
from deeplite_like.cli.loading import load_model, parse_model_args

TINY = "tests.cli.fixture_models:tiny"
FAST = ("--min-run-time", "0.01", "--no-progress")


def _json(out: str) -> dict:
    data = json.loads(out)
    return {m["key"]: m["value"] for m in data["status"]["metrics"]}


# ------------------------------------------------------------------------------- zoo:NAME
def test_zoo_form_uses_the_entry_and_its_example_input(cli):
    loaded = load_model("zoo:lenet5")
    assert (loaded.name, loaded.framework) == ("lenet5", "torch")
    assert tuple(loaded.example[0][0].shape) == (1, 1, 32, 32)
    # LeNet-5 per sample: conv1 6*28*28*(1*5*5) = 117,600; conv2 16*10*10*(6*5*5) = 240,000;
    # fc 400*120 + 120*84 + 84*10 = 48,000 + 10,080 + 840 = 58,920; total 416,520 MACs.
    code, out, _ = cli("profile", "zoo:lenet5", "--metrics", "macs", "--format", "json", *FAST)
    assert code == 0 and _json(out)["macs"] == 416_520


def test_zoo_form_with_model_args(cli):
    # num_classes=100: the last layer is 84*100 = 8,400 MACs instead of 840: 416,520 + 7,560 = 424,080.
    code, out, _ = cli("profile", "zoo:lenet5", "--model-args", '{"num_classes": 100}', "--metrics", "macs",
                       "--format", "json", *FAST)
    assert code == 0 and _json(out)["macs"] == 424_080


def test_unknown_zoo_name_suggests_the_close_one(cli):
    code, _, err = cli("profile", "zoo:lenet", *FAST)
    assert code == 2
    assert "no zoo model named 'lenet'" in err and "did you mean 'lenet5'" in err and "hint:" in err


# ------------------------------------------------------------------- package.module:factory
def test_module_factory_form(cli):
    code, out, _ = cli("profile", TINY, "--input-shape", "2,4", "--metrics", "macs,flops", "--format", "json", *FAST)
    assert code == 0 and _json(out) == {"macs": 24, "flops": 54}


def test_module_factory_with_model_args_keywords_and_positionals():
    # mlp(hidden=8, depth=2): 4*8 + 8*8 + 8*2 = 32 + 64 + 16 = 112 parameters of weights, biases 8 + 8 + 2 = 18.
    by_keyword = load_model("tests.cli.fixture_models:mlp", parse_model_args('{"hidden": 8, "depth": 2}'))
    by_position = load_model("tests.cli.fixture_models:mlp", parse_model_args("[8, 2]"))
    for loaded in (by_keyword, by_position):
        assert sum(p.numel() for p in loaded.model.parameters()) == 112 + 18


def test_factory_returning_model_and_example_gives_the_default_inputs(cli):
    code, out, _ = cli("profile", "tests.cli.fixture_models:tiny_with_example", "--metrics", "macs",
                       "--format", "json", *FAST)
    assert code == 0 and _json(out)["macs"] == 24  # the example is a batch of 2


def test_module_level_model_instance_is_used_as_is():
    from tests.cli import fixture_models

    assert load_model("tests.cli.fixture_models:INSTANCE").model is fixture_models.INSTANCE


def test_several_inputs_by_repeating_input_shape(cli):
    # fc(x) + y on a batch of 2: MACs 24; FLOPs 54 + the add of y, 2 * 3 = 6 -> 60.
    code, out, _ = cli("profile", "tests.cli.fixture_models:TwoInputs", "--input-shape", "2,4", "--input-shape",
                       "2,3", "--metrics", "macs,flops", "--format", "json", *FAST)
    assert code == 0 and _json(out) == {"macs": 24, "flops": 60}


@pytest.mark.parametrize("spec, message", [
    ("no_such_package_xyz.models:build", "no module named 'no_such_package_xyz'"),
    ("tests.cli.fixture_models:tinyy", "has no attribute 'tinyy'"),
    ("tests.cli.fixture_models:NUMBER", "is a int, not a model or a factory"),
    ("foo", "cannot tell what model 'foo' names"),
    ("models/resnet:build", "is not a .py file"),
])
def test_bad_module_specs_are_usage_errors(cli, spec, message):
    code, _, err = cli("profile", spec, *FAST)
    assert code == 2, err
    assert message in err and "hint:" in err


def test_misspelt_factory_gets_a_suggestion():
    with pytest.raises(UsageError) as info:
        load_model("tests.cli.fixture_models:tinyy")
    assert "did you mean tiny" in info.value.hint


@pytest.mark.parametrize("args, message", [
    ("{not json", "--model-args is not valid JSON"),
    ('"text"', "must be a JSON object (keyword arguments) or list"),
    ('{"width": 3}', "cannot call mlp(hidden: int = 5, depth: int = 1) with --model-args"),
])
def test_bad_model_args_are_usage_errors(cli, args, message):
    code, _, err = cli("profile", "tests.cli.fixture_models:mlp", "--model-args", args, *FAST)
    assert code == 2 and message in err


def test_factory_that_raises_is_a_failure_and_verbose_shows_the_traceback(cli):
    code, _, err = cli("profile", "tests.cli.fixture_models:broken", *FAST)
    assert code == 1
    assert "broken() raised RuntimeError: the factory itself is broken" in err and "Traceback" not in err
    code, _, err = cli("profile", "tests.cli.fixture_models:broken", "--verbose", *FAST)
    assert code == 1 and "Traceback (most recent call last)" in err


def test_factory_returning_something_else_is_a_failure():
    with pytest.raises(ProfilingFailed, match=r"built a builtins\.str, which is neither"):
        load_model("tests.cli.fixture_models:not_a_model")


# ---------------------------------------------------------------------- path/to/file.py:factory
def test_python_file_factory_imports_its_siblings(tmp_path, cli):
    (tmp_path / "helpers.py").write_text("WIDTH = 3\n")
    (tmp_path / "my_models.py").write_text(
        "import torch\nfrom helpers import WIDTH\n\n"
        "def build(width=WIDTH):\n    return torch.nn.Linear(4, width)\n")
    code, out, _ = cli("profile", f"{tmp_path}/my_models.py:build", "--input-shape", "2,4", "--metrics", "macs",
                       "--format", "json", *FAST)
    assert code == 0 and _json(out)["macs"] == 24
    assert str(tmp_path) not in sys.path  # the file's directory was importable only while loading


def test_python_file_errors(tmp_path, cli):
    (tmp_path / "needs.py").write_text("import no_such_dependency_xyz\n")
    (tmp_path / "raises.py").write_text("raise ValueError('bad module')\n")
    code, _, err = cli("profile", f"{tmp_path}/missing.py:build", *FAST)
    assert code == 2 and "no such Python file" in err
    code, _, err = cli("profile", f"{tmp_path}/needs.py:build", *FAST)
    assert code == 2 and "imports 'no_such_dependency_xyz', which is not installed here" in err
    code, _, err = cli("profile", f"{tmp_path}/raises.py:build", *FAST)
    assert code == 1 and "running raises.py raised ValueError: bad module" in err


# --------------------------------------------------------------------------- saved torch files
def test_torchscript_file(tmp_path, cli):
    path = tmp_path / "tiny_script.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script is deprecated in favour of export
        torch.jit.script(nn.Linear(4, 3)).save(str(path))
    loaded = load_model(str(path))
    assert loaded.name == "tiny_script" and "layerwise_summary" in loaded.limits
    code, out, _ = cli("profile", str(path), "--input-shape", "2,4", "--metrics", "macs,flops,params,size",
                       "--format", "json", *FAST)
    # params 4*3 + 3 = 15; size 15 float32 = 60 bytes.
    assert code == 0 and _json(out) == {"macs": 24, "flops": 54, "total_params": 15, "trainable_params": 15,
                                        "model_size": 60}
    code, _, err = cli("profile", str(path), "--input-shape", "2,4", "--metrics", "layers", *FAST)
    assert code == 2 and "TorchScript module takes no forward hooks" in err


def test_torch_export_file_uses_its_sample_inputs(tmp_path, cli):
    path = tmp_path / "tiny.pt2"
    torch.export.save(torch.export.export(nn.Linear(4, 3), (torch.randn(2, 4),)), str(path))
    code, out, _ = cli("profile", str(path), "--format", "json", *FAST)
    assert code == 0
    values = _json(out)
    assert (values["macs"], values["flops"], values["total_params"]) == (24, 54, 15)
    assert values["execution_time"] > 0
    assert "torch.export specialises shapes" in json.loads(out)["notes"][0]


def test_pickled_full_model_is_refused_with_an_explanation(tmp_path, cli):
    path = tmp_path / "full.pt"
    torch.save(nn.Sequential(nn.Linear(4, 3)), str(path))
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2
    first = err.splitlines()[0]
    assert "is a pickled Python object (it needs the Python class torch.nn.modules.container.Sequential)" in first
    assert "would run arbitrary code" in first and "refuses" in first
    assert "torch.jit.script(model).save" in err and "torch.export.save" in err and "--weights" in err


def test_state_dict_file_is_explained_and_loads_with_weights(tmp_path, cli):
    path = tmp_path / "weights.pt"
    saved = nn.Linear(4, 3)
    torch.save({"epoch": 3, "state_dict": saved.state_dict()}, str(path))
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2
    assert "holds a state_dict under the key 'state_dict' (weights only, 2 tensors such as 'weight', 'bias')" in err
    assert "--weights" in err
    loaded = load_model(TINY, weights=str(path))
    assert torch.equal(loaded.model.weight, saved.weight) and torch.equal(loaded.model.bias, saved.bias)
    with pytest.raises(UsageError, match="does not fit"):
        load_model("tests.cli.fixture_models:mlp", weights=str(path))


@pytest.mark.parametrize("name, content", [("notes.pt", b"not a torch file"), ("missing.pt", None)])
def test_unreadable_or_missing_model_files(tmp_path, cli, name, content):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    code, _, err = cli("profile", str(path), *FAST)
    assert code == 2
    assert ("is not a PyTorch file: it is a text file" in err) if content is not None else ("no such model file" in err)


# ------------------------------------------------------------------------------- torchvision
def test_torchvision_form_says_what_to_install_when_missing(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # import torchvision -> ImportError
    code, _, err = cli("profile", "torchvision:resnet18", *FAST)
    assert code == 2 and "needs torchvision, which is not installed here" in err and "pip install torchvision" in err


def test_torchvision_form_builds_with_random_weights(monkeypatch):
    calls = []

    def get_model(name, weights="download me", **kwargs):
        calls.append((name, weights, kwargs))
        return nn.Linear(4, 3)

    fake = types.ModuleType("torchvision")
    fake.models = types.SimpleNamespace(list_models=lambda: ["resnet18", "inception_v3"], get_model=get_model)
    monkeypatch.setitem(sys.modules, "torchvision", fake)
    loaded = load_model("torchvision:resnet18", parse_model_args('{"num_classes": 10}'))
    assert calls == [("resnet18", None, {"num_classes": 10})]  # weights=None: nothing is downloaded
    assert loaded.input_shapes == [(1, 3, 224, 224)]
    assert load_model("torchvision:inception_v3").input_shapes == [(1, 3, 299, 299)]
    with pytest.raises(UsageError, match="torchvision has no model named 'resnet81'") as info:
        load_model("torchvision:resnet81")
    assert "resnet18" in info.value.hint


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                    reason="torchvision is not installed here")
def test_real_torchvision_model():
    loaded = load_model("torchvision:resnet18")
    assert sum(p.numel() for p in loaded.model.parameters()) == 11_689_512  # torchvision's documented size


# ------------------------------------------------------------------------ keras forms
def test_keras_forms_say_what_to_install_when_missing(cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "keras" else real(name, *a))
    for spec in ("keras.applications:MobileNet", "model.keras"):
        code, _, err = cli("profile", spec, *FAST)
        if spec.endswith(".keras"):
            assert code == 2 and "no such model file" in err  # the path is checked first
        else:
            assert code == 2 and "needs keras" in err and "pip install 'deeplite-like[keras]'" in err
