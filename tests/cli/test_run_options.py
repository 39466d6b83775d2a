"""``--backward`` labelled as such, ``--causal-half``, ``--dtype float16|bfloat16`` (a cast copy).

Hand-derived costs:
* ``tiny`` = Linear(4, 3), batch 2: forward 24 MACs, 54 FLOPs; a training step 48 MACs, 114 FLOPs
  (tests/cli/test_commands.py derives them); 15 parameters: 60 B in float32, 30 B in 16 bits.
* ``CausalSelfAttention`` on 1x2x8x4 (2 heads, 8 tokens, head size 4): Q.K^T 8*8*4 = 256 MACs
  and P.V 256 per head, dense 2 * 512 = 1024 MACs; causal counted as half: 512.
"""
from __future__ import annotations

import json
import re

import pytest
import torch

from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading import LoadedModel
from deeplite_like.cli.model_inputs import cast_copy
from tests.cli import fixture_models

TINY = ("tests.cli.fixture_models:tiny", "--input-shape", "2,4")
FAST = ("--min-run-time", "0.01", "--no-progress")


def _metrics(out: str) -> dict:
    return {m["key"]: m for m in json.loads(out)["status"]["metrics"]}


# ------------------------------------------------------------------------------ --backward
def test_backward_is_labelled_in_the_table(cli):
    code, out, _ = cli("profile", *TINY, "--backward", "--metrics", "macs,flops,params", *FAST)
    assert code == 0
    assert re.search(r"\| Computational complexity \(forward \+ backward\)\s+\|\s+48 \| MACs", out)
    assert re.search(r"\| Floating-point operations \(forward \+ backward\)\s+\|\s+114 \| FLOPs", out)
    assert re.search(r"\| Total parameters\s+\|", out)  # parameters are not a pass: no label


def test_backward_keeps_what_it_was_measured_with(cli):
    # The relabelled rows keep their metric's options: the table says how they were measured,
    # and the JSON carries the options (a backward count once lost both).
    code, out, _ = cli("profile", *TINY, "--backward", "--metrics", "macs", *FAST)
    assert code == 0 and "Measured with: batch_size=2, mode=eval, backward" in out
    code, out, _ = cli("profile", *TINY, "--backward", "--metrics", "macs", "--format", "json", *FAST)
    assert _metrics(out)["macs"]["options"]["backward"] is True


def test_backward_label_in_json_and_compare(cli):
    code, out, _ = cli("profile", *TINY, "--backward", "--metrics", "macs,flops", "--format", "json", *FAST)
    metrics = _metrics(out)
    assert code == 0 and metrics["macs"]["name"] == "Computational complexity (forward + backward)"
    assert metrics["macs"]["value"] == 48 and metrics["flops"]["value"] == 114
    code, out, _ = cli("compare", TINY[0], *TINY, "--backward", "--metrics", "macs", "--format", "json", *FAST)
    assert code == 0 and json.loads(out)["compare"]["metrics"][0]["name"] == \
        "Computational complexity (forward + backward)"
    code, out, _ = cli("profile", *TINY, "--metrics", "macs", "--format", "json", *FAST)
    assert _metrics(out)["macs"]["name"] == "Computational complexity"  # forward only: no label


def test_backward_says_the_layer_table_is_forward_only(cli):
    code, out, _ = cli("profile", *TINY, "--backward", "--metrics", "macs,layers", *FAST)
    assert code == 0 and "the per-layer table counts the forward pass" in out


# ------------------------------------------------------------------------------ --causal-half
@pytest.mark.parametrize("extra, macs", [((), 1024), (("--causal-half",), 512)])
def test_causal_half(cli, extra, macs):
    code, out, _ = cli("profile", "tests.cli.fixture_models:CausalSelfAttention", "--input-shape", "1,2,8,4",
                       "--metrics", "macs", "--format", "json", *extra, *FAST)
    assert code == 0 and _metrics(out)["macs"]["value"] == macs
    assert ("--causal-half: causal attention is counted as half" in " ".join(json.loads(out)["notes"])) == bool(extra)


# ------------------------------------------------------------------------------ --dtype
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dtype_profiles_a_cast_copy(cli, dtype):
    before = fixture_models.INSTANCE.weight.detach().clone()
    code, out, err = cli("profile", "tests.cli.fixture_models:INSTANCE", "--input-shape", "2,4", "--dtype", dtype,
                         "--metrics", "macs,size", "--format", "json", *FAST)
    assert code == 0, err
    metrics = _metrics(out)
    assert metrics["model_size"]["value"] == 30 and metrics["macs"]["value"] == 24  # 15 params x 2 bytes
    assert f"profiled a copy cast to {dtype} (the model as loaded is float32)" in json.loads(out)["notes"]
    # the user's model (a module-level instance) is left as it was
    assert fixture_models.INSTANCE.weight.dtype == torch.float32
    assert torch.equal(fixture_models.INSTANCE.weight, before)


def test_without_dtype_the_size_is_float32(cli):
    code, out, _ = cli("profile", *TINY, "--metrics", "size", "--format", "json", *FAST)
    assert code == 0 and _metrics(out)["model_size"]["value"] == 60


def test_dtype_casts_float_inputs_and_keeps_integer_ones():
    model = torch.nn.Linear(4, 3)
    loaded = LoadedModel("x", "x", "torch", model)
    tokens, x = torch.ones(2, dtype=torch.long), torch.ones(2, 4)
    cast, (args, kwargs) = cast_copy(loaded, ((x,), {"ids": tokens}), "bfloat16")
    assert cast.model is not model and cast.model.weight.dtype == torch.bfloat16 and model.weight.dtype == torch.float32
    assert args[0].dtype == torch.bfloat16 and kwargs["ids"].dtype == torch.long and x.dtype == torch.float32


def test_dtype_refuses_keras_models_and_unknown_dtypes(cli):
    with pytest.raises(UsageError, match="--dtype casts PyTorch models"):
        cast_copy(LoadedModel("k.keras", "k", "keras", object()), ((), {}), "float16")
    code, _, err = cli("profile", *TINY, "--dtype", "float8")
    assert code == 2 and "invalid choice: 'float8'" in err


@pytest.mark.parametrize("threads", ["1", "2"])
def test_every_time_of_one_report_is_taken_at_the_thread_count_it_states(cli, threads):
    # the per-layer "Time (hooked)" column used to run at torch's default thread count while the
    # report said num_threads=1: every forward timed for this report runs at --num-threads
    import torch

    from tests.cli.fixture_models import ThreadRecorder

    before = torch.get_num_threads()
    code, out, _ = cli("profile", "tests.cli.fixture_models:thread_recorder", "--input-shape", "2,4",
                       "--no-progress", "--num-threads", threads, "--min-run-time", "0.01")
    assert code == 0, out
    assert "Time (hooked)" in out
    timed = ThreadRecorder.seen[-6:]  # the hooked per-layer timing: 1 warm-up + 5 forwards, the last run
    assert timed and set(timed) == {int(threads)}
    assert torch.get_num_threads() == before
