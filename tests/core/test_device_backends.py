import subprocess
import sys

import pytest

from deeplite_like import Device, profiler_for
from deeplite_like.backends import available_backends, backend_for, get_backend


@pytest.mark.parametrize("text, expected", [
    ("cpu", Device.CPU), ("CPU", Device.CPU), ("gpu", Device.CUDA), ("GPU", Device.CUDA), ("cuda", Device.CUDA),
    ("Cuda:1", Device("cuda", 1)), ("meta", Device.META), (" META ", Device.META), (None, Device.CPU),
])
def test_device_names_are_case_insensitive(text, expected):
    assert Device.parse(text) == expected


def test_device_string_is_what_frameworks_accept():
    assert str(Device.parse("GPU:2")) == "cuda:2" and str(Device.GPU) == "cuda" and Device.GPU is Device.CUDA


@pytest.mark.parametrize("bad", ["tpu", "cuda:x", "cpu:0", "", "cuda:-1"])
def test_unknown_device_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="unknown device"):
        Device.parse(bad)


def test_keras_is_checked_before_torch_and_no_framework_is_imported():
    # Fake classes named like a Keras model that is also a torch Module (Keras' torch backend).
    Module = type("Module", (), {"__module__": "torch.nn.modules.module"})
    Layer = type("Layer", (Module,), {"__module__": "keras.src.layers.layer"})
    Model = type("Model", (Layer,), {"__module__": "keras.src.models.model"})
    assert backend_for(Model()).name == "keras"
    assert backend_for(Module()).name == "torch"
    assert available_backends() == ("keras", "torch", "onnx", "tflite")
    with pytest.raises(TypeError, match="no backend handles a model of type builtins.list"):
        backend_for([])
    with pytest.raises(TypeError, match="no backend handles"):
        profiler_for(object(), {})


def test_unknown_backend_name():
    with pytest.raises(ValueError, match="unknown backend 'jax'; available: keras, torch, onnx, tflite"):
        get_backend("jax")


def test_missing_framework_names_the_extra_to_install():
    code = ("import sys; sys.modules['keras'] = None\n"
            "from deeplite_like.backends import get_backend\n"
            "try:\n    get_backend('keras')\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'deeplite-like[keras]'" in out


def test_import_does_not_import_a_framework():
    code = ("import sys, deeplite_like, deeplite_like.metrics\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'tensorflow', 'keras', 'numpy', 'ai_edge_litert')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
