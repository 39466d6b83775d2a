"""estimate_training_memory: hand-derived model states, and meta == real to the byte."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch import estimate_training_memory
from tests.torch.training_models import LlamaDecoder, cnn, lm_loss, mlp

MLP_PARAM_BYTES = 212 * 4  # training_models.mlp: 212 fp32 parameters
CNN_PARAM_BYTES = 914 * 4  # training_models.cnn: 914 fp32 parameters
DECODER_PARAM_BYTES = 21664 * 4  # training_models.LlamaDecoder: 21664 fp32 parameters


def both(model, *inputs, **kwargs):
    """The same step measured on meta and on real CPU tensors."""
    return (estimate_training_memory(model, *inputs, **kwargs),
            estimate_training_memory(model, *inputs, meta=False, **kwargs))


def assert_same(meta, real):
    assert meta.peak_bytes == real.peak_bytes
    assert (meta.peak_phase, meta.peak_module, meta.peak_op) == (real.peak_phase, real.peak_module, real.peak_op)
    assert meta.phases == real.phases
    assert meta.timeline == real.timeline
    assert meta.activations_by_module == real.activations_by_module
    for name in ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "input_bytes"):
        assert getattr(meta, name) == getattr(real, name), name


@pytest.mark.parametrize("optimizer, states, host", [
    ("adamw", 2 * MLP_PARAM_BYTES, 4 * 4),  # exp_avg + exp_avg_sq; 4 fp32 `step` scalars on the host
    ("adam", 2 * MLP_PARAM_BYTES, 4 * 4),
    (torch.optim.AdamW, 2 * MLP_PARAM_BYTES, 4 * 4),
    ("sgd", MLP_PARAM_BYTES, 0),  # one momentum buffer per parameter, no step counter
    (lambda params: torch.optim.SGD(params, lr=0.1), 0, 0),  # plain SGD keeps no state
])
@pytest.mark.parametrize("steady_state", [True, False])
def test_mlp_model_states_by_hand_and_meta_equals_real(optimizer, states, host, steady_state):
    meta, real = both(mlp(), torch.randn(2, 8), optimizer=optimizer, steady_state=steady_state)
    assert meta.params_bytes == MLP_PARAM_BYTES == 848
    assert meta.grads_bytes == MLP_PARAM_BYTES
    assert meta.optimizer_bytes == states
    assert meta.optimizer_host_bytes == host
    assert meta.input_bytes == 2 * 8 * 4
    assert_same(meta, real)


def test_mlp_activations_by_hand():
    # Sequential(Linear(8,16), ReLU, Linear(16,4)), batch 2, fp32, loss = out.sum():
    # saved for backward at the end of forward: h1 = linear1(x) is freed (ReLU saves its output),
    # relu output 2*16*4 = 128 (saved by ReLU and linear2), output 2*4*4 = 32 -> 160 bytes.
    meta = estimate_training_memory(mlp(), torch.randn(2, 8))
    assert meta.activations_bytes == 160
    assert meta.activations_by_module == {"1": 128, "2": 32}
    # steady state: forward starts with params 848 + input 64 + AdamW states 1696.
    assert meta.phases[0].start_bytes == 848 + 64 + 1696


def test_adamw_foreach_peak_by_hand():
    # The peak is in AdamW's foreach step: params 848 + input 64 + grads 848 + states 1696, plus
    # _foreach_sqrt(exp_avg_sq) for all parameters at once (848): 4304.
    meta, real = both(mlp(), torch.randn(2, 8))
    assert meta.peak_bytes == 848 + 64 + 848 + 1696 + 848 == 4304
    assert meta.peak_phase == "optimizer" and meta.peak_op == "aten._foreach_sqrt.default"
    assert_same(meta, real)


def test_cnn_with_batchnorm_meta_equals_real():
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    meta, real = both(cnn(), x, loss_fn=nn.functional.cross_entropy, target=y)
    assert meta.params_bytes == meta.grads_bytes == CNN_PARAM_BYTES == 3656
    assert meta.optimizer_bytes == 2 * CNN_PARAM_BYTES
    assert meta.buffers_bytes == 72  # running mean + var 2*8*4, num_batches_tracked 8
    assert meta.input_bytes == 4 * 3 * 16 * 16 * 4 + 4 * 8  # images + int64 labels
    # conv1 output 4*8*16*16*4 = 32768 saved (by BN), BN output saved by ReLU... as measured by hand:
    assert meta.activations_by_module["0"] == 32768
    assert_same(meta, real)


@pytest.mark.parametrize("attention", ["cpu", "math"])
@pytest.mark.parametrize("options", [{}, {"autocast": "bf16"}, {"activation_checkpointing": True},
                                     {"autocast": torch.bfloat16, "activation_checkpointing": True},
                                     {"optimizer": "sgd"}])
def test_llama_decoder_meta_equals_real(attention, options):
    ids = torch.randint(0, 64, (2, 16))
    meta, real = both(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention=attention, **options)
    assert meta.params_bytes == meta.grads_bytes == DECODER_PARAM_BYTES == 86656
    assert_same(meta, real)


def test_checkpointing_keeps_only_block_inputs():
    ids = torch.randint(0, 64, (2, 16))
    plain = estimate_training_memory(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention="cpu")
    ckpt = estimate_training_memory(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention="cpu",
                                    activation_checkpointing=True)
    assert ckpt.checkpointed == ("blocks.0", "blocks.1")
    # Nothing inside a checkpointed block is kept: only each block's output (2*16*32*4 = 4096 B,
    # allocated by the block itself) is, and no module under a block holds anything.
    assert ckpt.activations_by_module["blocks.0"] == ckpt.activations_by_module["blocks.1"] == 4096
    assert not any(name.startswith(("blocks.0.", "blocks.1.")) for name in ckpt.activations_by_module)
    assert ckpt.activations_bytes < plain.activations_bytes
    by_type = estimate_training_memory(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention="cpu",
                                       activation_checkpointing=type(LlamaDecoder().blocks[0]))
    assert by_type.checkpointed == ckpt.checkpointed and by_type.peak_bytes == ckpt.peak_bytes


def test_cuda_attention_kernel_saves_no_attention_matrix():
    # b=2, 4 heads, t=16: the math path saves the 2*4*16*16 fp32 attention weights (2048 B) per block;
    # flash attention saves output + log-sum-exp only.
    ids = torch.randint(0, 64, (2, 16))
    flash = estimate_training_memory(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention="cuda")
    math = estimate_training_memory(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention="math")
    assert math.activations_bytes > flash.activations_bytes


def test_model_left_as_found():
    model = cnn().eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model[0].weight.grad = torch.ones_like(model[0].weight)
    model[3].weight.requires_grad_(False)
    for meta in (True, False):
        estimate_training_memory(model, torch.randn(2, 3, 8, 8), meta=meta, activation_checkpointing=[
            "1"], autocast="bf16")
    assert not model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(model[0].weight.grad, torch.ones_like(model[0].weight))
    assert model[3].weight.grad is None and not model[3].weight.requires_grad
    assert "forward" not in model[1].__dict__


def test_frozen_parameters_have_no_grads_or_states():
    model = mlp()
    model[0].requires_grad_(False)  # 144 parameters frozen: 68 trainable
    meta, real = both(model, torch.randn(2, 8))
    assert meta.params_bytes == 848
    assert meta.grads_bytes == 68 * 4
    assert meta.optimizer_bytes == 2 * 68 * 4
    assert_same(meta, real)


def test_meta_model_runs_and_model_is_big():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096))
    result = estimate_training_memory(model, torch.empty(8, 4096, device="meta"))
    assert result.params_bytes == 2 * (4096 * 4096 + 4096) * 4
    assert result.optimizer_bytes == 2 * result.params_bytes


def test_errors_say_what_to_do():
    with pytest.raises(ValueError, match="optimizer='lamb' is not a known name"):
        estimate_training_memory(mlp(), torch.randn(2, 8), optimizer="lamb")
    with pytest.raises(TypeError, match="returned int"):
        estimate_training_memory(mlp(), torch.randn(2, 8), optimizer=lambda params: 3)
    with pytest.raises(ValueError, match="needs a sharding strategy"):
        estimate_training_memory(mlp(), torch.randn(2, 8), world_size=2)
    with pytest.raises(ValueError, match="sharding='zero4' is not known"):
        estimate_training_memory(mlp(), torch.randn(2, 8), sharding="zero4", world_size=2)
    with pytest.raises(ValueError, match="autocast='int8'"):
        estimate_training_memory(mlp(), torch.randn(2, 8), autocast="int8")
    with pytest.raises(ValueError, match="has none"):
        estimate_training_memory(mlp(), torch.randn(2, 8), activation_checkpointing=True)
    with pytest.raises(ValueError, match="no module named 'nope'"):
        estimate_training_memory(mlp(), torch.randn(2, 8), activation_checkpointing=["nope"])
    frozen = mlp().requires_grad_(False)
    with pytest.raises(ValueError, match="no parameter that requires grad"):
        estimate_training_memory(frozen, torch.randn(2, 8))


def _profiler_peak(run) -> int:
    """Peak of the running sum of the CPU profiler's allocation / free events during ``run()``."""
    from tests.torch.allocator_steps import allocator_peak

    return allocator_peak(run)


@pytest.mark.parametrize("case", ["mlp", "llama"])
def test_real_step_agrees_with_profiler_memory_events(case):
    # The profiler sees the allocator during the real step: the copies of the parameters and
    # everything after, not the caller's inputs (allocated before). Beyond what the tracker sees it
    # also counts the optimizer's host scalars (the 4-byte `step` counters, created by torch.tensor,
    # which allocates outside the dispatcher) and a few bytes of other host scalars: margin 64 B.
    if case == "mlp":
        model, args, kwargs = mlp(), (torch.randn(2, 8),), {}
    else:
        ids = torch.randint(0, 64, (2, 16))
        model, args, kwargs = LlamaDecoder(), (ids,), {"loss_fn": lm_loss, "target": ids, "attention": "cpu"}
    ours = estimate_training_memory(model, *args, meta=False, **kwargs)
    theirs = _profiler_peak(lambda: estimate_training_memory(model, *args, meta=False, **kwargs))
    seen = ours.peak_bytes - ours.input_bytes
    # The profiler also sees the snapshot that leaves the model as found, taken before the step and
    # live through it: the random generator state, a copy of every buffer and of every small parameter
    # (state.SMALL_PARAMETER: put back if the forward writes it in place).
    from deeplite_like.backends.torch.state import SMALL_PARAMETER

    snapshot = torch.get_rng_state().numel() + sum(b.numel() * b.element_size() for b in model.buffers())
    snapshot += sum(p.numel() * p.element_size() for p in model.parameters() if p.numel() <= SMALL_PARAMETER)
    assert seen + ours.optimizer_host_bytes <= theirs <= seen + ours.optimizer_host_bytes + snapshot + 64


def test_real_cnn_step_within_conv_scratch_of_profiler():
    # CPU convolutions allocate scratch inside their kernels (im2col buffers), invisible at the
    # dispatcher (forward and backward): the profiler reads higher, by less than three times the
    # largest activation (conv1's output 4*8*16*16*4 = 32768 B; measured here: 82176 B higher).
    model, x, y = cnn(), torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    kwargs = {"loss_fn": nn.functional.cross_entropy, "target": y}
    ours = estimate_training_memory(model, x, meta=False, **kwargs)
    theirs = _profiler_peak(lambda: estimate_training_memory(model, x, meta=False, **kwargs))
    seen = ours.peak_bytes - ours.input_bytes
    assert seen < theirs <= seen + 3 * 32768


@pytest.mark.parametrize("optimizer, states", [
    # Adafactor keeps factored second moments of a matrix (a row and a column vector) and the full
    # vector of a 1-d parameter: [16,8] -> 16 + 8, bias [16] -> 16, [4,16] -> 4 + 16, bias [4] -> 4:
    # 64 fp32 = 256 B. Its update reads the parameter's RMS (.item()): on meta it reads 1.
    ("adafactor", 64 * 4),
    ("adagrad", MLP_PARAM_BYTES),  # one sum of squares per parameter
    ("rmsprop", MLP_PARAM_BYTES),  # one square average per parameter
])
def test_more_optimizers_meta_equals_real(optimizer, states):
    meta, real = both(mlp(), torch.randn(2, 8), optimizer=optimizer)
    assert meta.optimizer_bytes == states
    assert meta.optimizer_host_bytes == 4 * 4  # a step counter per parameter tensor
    assert_same(meta, real)


def test_pure_bf16_training_halves_model_states():
    # dtype=bfloat16: parameters, gradients, AdamW states and inputs in bf16: 212 * 2 = 424 B each.
    meta, real = both(mlp(), torch.randn(2, 8), dtype=torch.bfloat16)
    assert meta.params_bytes == meta.grads_bytes == 424
    assert meta.optimizer_bytes == 2 * 424
    assert meta.input_bytes == 2 * 8 * 2
    assert_same(meta, real)


def test_autocast_policy_casts_like_cuda_autocast():
    from deeplite_like.backends.torch.training.step import AutocastPolicy

    w = torch.randn(4, 3, device="meta", requires_grad=True)
    x = torch.randn(2, 3, device="meta")
    with AutocastPolicy(torch.bfloat16) as policy:
        y = torch.nn.functional.linear(x, w)  # lower-precision list
        assert y.dtype == torch.bfloat16
        assert y.softmax(-1).dtype == torch.float32  # float32 list, bf16 input cast up
        assert (y + 1).dtype == torch.bfloat16  # in no list: runs in its input's dtype
        assert torch.cat([y, y.float()]).dtype == torch.float32  # widest input type
        torch.nn.functional.linear(x, w)
        assert len(policy._cache) == 1  # the weight was cast once for the region
    assert not policy._cache  # and the cache dropped on exit
    assert torch.nn.functional.linear(x, w).dtype == torch.float32


def test_tied_weights_counted_once_and_stepped_once():
    # The head shares the embedding's 64*32 weight: 21664 - 2048 = 19616 fp32 parameters = 78464 B,
    # one gradient and one pair of AdamW states for the shared weight.
    model = LlamaDecoder()
    model.head.weight = model.embed.weight
    ids = torch.randint(0, 64, (2, 16))
    meta, real = both(model, ids, loss_fn=lm_loss, target=ids, attention="cpu")
    assert meta.params_bytes == meta.grads_bytes == 78464
    assert meta.optimizer_bytes == 2 * 78464
    assert_same(meta, real)
    assert model.head.weight is model.embed.weight


def test_allowance_rounding_by_hand():
    # At the MLP's peak (AdamW's foreach step) the live blocks are the parameters [512, 64, 256, 16] B,
    # the input 64 B, and four more sets of the parameters' shapes (grads, exp_avg, exp_avg_sq,
    # the square roots). Rounded up to 512 B: per set 0 + 448 + 256 + 496 = 1200, the input 448:
    # 5 * 1200 + 448 = 6448 B.
    result = estimate_training_memory(mlp(), torch.randn(2, 8))
    assert result.allowance.rounding_bytes == 6448
    assert result.allowance.total_bytes == 6448 + 32 * 2**20 + 512 * 2**20
    assert result.fits(result.peak_bytes + result.allowance.total_bytes)
    assert not result.fits(result.peak_bytes + result.allowance.total_bytes - 1)
