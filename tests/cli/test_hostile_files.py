"""Hostile input, second round (issue 29, section 3): files and model specs.

Each test is one scenario of the issue: a hostile ``.pt2``, ``.npy`` / ``.npz`` or ``hf:`` config
is refused up front with a clear error (exit 2), in bounded time and memory, and no planted
code runs. ``tiny`` is Linear(4, 3): 2 * 4 * 3 = 24 MACs on a batch of 2.
"""
from __future__ import annotations

import io
import json
import time
import zipfile

import numpy as np
import pytest

from deeplite_like.cli.loading import preflight as input_memory
from deeplite_like.cli.loading.export_archive import MAX_VALUE_BITS, _is_shape_expression
from tests.cli.hostile_files import edit_text, export_archive, rewrite

FAST = ("--min-run-time", "0.01", "--no-progress")
TINY = "tests.cli.fixture_models:tiny"
PROGRAM = "models/model.json"
MiB = 2**20


def _symbol(path) -> str:
    import re

    with zipfile.ZipFile(path) as archive:
        text = archive.read(f"{path.stem}/{PROGRAM}").decode()
    return re.search(r"Symbol\('s\d+', positive=True, integer=True\)", text).group(0)


# ------------------------------------------------------------------------------ .pt2 shape expressions
@pytest.mark.parametrize("hostile", [
    "{s} + 2**2**40",  # the issue's: sympy computes 2**(2**40) first, and never finishes
    "Add({s}, Pow(Integer(2), Pow(Integer(2), Integer(40))))",  # the same in torch's own srepr form
    "Pow(Integer(10), Integer(1000000))",  # an exponent beyond MAX_EXPONENT
    "(((2**64)**64)**64)**64",  # small exponents, nested: 2**(64**4) has 16.7 million bits
    "Mul(" + ", ".join(["Integer(" + "9" * 19 + ")"] * 300) + ")",  # a product of 300 19-digit numbers
    "PowByNatural({s}, Integer(100000000000))",  # torch's own power function
    "LShift(Integer(1), Integer(10000000000))",  # a shift is a power of two
    "factorial(Integer(100000000))",  # sympy would compute it: not a shape function
    "S('2**2**40')",  # S() parses a string: a second evaluation
    "Float('1e100000000')",  # a string for sympy to parse
    "(" * 5000 + "{s}" + ")" * 5000,  # nesting deeper than Python's parser takes
])
def test_shape_expression_that_would_take_unbounded_work_is_refused_quickly(tmp_path, cli, hostile):
    archive = export_archive(tmp_path / "m.pt2", dynamic=True)
    symbol = _symbol(archive)
    evil = rewrite(archive, tmp_path / "evil.pt2", edit_text(PROGRAM, json.dumps(symbol)[1:-1],
                                                             json.dumps(hostile.replace("{s}", symbol))[1:-1]))
    assert evil.stat().st_size < 200_000  # a small file
    started = time.perf_counter()
    code, _, err = cli("profile", str(evil), *FAST)
    assert time.perf_counter() - started < 30  # the archive check is cheap; nothing is evaluated
    assert code == 2 and "which is not a shape expression" in err and PROGRAM in err


@pytest.mark.parametrize("expression", [
    "Symbol('s77', positive=True, integer=True)",
    "Mul(Integer(4), Pow(Symbol('s74', positive=True, integer=True), Integer(2)))",  # as torch 2.x writes them
    "Add(Mul(Integer(6), Symbol('s74', positive=True, integer=True)), Integer(1))",
    "FloorDiv(Symbol('s0', positive=True, integer=True), Integer(2))",
    "Max(1, s0) + 2*s0**2 - (s1 // 3) % 7",
    "Eq(Mod(s0, 2), 0)",
    "2**64",  # a big shape product: 65 bits, well inside MAX_VALUE_BITS
])
def test_shape_expressions_torch_writes_pass(expression):
    assert _is_shape_expression(expression)


def test_the_bit_bound_is_the_documented_one():
    # the bound on a power is (bits of the base) x exponent; 2 and 3 are 2-bit numbers, 4 a 3-bit one
    assert MAX_VALUE_BITS == 4096
    assert _is_shape_expression("(2**32)**64")  # 2 * 32 * 64 = 4096 bits: at the bound
    assert _is_shape_expression("(3**32)**64")  # 2 * 32 * 64 = 4096
    assert not _is_shape_expression("(4**32)**64")  # 3 * 32 * 64 = 6144 > 4096
    assert not _is_shape_expression("((2**64)**64)**64")  # 2 * 64**3 = 524288


def test_pt2_json_nested_100000_deep_is_refused(tmp_path, cli):
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    archive = export_archive(tmp_path / "m.pt2")
    evil = rewrite(archive, tmp_path / "deep.pt2", lambda record, data: deep if record == PROGRAM else None)
    code, _, err = cli("profile", str(evil), *FAST)
    assert code == 2 and "nests its JSON too deeply to read" in err and PROGRAM in err


# ------------------------------------------------------------------------------ .npy / .npz
def _npy_declaring(shape: tuple[int, ...], dtype: str = "<f4", payload: bytes = b"") -> bytes:
    """A .npy whose header declares ``shape`` and whose data is ``payload`` (short of it, on purpose)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue() + payload


def test_npy_declaring_4_tb_is_refused_before_reading(tmp_path, cli):
    path = tmp_path / "huge.npy"
    path.write_bytes(_npy_declaring((2**40,)))  # 2**40 float32 = 4 TiB, in a file of 128 bytes
    code, _, err = cli("profile", TINY, "--inputs", str(path), *FAST)
    assert code == 2 and "--inputs: the inputs alone would take 4.000 TiB" in err
    assert "MemoryError" not in err


def test_npz_member_declaring_4_tb_is_refused_before_reading(tmp_path, cli):
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("arr_0.npy", _npy_declaring((2**40,)))
    code, _, err = cli("profile", TINY, "--inputs", str(path), *FAST)
    assert code == 2 and "the inputs alone would take 4.000 TiB" in err


def test_npy_declaring_more_than_it_holds_is_called_corrupt(tmp_path, cli, monkeypatch):
    path = tmp_path / "short.npy"
    path.write_bytes(_npy_declaring((2, 4), payload=b"\0" * 8))  # 2 * 4 * 4 = 32 B declared, 8 B held
    code, _, err = cli("profile", TINY, "--inputs", str(path), *FAST)
    assert code == 2 and "declares 32 B of data but the file holds 8 B" in err


def test_npz_zip_bomb_is_refused_with_the_estimate_before_inflating(tmp_path, cli, monkeypatch):
    """A deflated archive whose members inflate beyond the memory here: refused from the sizes its entries declare."""
    path = tmp_path / "bomb.npz"
    zeros = np.zeros((64 * MiB // 4,), np.float32)  # 64 MiB of zeros, deflated to about 64 KiB
    np.savez_compressed(path, zeros)
    assert path.stat().st_size < MiB
    monkeypatch.setattr(input_memory, "available_memory", lambda: 32 * MiB)  # half of it: 16 MiB may be inputs
    code, _, err = cli("profile", TINY, "--inputs", str(path), *FAST)
    assert code == 2 and "1 arrays that unpack to 64.00 MiB" in err and "refused before allocating" in err


def test_good_npz_still_loads(tmp_path, cli):
    path = tmp_path / "x.npz"
    np.savez(path, np.ones((2, 4), np.float32))
    code, out, err = cli("profile", TINY, "--inputs", str(path), "--metrics", "macs", "--format", "json", *FAST)
    assert code == 0, err
    assert {m["key"]: m["value"] for m in json.loads(out)["status"]["metrics"]} == {"macs": 24}


# ------------------------------------------------------------------------------ hf:
transformers = pytest.importorskip("transformers")


@pytest.fixture
def gpt2_dir(tmp_path):
    def make(**fields):
        config = transformers.GPT2Config(**{"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 50,
                                            "n_positions": 64, "bos_token_id": 0, "eos_token_id": 0, **fields})
        config.save_pretrained(tmp_path / "gpt2")
        return tmp_path / "gpt2"
    return make


@pytest.mark.parametrize("architecture, kind", [("pipeline", "function"), ("AutoTokenizer", "class"),
                                                ("__class__", None), ("os.system", None)])
def test_hf_architectures_naming_a_function_is_a_clear_error(cli, gpt2_dir, architecture, kind):
    directory = gpt2_dir(architectures=[architecture])
    code, _, err = cli("profile", f"hf:{directory}", "--seq-len", "8", *FAST)
    assert code == 2 and f"architectures entry {architecture!r}" in err
    assert "AttributeError" not in err
    if kind:
        assert f"a {kind} that is not a model class" in err


def test_hf_seq_len_10_to_the_10_is_refused_before_allocating(cli, gpt2_dir, monkeypatch):
    monkeypatch.setattr(input_memory, "available_memory", lambda: 64 * 2**30)  # a 64 GiB machine
    directory = gpt2_dir(n_positions=10**12)  # the model's own maximum does not stop it
    started = time.perf_counter()
    code, _, err = cli("profile", f"hf:{directory}", "--seq-len", str(10**10), *FAST)
    # 10**10 int64 token ids: 8 * 10**10 B = 74.51 GiB, more than half of 64 GiB
    assert code == 2 and "--seq-len 10000000000: the inputs alone would take 74.51 GiB" in err
    assert time.perf_counter() - started < 30


def test_pt_inputs_zip_bomb_is_refused_before_torch_unpacks_it(tmp_path, cli, monkeypatch):
    import torch

    path = tmp_path / "bomb.pt"
    buffer = io.BytesIO()
    torch.save(torch.zeros(16 * MiB // 4), buffer)  # 16 MiB of zeros in the zip torch writes
    with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():  # the same records, deflated: 16 MiB in about 16 KiB
            target.writestr(info.filename, source.read(info))
    assert path.stat().st_size < MiB
    monkeypatch.setattr(input_memory, "available_memory", lambda: 8 * MiB)
    code, _, err = cli("profile", TINY, "--inputs", str(path), *FAST)
    assert code == 2 and "unpacks to 16.00 MiB, more than the 8.000 MiB of memory available here" in err


@pytest.mark.parametrize("text, message", [("[" * 50_000 + "]" * 50_000, "nests its JSON too deeply"),
                                           ('{"n": ' + "9" * 5000 + "}", "--model-args cannot be read")])
def test_model_args_too_deep_or_too_long_is_a_usage_error(cli, text, message):
    code, _, err = cli("profile", TINY, "--model-args", text, "--input-shape", "2,4", *FAST)
    assert code == 2 and message in err
