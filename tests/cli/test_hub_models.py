"""``hf:NAME_OR_DIR[?task=...]`` and ``timm:NAME``: models named by a hub.

The hf: tests build from a local directory holding ``config.json`` (the real loading code path:
``AutoConfig.from_pretrained`` on a directory) and skip where transformers is not installed;
timm is replaced by a fake module. Nothing here reaches the network.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import types

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch import count_ops
from deeplite_like.cli.exit_codes import UsageError
from deeplite_like.cli.loading import load_model, parse_model_args
from deeplite_like.cli.loading.torch_files import parse_hf_spec

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed here")


# ------------------------------------------------------------------------------ the spec
def test_spec_parsing_and_its_errors():
    assert parse_hf_spec("gpt2", "hf:gpt2") == ("gpt2", None)
    assert parse_hf_spec("meta-llama/Llama-2-7b-hf?task=causal-lm", "s") == ("meta-llama/Llama-2-7b-hf", "causal-lm")
    with pytest.raises(UsageError, match="unknown task 'causal_lm'") as info:
        parse_hf_spec("gpt2?task=causal_lm", "hf:gpt2?task=causal_lm")
    assert "did you mean causal-lm" in info.value.hint
    with pytest.raises(UsageError, match="unknown option 'revision'"):
        parse_hf_spec("gpt2?revision=main", "hf:gpt2?revision=main")
    with pytest.raises(UsageError, match="no model named after 'hf:'"):
        parse_hf_spec("", "hf:")


def test_hf_form_says_what_to_install_when_transformers_is_missing(cli, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a))
    code, _, err = cli("profile", "hf:gpt2", "--no-progress")
    assert code == 2 and "'hf:gpt2' needs transformers, which is not installed here" in err
    assert "pip install transformers" in err


# ------------------------------------------------------------------------------ hf: with transformers
@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    if not HAS_TRANSFORMERS:
        pytest.skip("transformers is not installed here")
    import transformers

    root = tmp_path_factory.mktemp("hf")
    transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=64, bos_token_id=0,
                            eos_token_id=0, architectures=["GPT2LMHeadModel"]).save_pretrained(root / "gpt2")
    transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                             num_key_value_heads=2, vocab_size=100).save_pretrained(root / "llama")
    transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128).save_pretrained(root / "vit")
    return root


@needs_transformers
def test_hf_directory_builds_on_meta_and_counts_as_the_real_model(configs):
    import transformers

    loaded = load_model(f"hf:{configs / 'gpt2'}", seq_len=16)
    assert type(loaded.model).__name__ == "GPT2LMHeadModel"  # from the config's architectures
    assert all(p.is_meta for p in loaded.model.parameters())  # nothing allocated
    args, kwargs = loaded.example
    assert args == () and kwargs["input_ids"].shape == (1, 16) and kwargs["use_cache"] is False
    assert set(loaded.limits) == {"execution_time", "throughput"}
    # The same architecture with real weights, same input: the meta count equals the real count.
    config = transformers.AutoConfig.from_pretrained(configs / "gpt2")
    real = transformers.GPT2LMHeadModel(config).eval()
    assert count_ops(loaded.model, kwargs=kwargs).macs == count_ops(real, kwargs=kwargs).macs
    # by hand, per token: 2 blocks x (c_attn 64*192 + c_proj 64*64 + c_fc 64*256 + c_proj 256*64) = 2 x 49,152
    # = 98,304; lm_head 64*100 = 6,400; attention 2 blocks x 2 x 16 keys x 64 = 4,096 (per token, 16 tokens).
    # 16 x (98,304 + 6,400) + 16 x 4,096 = 1,675,264 + 65,536 = 1,740,800 MACs.
    assert count_ops(loaded.model, kwargs=kwargs).macs == 1_740_800


@needs_transformers
def test_hf_task_and_config_overrides(configs):
    loaded = load_model(f"hf:{configs / 'llama'}?task=causal-lm", parse_model_args('{"num_hidden_layers": 1}'))
    assert type(loaded.model).__name__ == "LlamaForCausalLM" and loaded.model.config.num_hidden_layers == 1
    assert loaded.example[1]["input_ids"].shape == (1, 128)  # the default sequence length
    base = load_model(f"hf:{configs / 'llama'}")
    assert type(base.model).__name__ == "LlamaModel"  # no architectures in the config: the base model
    with pytest.raises(UsageError, match="'layers' is not a field of LlamaConfig"):
        load_model(f"hf:{configs / 'llama'}", parse_model_args('{"layers": 1}'))


@needs_transformers
def test_hf_image_model_gets_an_image_of_its_size(configs):
    loaded = load_model(f"hf:{configs / 'vit'}")
    assert loaded.example[1]["pixel_values"].shape == (1, 3, 32, 32)


@needs_transformers
def test_hf_seq_len_longer_than_the_model_is_refused(configs):
    with pytest.raises(UsageError, match=r"--seq-len 100 is longer than the model's maximum \(64 positions\)"):
        load_model(f"hf:{configs / 'gpt2'}", seq_len=100)


@needs_transformers
def test_hf_profile_on_the_command_line(cli, configs):
    code, out, err = cli("profile", f"hf:{configs / 'gpt2'}", "--seq-len", "16", "--metrics", "macs,params",
                         "--format", "json", "--no-progress")
    assert code == 0, err
    metrics = {m["key"]: m["value"] for m in json.loads(out)["status"]["metrics"]}
    assert metrics["macs"] == 1_740_800  # derived above
    # params: wte 100*64 + wpe 64*64 + 2 blocks x (2 LayerNorms 256 + c_attn 12,480 + c_proj 4,160 + c_fc 16,640
    # + c_proj 16,448 = 49,984) + ln_f 128 = 6,400 + 4,096 + 99,968 + 128 = 110,592 (lm_head is tied to wte)
    assert metrics["total_params"] == 110_592


@needs_transformers
def test_hf_name_that_cannot_be_resolved_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    import huggingface_hub.constants  # read at import: once loaded, the environment no longer switches it

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UsageError, match="cannot resolve 'hf:no-such-org/no-such-model'") as info:
        load_model("hf:no-such-org/no-such-model")
    assert "huggingface-cli download no-such-org/no-such-model config.json" in info.value.hint


# ------------------------------------------------------------------------------ timm:
def test_timm_form_builds_with_random_weights(monkeypatch):
    calls = []

    def create_model(name, pretrained=True, **kwargs):
        calls.append((name, pretrained, kwargs))
        model = nn.Linear(4, 3)
        model.pretrained_cfg = {"input_size": (3, 160, 160)}
        return model

    fake = types.ModuleType("timm")
    fake.list_models = lambda: ["resnet18", "vit_tiny_patch16_224"]
    fake.create_model = create_model
    monkeypatch.setitem(sys.modules, "timm", fake)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: types.SimpleNamespace() if name == "timm" else real(name, *a))
    loaded = load_model("timm:resnet18", parse_model_args('{"num_classes": 10}'))
    assert calls == [("resnet18", False, {"num_classes": 10})]  # pretrained=False: nothing is downloaded
    assert loaded.input_shapes == [(1, 3, 160, 160)]
    with pytest.raises(UsageError, match="timm has no model named 'resnet81'") as info:
        load_model("timm:resnet81")
    assert "resnet18" in info.value.hint
    with pytest.raises(UsageError, match="weights are never downloaded"):
        load_model("timm:resnet18", parse_model_args('{"pretrained": true}'))


def test_timm_form_says_what_to_install_when_missing(cli, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "timm" else real(name, *a))
    code, _, err = cli("profile", "timm:resnet18", "--no-progress")
    assert code == 2 and "needs timm" in err and "pip install timm" in err


def test_meta_memory_measures_a_model_that_reads_its_index_values():
    """Peak memory on meta gets through the same value-dependent control flow counting does."""
    from deeplite_like.backends.torch.memory import peak_activation_memory

    class Packed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x, position_ids):
            packed = (torch.diff(position_ids, prepend=position_ids[:, :1] - 1, dim=-1) != 1).cumsum(-1)
            x = self.fc(x)
            return x if (packed[:, -1] == 0).all() else x * 2

    x, ids = torch.randn(2, 5, 8), torch.arange(5).repeat(2, 1)  # (meta inputs are contiguous copies)
    real = peak_activation_memory(Packed(), (x, ids))
    meta = peak_activation_memory(Packed(), (x, ids), meta=True)
    assert meta.peak_bytes == real.peak_bytes > 0
