"""estimate_training_memory on a transformers 5 LlamaForCausalLM: meta == real to the byte.

Runs where transformers is installed (``/work/venv-hf`` here); skipped elsewhere.
"""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from deeplite_like.backends.torch import estimate_training_memory  # noqa: E402


def tiny_llama():
    """vocab 64, hidden 32, 2 layers, 4 heads / 2 KV heads (head dim 8), MLP 48, untied head. Parameters:
    embed 64*32 = 2048; per layer q 32*32 + k 32*16 + v 32*16 + o 32*32 = 3072, MLP 3*32*48 = 4608,
    2 norms 64 -> 7744; final norm 32; head 2048 -> 2048 + 2*7744 + 32 + 2048 = 19616 fp32 = 78464 B.
    """
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


@pytest.mark.parametrize("options", [{}, {"autocast": "bf16"}, {"activation_checkpointing": True},
                                     {"sharding": "fsdp", "world_size": 2}])
def test_hf_llama_meta_equals_real(options):
    # The model computes its loss from labels; transformers' packed-sequence check reads the
    # position ids (.item() on an index tensor), which keep their values on meta.
    model, ids = tiny_llama(), torch.randint(0, 64, (2, 16))
    run = dict(labels=ids, use_cache=False, attention="cpu", **options)
    meta = estimate_training_memory(model, ids, **run)
    real = estimate_training_memory(model, ids, meta=False, **run)
    assert meta.peak_bytes == real.peak_bytes
    assert meta.timeline == real.timeline
    assert meta.phases == real.phases
    assert meta.activations_by_module == real.activations_by_module
    if "sharding" not in options:
        assert meta.params_bytes == meta.grads_bytes == 78464
        assert meta.optimizer_bytes == 2 * 78464
    else:  # units: model.layers.0 / .1; every weight has an even dim 0 -> exactly half per rank
        assert meta.params_bytes == 78464 // 2


def test_hf_llama_built_on_meta_runs():
    config = tiny_llama().config
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    ids = torch.zeros(1, 16, dtype=torch.long, device="meta")
    result = estimate_training_memory(model, ids, labels=ids, use_cache=False, autocast="bf16")
    assert result.params_bytes == 78464 and result.peak_phase in ("forward", "loss", "backward", "optimizer")


def tiny_gpt2():
    """GPT-2 with attention dropout 0.1 (its default): vocab 64, 32 wide, 2 layers, 4 heads, sdpa attention."""
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=64, n_positions=32,
                                     bos_token_id=0, eos_token_id=0, attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def tiny_bert():
    """BERT for masked LM with attention dropout 0.1 (its default): vocab 64, 32 wide, 2 layers, 4 heads."""
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64,
                                     vocab_size=64, max_position_embeddings=32, attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(config)


@pytest.mark.slow  # (about 5 s for GPT-2 on the shared 2-core machine)
@pytest.mark.parametrize("build, wrapped", [
    # GPT-2's NewGELU multiplies by three Python floats (0.5, sqrt(2/pi), 0.044715); torch wraps each
    # in a float64 CPU scalar before dispatch and autograd saves it: 3 * 8 B per layer, 2 layers = 48 B
    # of host scalars the dispatcher never sees, alive at the peak (in backward).
    (tiny_gpt2, 2 * 3 * 8),
    (tiny_bert, 0),  # BERT's exact GELU takes no Python number
])
def test_cpu_attention_with_dropout_matches_the_allocator(build, wrapped):
    from tests.torch.allocator_steps import allocator_step

    # In training, attention dropout 0.1 rules out the CPU flash kernel: torch runs the math path.
    ids = torch.randint(0, 64, (2, 16))
    meta = estimate_training_memory(build(), ids, labels=ids, attention="cpu")
    real = estimate_training_memory(build(), ids, labels=ids, attention="cpu", meta=False)  # (raised before)
    assert meta.peak_bytes == real.peak_bytes and meta.phases == real.phases
    allocator = allocator_step(build(), (ids,), optimizer=lambda p: torch.optim.AdamW(p, foreach=True), labels=ids)
    assert allocator.dispatcher_peak_bytes == meta.peak_bytes + meta.optimizer_host_bytes + wrapped
