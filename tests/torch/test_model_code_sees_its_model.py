"""Profiling never changes what the model's own code sees (issue 22, section 1).

Counting follows module calls through torch's global module hooks, so classes and instances are
left exactly as they are: ``type(self).forward`` is the class's own function, its signature and
``functools.wraps`` metadata are the user's, and ``type(self).__dict__`` holds what it held.
transformers' ``GradientCheckpointingLayer`` only checkpoints when ``type(self).forward`` is its
own wrapper: with it on, counting, profiling a real step and estimating memory must see the
recomputation that really runs.

The tiny Llama below: hidden 32, intermediate 64, 4 heads of 8 (2 key/value heads), vocabulary
100, 2 layers, 8 tokens, eager attention. Per layer (MACs = tokens x in x out for a projection):
  q_proj 8*32*32 = 8192, k_proj and v_proj 8*32*16 = 4096 each, o_proj 8192,
  Q.K^T 4 heads * 8 * 8 * 8 = 2048, P.V 2048                      -> self_attn 28,672
  gate_proj, up_proj, down_proj 8*32*64 = 16,384 each             -> mlp 49,152
  layer 77,824; two layers 155,648; lm_head 8*32*100 = 25,600      -> forward 181,248
Backward of each contraction computes the gradients of both operands: 2 x forward = 362,496.
Non-reentrant checkpointing (transformers' default) re-runs each layer's forward in backward
and stops once the tensors backward needs are recomputed: down_proj's output is needed by no
backward, so it is not recomputed: 77,824 - 16,384 = 61,440 per layer, 122,880 for both.
"""
from __future__ import annotations

import functools
import inspect
import logging
import warnings

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential
from torch.utils.flop_counter import FlopCounterMode

from deeplite_like.backends.torch import count_ops
from deeplite_like.backends.torch.training.estimate import estimate_training_memory
from deeplite_like.profiling import FlopsProfiler
from tests.torch.allocator_steps import allocator_peak

transformers = pytest.importorskip("transformers")

FORWARD = 181_248
LAYER, DOWN_PROJ, ATTN, MLP = 77_824, 16_384, 28_672, 49_152
RECOMPUTED = 2 * (LAYER - DOWN_PROJ)  # 122,880


def tiny_llama(checkpointing: bool) -> nn.Module:
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                                      max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).train()
    if checkpointing:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the deprecated alias is what users call today)
            model.gradient_checkpointing_enable()
    return model


IDS = torch.randint(0, 100, (1, 8), generator=torch.Generator().manual_seed(1))


def logits_sum(output):
    return output.logits.sum()


@pytest.fixture(autouse=True)
def _quiet_transformers():
    logging.disable(logging.WARNING)  # "use_cache=True is incompatible with gradient checkpointing"
    yield
    logging.disable(logging.NOTSET)


def class_forwards(model: nn.Module) -> dict[type, object]:
    return {type(m): type(m).__dict__.get("forward") for m in model.modules()}


@pytest.mark.parametrize("meta", [False, True])
def test_transformers_checkpointing_recompute_is_counted(meta):
    plain = count_ops(tiny_llama(False), IDS, backward=True, meta=meta, loss_fn=logits_sum)
    assert plain.phases["forward"].macs == FORWARD
    assert plain.phases["backward"].macs == 2 * FORWARD
    model = tiny_llama(True)
    forwards = class_forwards(model)
    counted = count_ops(model, IDS, backward=True, meta=meta, loss_fn=logits_sum)
    assert counted.phases["forward"].macs == FORWARD
    assert counted.phases["backward"].macs == 2 * FORWARD + RECOMPUTED  # 485,376
    # per module: layer 0 = its forward, its gradients, and its recomputation
    layer = counted.by_module["model.layers.0"]
    assert layer.macs == 3 * LAYER + (LAYER - DOWN_PROJ)  # 294,912
    assert counted.by_module["model.layers.0.self_attn"].macs == 4 * ATTN  # attention fully recomputed
    assert counted.by_module["model.layers.0.mlp"].macs == 3 * MLP + 2 * 16_384  # gate and up recomputed
    assert class_forwards(model) == forwards


def test_checkpointed_count_agrees_with_torch_flop_counter():
    # FlopCounterMode counts 2 FLOPs per MAC of the same contractions (mm, bmm): the real step's
    # total, recomputation included, is 2 x 666,624.
    model = tiny_llama(True)
    counted = count_ops(model, IDS, backward=True, loss_fn=logits_sum)
    with FlopCounterMode(display=False) as peer:
        logits_sum(model(IDS)).backward()
    assert counted.macs == FORWARD + 2 * FORWARD + RECOMPUTED == 666_624
    assert peer.get_total_flops() == 2 * counted.macs


def _checkpoint_calls(model: nn.Module) -> list[int]:
    """Count the calls of each layer's checkpoint function (transformers stores it on the layer)."""
    calls = [0]
    for layer in model.model.layers:
        original = layer._gradient_checkpointing_func

        def counted(*args, _original=original, **kwargs):
            calls[0] += 1
            return _original(*args, **kwargs)

        layer._gradient_checkpointing_func = counted
    return calls


def test_flops_profiler_around_a_real_step_keeps_checkpointing():
    model = tiny_llama(True)
    calls = _checkpoint_calls(model)
    optimizer = torch.optim.AdamW(model.parameters())

    def step():
        logits_sum(model(IDS)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    assert calls[0] == 2  # unprofiled: both layers checkpointed
    prof = FlopsProfiler(model)
    prof.start_profile()
    step()
    prof.stop_profile()
    macs = prof.get_total_macs()
    prof.end_profile()
    assert calls[0] == 4  # profiled: both layers checkpointed again
    # the window holds the forward, the backward and its recomputation (module docstring)
    assert macs == FORWARD + 2 * FORWARD + RECOMPUTED


@pytest.mark.parametrize("checkpointing", [False, True])
def test_training_memory_follows_transformers_checkpointing(checkpointing):
    # A real steady-state SGD (momentum 0.9) step, read from the allocator: the parameters, buffers,
    # momentum buffers and inputs exist before it; the allocator sees everything after. Our peak is
    # the whole: the real step's peak plus what existed before it.
    ids = torch.randint(0, 100, (4, 48), generator=torch.Generator().manual_seed(2))
    model = tiny_llama(checkpointing)
    ours = estimate_training_memory(model, ids, optimizer="sgd", loss_fn=logits_sum)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def step():
        loss = logits_sum(model(ids))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # the first step makes the momentum buffers
    real = allocator_peak(step)
    before = ours.params_bytes + ours.buffers_bytes + ours.optimizer_bytes + ours.input_bytes
    # Beyond what the dispatcher sees, the allocator also holds a few bytes of host scalars (<= 64 B)
    # and, under checkpointing, the CPU random-generator state torch.utils.checkpoint stashes per
    # checkpointed call (preserve_rng_state: a 5,056 B tensor made outside the dispatcher, which on
    # a GPU lives in host memory): at most the two layers' states.
    rng_states = 2 * torch.get_rng_state().numel() if checkpointing else 0
    assert before + real - rng_states - 64 <= ours.peak_bytes <= before + real
    unchecked = estimate_training_memory(tiny_llama(False), ids, optimizer="sgd", loss_fn=logits_sum)
    if checkpointing:  # only the layers' inputs are kept through the forward
        assert ours.activations_bytes < unchecked.activations_bytes
    else:
        assert ours == unchecked


# -- model code that looks at itself ---------------------------------------------------------
class SelfAware(nn.Module):
    """Branches on what its own class looks like, as transformers' checkpointing layer does."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        assert type(self).forward is SelfAware.__dict__["forward"]
        assert "forward" not in self.__dict__
        assert list(inspect.signature(type(self).forward).parameters) == ["self", "x"]
        assert type(self).forward.__code__ is SelfAware._code
        assert type(self.fc).forward is nn.Linear.__dict__["forward"]
        assert not hasattr(type(self).forward, "__wrapped__")
        return self.fc(x)


SelfAware._code = SelfAware.forward.__code__


def _decorated(f):
    @functools.wraps(f)
    def wrapper(self, x):
        return f(self, x) * 2
    return wrapper


class Wrapped(nn.Module):
    """A forward decorated with functools.wraps: its metadata must be the user's own."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @_decorated
    def forward(self, x):
        assert type(self).forward.__wrapped__.__name__ == "forward"
        assert inspect.signature(type(self).forward) == inspect.signature(Wrapped._forward_signature)
        return self.fc(x)


Wrapped._forward_signature = Wrapped.forward


@pytest.mark.parametrize("build", [SelfAware, Wrapped])
@pytest.mark.parametrize("how", ["count", "count_backward", "meta", "flops_profiler", "memory"])
def test_a_module_that_inspects_its_class_sees_it_unchanged(build, how):
    model = build()
    x = torch.randn(2, 4)
    dict_before = dict(type(model).__dict__)
    if how == "count":
        counted = count_ops(model, x)
        assert counted.macs == 2 * 4 * 4  # one Linear(4, 4) on 2 rows
    elif how == "count_backward":
        counted = count_ops(model, x, backward=True)
        # forward 32; backward: grad of the weight 32 (the input needs none) -> 64
        assert counted.macs == 64
    elif how == "meta":
        assert count_ops(model, x, meta=True).macs == 32
    elif how == "flops_profiler":
        prof = FlopsProfiler(model)
        prof.start_profile()
        model(x)
        assert prof.get_total_macs() == 32
        prof.end_profile()
    else:
        estimate_training_memory(model, x, optimizer="sgd")
    assert dict(type(model).__dict__) == dict_before


def test_timm_style_checkpoint_sequential_counts_the_recomputation():
    # timm's set_grad_checkpointing() runs its blocks through checkpoint_seq; torch's own
    # checkpoint_sequential is the same pattern. 3 blocks of Linear(8, 8) + ReLU on 4 rows, 2
    # segments: segment size 3 // 2 = 1, so block 0 runs under checkpoint and blocks 1-2 plainly.
    # Forward 3 * 4*8*8 = 768 MACs; backward 2 x 768 (the input requires grad); block 0 is re-run
    # in backward, through its ReLU, whose backward needs its output: 256 more.
    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(3)])
            self.grad_checkpointing = True

        def forward(self, x):
            if self.grad_checkpointing:
                return checkpoint_sequential(self.blocks, 2, x, use_reentrant=False)
            return self.blocks(x)

    model = Blocks()
    x = torch.randn(4, 8, requires_grad=True)
    counted = count_ops(model, x, backward=True)
    assert counted.phases["forward"].macs == 768
    assert counted.phases["backward"].macs == 2 * 768 + 256
    with FlopCounterMode(display=False) as peer:
        model(x).sum().backward()
    assert peer.get_total_flops() == 2 * counted.macs


# -- nothing of ours stays in the process ----------------------------------------------------------
def _global_hook_state():
    module_globals = torch.nn.modules.module
    return {name: dict(getattr(module_globals, name)) for name in (
        "_global_forward_hooks", "_global_forward_pre_hooks", "_global_forward_hooks_with_kwargs",
        "_global_forward_hooks_always_called", "_global_backward_hooks", "_global_backward_pre_hooks")}


@pytest.mark.parametrize("how", ["count", "count_compiled", "layer_timing", "model_profile", "flops_profiler"])
def test_global_hook_tables_are_left_as_found(how):
    # torch's handle for a global forward hook registered with_kwargs=True forgets its with_kwargs
    # entry on remove(): one left behind makes every compiled module warn about global hooks
    from deeplite_like.backends.torch.latency import module_forward_times
    from deeplite_like.profiling import get_model_profile

    model, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU()), torch.randn(2, 4)
    before = _global_hook_state()
    if how == "count":
        count_ops(model, x)
    elif how == "count_compiled":
        count_ops(torch.compile(model, backend="eager"), x)
    elif how == "layer_timing":
        module_forward_times(model, (x,), repeats=1, warmup=0)
    elif how == "model_profile":
        get_model_profile(model, args=[x], print_profile=False)
    else:
        prof = FlopsProfiler(model)
        prof.start_profile()
        model(x)
        prof.stop_profile()
        prof.end_profile()
    assert _global_hook_state() == before


def _tiny(family: str):
    """A tiny transformers model of ``family`` in train mode, and its input."""
    torch.manual_seed(0)
    if family == "qwen3":
        config = transformers.Qwen3Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=8, vocab_size=100,
                                          max_position_embeddings=64, attn_implementation="eager")
        return transformers.Qwen3ForCausalLM(config).train(), torch.randint(0, 100, (2, 8))
    if family == "vit":
        config = transformers.ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, image_size=16, patch_size=4, num_channels=3,
                                        attn_implementation="eager")
        return transformers.ViTModel(config, add_pooling_layer=False).train(), torch.randn(2, 3, 16, 16)
    return tiny_llama(False), torch.randint(0, 100, (2, 8))


def _first_output_sum(output):
    return output[0].float().sum()


@pytest.mark.parametrize("family", ["llama", "qwen3", "vit"])
def test_real_models_with_checkpointing_count_what_runs(family):
    # No hand derivation here: the real step is the reference. torch's FlopCounterMode counts the
    # same contractions (2 FLOPs per MAC) over the same real step, recomputation included; the
    # meta count equals the real one; checkpointing adds the recomputed forwards to backward only.
    plain_model, x = _tiny(family)
    plain = count_ops(plain_model, x, backward=True, loss_fn=_first_output_sum)
    model, _ = _tiny(family)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.gradient_checkpointing_enable()
    counted = count_ops(model, x, backward=True, loss_fn=_first_output_sum)
    assert counted.phases["forward"].macs == plain.phases["forward"].macs
    assert counted.phases["backward"].macs > plain.phases["backward"].macs
    assert count_ops(model, x, backward=True, meta=True, loss_fn=_first_output_sum).macs == counted.macs
    with FlopCounterMode(display=False) as peer:
        _first_output_sum(model(x)).backward()
    assert peer.get_total_flops() == 2 * counted.macs
    assert counted.untracked == {}


def test_counting_a_compiled_module_does_not_warn_about_our_hooks():
    # torch.compile'd modules warn about global module hooks at every call: while we count, the hooks
    # are ours, so the user is not told about them (and nothing is left to warn about after)
    model = torch.compile(nn.Sequential(nn.Linear(4, 4)), backend="eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        counted = count_ops(model, torch.randn(2, 4))
        model(torch.randn(2, 4))  # and after the count
    assert counted.macs == 2 * 4 * 4  # 32
    assert not [w for w in caught if "global hooks" in str(w.message)]


@pytest.mark.parametrize("checkpointing", [False, True])
def test_peak_activation_memory_follows_transformers_checkpointing(checkpointing):
    # A training forward (grad on) of the tiny Llama on 4 x 48 tokens, against the allocator during the
    # same real forward: our peak less the inputs (allocated before) is the allocator's, beyond a few
    # host bytes (<= 64) and, under checkpointing, the CPU RNG state each checkpointed layer stashes
    # (5,056 B, made outside the dispatcher). Checkpointing keeps only the layers' inputs: a lower peak.
    from deeplite_like.backends.torch.memory import peak_activation_memory

    ids = torch.randint(0, 100, (4, 48), generator=torch.Generator().manual_seed(2))
    model = tiny_llama(checkpointing)
    ours = peak_activation_memory(model, (ids,), grad=True, train=True)

    def forward():
        with torch.enable_grad():
            output = model(ids)
            del output

    forward()  # (warm)
    real = allocator_peak(forward)
    rng_states = 2 * torch.get_rng_state().numel() if checkpointing else 0
    assert real - rng_states - 64 <= ours.peak_bytes - ours.input_bytes <= real
    unchecked = peak_activation_memory(tiny_llama(False), (ids,), grad=True, train=True)
    if checkpointing:
        assert ours.peak_bytes < unchecked.peak_bytes  # 508,800 B against 1,387,776 B here
