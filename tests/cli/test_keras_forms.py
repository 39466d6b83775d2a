"""The Keras MODEL forms: ``keras.applications:NAME`` (random weights) and a saved ``.keras`` file."""
from __future__ import annotations

import json

import pytest

keras = pytest.importorskip("keras", reason="keras is not installed here")

from deeplite_like.cli.exit_codes import UsageError  # noqa: E402
from deeplite_like.cli.loading import load_model, parse_model_args  # noqa: E402


def test_keras_application_is_built_with_random_weights():
    loaded = load_model("keras.applications:MobileNet",
                        parse_model_args('{"input_shape": [32, 32, 3], "alpha": 0.25, "classes": 10}'))
    assert (loaded.name, loaded.framework) == ("MobileNet", "keras")
    assert loaded.input_shapes == [(1, 32, 32, 3)]  # the unknown batch axis becomes 1
    with pytest.raises(UsageError, match="weights are never downloaded"):
        load_model("keras.applications:MobileNet", parse_model_args('{"weights": "imagenet"}'))
    with pytest.raises(UsageError, match="no model named 'MobileNett'") as info:
        load_model("keras.applications:MobileNett")
    assert "MobileNet" in info.value.hint


def test_saved_keras_file(tmp_path, cli):
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    path = tmp_path / "dense.keras"
    model.save(path)
    loaded = load_model(str(path))
    assert (loaded.name, loaded.framework, loaded.input_shapes) == ("dense", "keras", [(1, 8)])
    try:
        from deeplite_like.backends.keras import count_ops  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"the Keras backend cannot count here yet: {exc}")
    # Dense(8 -> 4) on one sample: 8 * 4 = 32 MACs; FLOPs 2 * 32 + 4 bias adds = 68.
    code, out, err = cli("profile", str(path), "--metrics", "macs,flops", "--format", "json", "--no-progress")
    assert code == 0, err
    values = {m["key"]: m["value"] for m in json.loads(out)["status"]["metrics"]}
    assert values == {"macs": 32, "flops": 68}
