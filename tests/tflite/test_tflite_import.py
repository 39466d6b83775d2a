"""Importing the backend package loads no ai-edge-litert; a missing one names the extra to install."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_package_is_lazy_and_a_missing_litert_names_the_extra():
    code = ("import sys; sys.modules['ai_edge_litert'] = None\n"  # an import of it now raises ImportError
            "import deeplite_like.backends.tflite as t\n"
            "assert 'TFLiteProfiler' in t.__all__\n"
            "from deeplite_like.backends import backend_for\n"  # chosen by suffix or identifier, nothing imported
            "assert backend_for('m.TFLite').name == backend_for(b'\\x1c\\0\\0\\0TFL3').name == 'tflite'\n"
            "try:\n    t.count_ops(b'')\nexcept ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert "pip install 'deeplite-like[tflite]'" in done.stdout


def test_a_file_that_is_not_a_flatbuffer_says_why():
    import pytest

    pytest.importorskip("ai_edge_litert")
    from deeplite_like.backends.tflite import load_model

    with pytest.raises(ValueError, match=r"not a TFLite flatbuffer: the file identifier \(bytes 4-8\) is b'ONNX'"):
        load_model(b"\x08\x07\x12\x00ONNX and more bytes")
    with pytest.raises(TypeError, match="a path to a .tflite file or its bytes, got int"):
        load_model(3)
