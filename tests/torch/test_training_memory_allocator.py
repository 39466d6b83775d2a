"""estimate_training_memory against a real CPU step read from the allocator (``allocator_steps.py``).

The reference is independent of the package: a training loop as users write it, on a copy of the
model, under ``torch.profiler(profile_memory=True)``. It is compared at the dispatcher's view
(``dispatcher_peak_bytes``: the allocator's running total as each ATen operator returns), to the
byte. What the dispatcher cannot see, and the estimate leaves out on purpose, is named per test:
the optimizer's host ``step`` counters (``optimizer_host_bytes``, in the real step's base), and
the float64 scalars torch wraps Python numbers in before dispatch.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from deeplite_like.backends.torch import estimate_training_memory
from deeplite_like.backends.torch.kernels import lstm_mkldnn, rnn_cpu
from tests.torch.allocator_steps import allocator_step
from tests.torch.training_models import LlamaDecoder, lm_loss, mlp

LINEAR_BYTES = (1000 * 1000 + 1000) * 4  # Linear(1000, 1000): weight + bias, fp32 = 4,004,000 B
INPUT_BYTES = 8 * 1000 * 4  # a batch of 8 x 1000 fp32 = 32,000 B
DECODER_BYTES = 21664 * 4  # training_models.LlamaDecoder: 86,656 B of fp32 parameters

_CLASSES = {"adamw": torch.optim.AdamW, "adagrad": torch.optim.Adagrad, "rmsprop": torch.optim.RMSprop,
            "sgd": lambda params, **kw: torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kw)}


def torch_optimizer(name: str, foreach: bool = True, fused: bool = False):
    """The optimizer estimate_training_memory builds for ``name``, built here by hand for the real loop."""
    extra = {"fused": True} if fused else {}
    return lambda params: _CLASSES[name](params, foreach=foreach and not fused, **extra)


def linear():
    torch.manual_seed(0)
    return nn.Linear(1000, 1000)


def test_adagrad_state_made_in_init_is_held_from_the_start():
    # Adagrad makes its sums in __init__ (before any step): one per parameter, 4,004,000 B.
    x = torch.randn(8, 1000)
    for steady_state in (True, False):
        result = estimate_training_memory(linear(), x, optimizer="adagrad", steady_state=steady_state)
        assert result.optimizer_bytes == LINEAR_BYTES
        # forward starts with parameters + input + sums: 4,004,000 + 32,000 + 4,004,000 = 8,040,000
        assert result.phases[0].start_bytes == 2 * LINEAR_BYTES + INPUT_BYTES == 8_040_000
        # peak in the foreach update: that + gradients + two temporaries (the sums' square roots and
        # the scaled gradients): 8,040,000 + 3 * 4,004,000 = 20,052,000
        assert result.peak_bytes == 8_040_000 + 3 * LINEAR_BYTES == 20_052_000
        real = allocator_step(linear(), (x,), optimizer=torch_optimizer("adagrad"), steady_state=steady_state)
        # the real base holds Adagrad's two host `step` counters (torch.tensor, 4 B each) as well
        assert result.optimizer_host_bytes == 2 * 4
        assert real.dispatcher_peak_bytes == result.peak_bytes + result.optimizer_host_bytes


def test_adagrad_mlp_forward_start_includes_sums():
    # training_models.mlp: params 848 B, input 2*8*4 = 64 B, Adagrad sums 848 B
    result = estimate_training_memory(mlp(), torch.randn(2, 8), optimizer="adagrad")
    assert result.phases[0].start_bytes == 848 + 64 + 848


def test_rmsprop_host_step_counters_not_in_device_peak():
    # RMSprop makes its `step` counters with torch.zeros(()) (the dispatcher sees them, unlike
    # torch.tensor): host scalars, in optimizer_host_bytes (2 tensors * 4 B), not in the device figures.
    x = torch.randn(8, 1000)
    result = estimate_training_memory(linear(), x, optimizer="rmsprop")
    assert result.optimizer_host_bytes == 8
    assert result.optimizer_bytes == LINEAR_BYTES  # square_avg
    assert result.phases[0].start_bytes == 2 * LINEAR_BYTES + INPUT_BYTES == 8_040_000  # not 8,040,008
    real = allocator_step(linear(), (x,), optimizer=torch_optimizer("rmsprop"))
    assert real.dispatcher_peak_bytes == result.peak_bytes + 8


# The per-tensor loops of AdamW and Adagrad peak at a division by a Python float (Adam's bias
# correction, Adagrad's clr): torch wraps the float in a float64 CPU scalar before dispatch, alive at
# the peak and unseen by the dispatcher: 8 B of host memory. Everywhere else nothing is unseen.
WRAPPED = 8
LOOPS = [
    # (optimizer, foreach, fused, set_to_none, accumulation_steps, unseen bytes at the peak)
    ("adamw", True, False, True, 1, 0), ("adamw", False, False, True, 1, WRAPPED),
    ("adagrad", True, False, True, 1, 0), ("adagrad", False, False, True, 1, WRAPPED),
    ("rmsprop", True, False, True, 1, 0), ("rmsprop", False, False, True, 1, 0),
    ("sgd", True, False, True, 1, 0), ("sgd", False, False, True, 1, 0),
    ("adamw", True, False, False, 1, 0), ("sgd", True, False, False, 1, 0),
    ("adamw", True, False, True, 3, 0), ("sgd", False, False, True, 3, 0), ("adagrad", False, False, False, 3, 0),
    ("adamw", False, True, True, 1, 0), ("sgd", False, True, False, 3, 0), ("adagrad", False, True, True, 1, 0),
]


@pytest.mark.parametrize("name, foreach, fused, set_to_none, k, unseen", LOOPS)
def test_training_loop_options_match_the_allocator(name, foreach, fused, set_to_none, k, unseen):
    x = torch.randn(8, 1000)
    result = estimate_training_memory(linear(), x, optimizer=name, foreach=foreach, fused=fused, meta=not fused,
                                      set_to_none=set_to_none, accumulation_steps=k)
    real = allocator_step(linear(), (x,), optimizer=torch_optimizer(name, foreach, fused), set_to_none=set_to_none,
                          accumulation_steps=k)
    assert result.implementation == ("fused" if fused else "foreach" if foreach else "for-loop")
    assert real.dispatcher_peak_bytes - result.peak_bytes - result.optimizer_host_bytes == unseen
    # kernel scratch (the CPU mm copying a transposed operand, 8 * 1000 * 4 = 32,000 B, in backward)
    # shows only in the allocator's full peak
    assert real.peak_bytes >= real.dispatcher_peak_bytes


@pytest.mark.parametrize("options", [
    {"optimizer": "sgd"}, {"optimizer": "sgd", "set_to_none": False}, {"optimizer": "sgd", "accumulation_steps": 3},
    {"optimizer": "adamw", "foreach": False, "set_to_none": False},
])
def test_decoder_loop_options_match_the_allocator(options):
    ids = torch.randint(0, 64, (2, 16))
    result = estimate_training_memory(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention="cpu", **options)
    real = allocator_step(LlamaDecoder(), (ids,), optimizer=torch_optimizer(options["optimizer"],
                                                                             options.get("foreach", True)),
                          loss_fn=lm_loss, target=ids, set_to_none=options.get("set_to_none", True),
                          accumulation_steps=options.get("accumulation_steps", 1))
    assert real.dispatcher_peak_bytes == result.peak_bytes + result.optimizer_host_bytes


def test_gradients_held_across_steps_add_their_bytes_at_the_backward_peak():
    # SGD on the decoder peaks at the start of backward (the logits' log_softmax gradient). With
    # zero_grad(set_to_none=False), or in the 2nd and 3rd of 3 micro-batches, the gradients (86,656 B)
    # are already held there: the peak grows by exactly their bytes.
    ids = torch.randint(0, 64, (2, 16))
    run = {"loss_fn": lm_loss, "target": ids, "attention": "cpu", "optimizer": "sgd"}
    plain = estimate_training_memory(LlamaDecoder(), ids, **run)
    kept = estimate_training_memory(LlamaDecoder(), ids, set_to_none=False, **run)
    accumulated = estimate_training_memory(LlamaDecoder(), ids, accumulation_steps=3, **run)
    assert plain.peak_op == kept.peak_op == accumulated.peak_op == "aten._log_softmax_backward_data.default"
    assert kept.peak_bytes == accumulated.peak_bytes == plain.peak_bytes + DECODER_BYTES
    assert not kept.set_to_none and accumulated.accumulation_steps == 3
    # the activations are one micro-batch's
    assert accumulated.activations_bytes == plain.activations_bytes


def test_loop_options_errors_say_what_to_do():
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match="pass meta=False"):
        estimate_training_memory(mlp(), x, fused=True)
    with pytest.raises(ValueError, match="accumulation_steps must be an int >= 1"):
        estimate_training_memory(mlp(), x, accumulation_steps=0)
    with pytest.raises(ValueError, match="has no fused implementation"):
        estimate_training_memory(mlp(), x, optimizer="rmsprop", fused=True, meta=False)
    with pytest.raises(ValueError, match="builds its own"):
        estimate_training_memory(mlp(), x, optimizer=lambda p: torch.optim.SGD(p, lr=0.1), foreach=False)


class Attention(nn.Module):
    """One self-attention with attention dropout 0.1 (as GPT-2 / BERT in training): d 32, 4 heads."""

    def __init__(self, dropout: float = 0.1) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.qkv = nn.Linear(32, 96)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 4, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)


def test_cpu_attention_with_dropout_is_the_math_fallback():
    # The CPU's flash kernel refuses dropout > 0 (check_for_dropout): torch takes the math path,
    # which materialises and saves the attention weights and the dropout mask.
    x = torch.randn(2, 16, 32)
    meta = estimate_training_memory(Attention(), x, attention="cpu")
    real = estimate_training_memory(Attention(), x, attention="cpu", meta=False)  # (raised before)
    assert meta.peak_bytes == real.peak_bytes and meta.activations_bytes == real.activations_bytes
    flash = estimate_training_memory(Attention(dropout=0.0), x, attention="cpu")  # no dropout: CPU flash
    assert meta.activations_bytes > flash.activations_bytes
    allocator = allocator_step(Attention(), (x,), optimizer=torch_optimizer("adamw"))
    assert allocator.dispatcher_peak_bytes == meta.peak_bytes + meta.optimizer_host_bytes


@pytest.mark.parametrize("options", [{"num_layers": 2, "batch_first": True}, {"num_layers": 2, "bidirectional": True},
                                     {"num_layers": 1, "bias": False}])
def test_lstm_meta_runs_the_cpu_onednn_path(options):
    # On CPU torch.lstm runs oneDNN's mkldnn_rnn_layer per layer and direction; the meta step models
    # that path (rnn="auto"), workspace included, so meta == meta=False == the allocator, to the byte.
    torch.manual_seed(0)
    model, x = nn.LSTM(8, 16, **options), torch.randn(3, 5, 8)

    def loss(out):
        return out[0].sum()
    meta = estimate_training_memory(model, x, loss_fn=loss, optimizer="sgd")
    real = estimate_training_memory(model, x, loss_fn=loss, optimizer="sgd", meta=False)
    assert meta.peak_bytes == real.peak_bytes and meta.phases == real.phases
    assert meta.activations_bytes == real.activations_bytes
    allocator = allocator_step(model, (x,), optimizer=torch_optimizer("sgd"), loss_fn=loss)
    assert allocator.dispatcher_peak_bytes == meta.peak_bytes
    generic = estimate_training_memory(model, x, loss_fn=loss, optimizer="sgd", rnn=None)  # torch's meta path
    assert generic.peak_bytes != meta.peak_bytes


def test_lstm_mkldnn_computes_what_torch_lstm_computes():
    torch.manual_seed(0)
    model, x = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True), torch.randn(3, 5, 8)
    zeros = torch.zeros(4, 3, 16)  # layers * directions, batch, hidden
    out, (h, c) = model(x)
    ours = lstm_mkldnn(x, (zeros, zeros), model._flat_weights, True, 2, 0.0, True, True, True)
    for theirs, mine in zip((out, h, c), ours):
        assert torch.allclose(theirs, mine, atol=1e-6)


def test_deepspeed_engine_and_zero3_parameters_are_refused_with_what_to_pass():
    # DeepSpeed does not install here: these stand-ins have the two traits the refusal reads - the
    # engine class (deepspeed.runtime.engine.DeepSpeedEngine, with zero_optimization_stage() and
    # dp_world_size) and ZeRO-3's per-parameter ds_status - so the check is exercised, not DeepSpeed.
    engine_class = type("DeepSpeedEngine", (nn.Module,), {"__module__": "deepspeed.runtime.engine",
                                                          "zero_optimization_stage": lambda self: 2})
    engine = engine_class()
    engine.module, engine.dp_world_size = mlp(), 8
    with pytest.raises(TypeError, match=r"engine.module.*sharding='zero2', world_size=8"):
        estimate_training_memory(engine, torch.randn(2, 8))
    model = mlp()
    model[0].weight.ds_status = "NOT_AVAILABLE"
    with pytest.raises(TypeError, match=r"parameter '0.weight' .* partitioned by DeepSpeed ZeRO-3.*sharding='zero3'"):
        estimate_training_memory(model, torch.randn(2, 8))


# The loop as users write it: where zero_grad() sits, and whether `out` / `loss` outlive the step.
LOOP_PLACES = [(opt, set_to_none, at, keep) for opt in ("sgd", "adamw") for set_to_none in (True, False)
               for at in ("start", "after_forward", "end") for keep in (False, True)
               if opt == "sgd" or (set_to_none and keep != (at == "end"))]


@pytest.mark.parametrize("name, set_to_none, at, keep", LOOP_PLACES)
def test_zero_grad_placement_and_kept_output_match_the_allocator(name, set_to_none, at, keep):
    ids = torch.randint(0, 64, (2, 16))
    result = estimate_training_memory(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention="cpu",
                                      optimizer=name, set_to_none=set_to_none, zero_grad_at=at, keep_output=keep)
    real = allocator_step(LlamaDecoder(), (ids,), optimizer=torch_optimizer(name), loss_fn=lm_loss, target=ids,
                          set_to_none=set_to_none, zero_grad_at=at, keep_output=keep)
    assert (result.zero_grad_at, result.keep_output) == (at, keep)
    assert real.dispatcher_peak_bytes == result.peak_bytes + result.optimizer_host_bytes


LOGITS = 2 * 16 * 64 * 4  # the decoder's output: batch 2, 16 tokens, vocabulary 64, fp32 = 8,192 B
LOSS = 4  # a 0-dim fp32 loss


def test_zero_grad_after_forward_holds_the_gradients_through_the_forward():
    # SGD, set_to_none=True. zero_grad() between the loss and backward: the step before's gradients
    # (86,656 B) are alive from the forward's start to the end of the loss; the peak moves from the
    # backward (log_softmax's gradient) to the loss (nll_loss), and backward starts as before.
    ids = torch.randint(0, 64, (2, 16))
    run = {"loss_fn": lm_loss, "target": ids, "attention": "cpu", "optimizer": "sgd"}
    start = estimate_training_memory(LlamaDecoder(), ids, **run)
    after = estimate_training_memory(LlamaDecoder(), ids, zero_grad_at="after_forward", **run)
    end = estimate_training_memory(LlamaDecoder(), ids, zero_grad_at="end", **run)
    after_phases = {p.name: p for p in after.phases}
    start_phases = {p.name: p for p in start.phases}
    for name in ("forward", "loss"):
        assert after_phases[name].start_bytes == start_phases[name].start_bytes + DECODER_BYTES
        assert after_phases[name].peak_bytes == start_phases[name].peak_bytes + DECODER_BYTES
    assert after_phases["backward"].start_bytes == start_phases["backward"].start_bytes
    assert start.peak_phase == "backward" and after.peak_phase == "loss"
    assert after.peak_bytes == start_phases["loss"].peak_bytes + DECODER_BYTES
    # zero_grad at the end of the step before is zero_grad at the start of this one: same bytes
    assert end.peak_bytes == start.peak_bytes and end.phases[:3] == start.phases[:3]


def test_kept_output_and_loss_add_their_bytes():
    # keep_output: the step before's logits and loss (8,192 + 4 B) are alive through this forward,
    # until `out = model(x)` / `loss = ...` rebind them; this step's logits stay through backward
    # (log_softmax saves its output, not the logits: without the variable they are freed in the loss).
    ids = torch.randint(0, 64, (2, 16))
    run = {"loss_fn": lm_loss, "target": ids, "attention": "cpu", "optimizer": "sgd"}
    plain = estimate_training_memory(LlamaDecoder(), ids, **run)
    kept = estimate_training_memory(LlamaDecoder(), ids, keep_output=True, **run)
    assert kept.phases[0].start_bytes == plain.phases[0].start_bytes + LOGITS + LOSS
    assert kept.peak_phase == plain.peak_phase == "backward"
    assert kept.peak_bytes == plain.peak_bytes + LOGITS  # (the step before's loss is freed by then)
    assert kept.activations_bytes == plain.activations_bytes  # the step before's output is not this forward's
    real = estimate_training_memory(LlamaDecoder(), ids, keep_output=True, meta=False, **run)
    assert real.timeline == kept.timeline and real.phases == kept.phases


def test_kept_output_of_a_linear_layer():
    # Linear(1000, 1000), batch 8, SGD (momentum). The peak is in backward, at the bias's gradient:
    # params 4,004,000 + input 32,000 + momentum 4,004,000 + weight gradient 4,000,000 + bias gradient
    # 4,000 + the loss 4 + its gradient 4 (the sum's backward expands it: a view, no copy) = 12,044,008.
    # keep_output adds the output [8, 1000] fp32, 32,000 B (the step before's loss is freed by then).
    x = torch.randn(8, 1000)
    result = estimate_training_memory(linear(), x, optimizer="sgd", keep_output=True)
    plain = estimate_training_memory(linear(), x, optimizer="sgd")
    assert plain.peak_bytes == 3 * LINEAR_BYTES + INPUT_BYTES + 4 + 4 == 12_044_008
    assert result.peak_bytes == plain.peak_bytes + 32_000 == 12_076_008
    real = allocator_step(linear(), (x,), optimizer=torch_optimizer("sgd"), keep_output=True)
    assert real.dispatcher_peak_bytes == result.peak_bytes


def test_loop_place_errors_name_the_choices():
    with pytest.raises(ValueError, match="zero_grad_at='middle'.*'start', 'after_forward', 'end'"):
        estimate_training_memory(mlp(), torch.randn(2, 8), zero_grad_at="middle")
    with pytest.raises(TypeError, match="keep_output"):
        estimate_training_memory(mlp(), torch.randn(2, 8), keep_output="yes")


# GRU, plain RNN and LSTM with projections take ATen's generic path on a CPU, which projects the
# inputs of all time steps at once (FullLayer, CPU inputs only); meta takes the per-step form.
@pytest.mark.parametrize("cls, options", [
    pytest.param(nn.GRU, {"num_layers": 2, "batch_first": True}, marks=pytest.mark.slow),
    pytest.param(nn.GRU, {"num_layers": 2, "bidirectional": True, "dropout": 0.2}, marks=pytest.mark.slow),
    (nn.RNN, {"num_layers": 2, "nonlinearity": "relu", "bias": False}), (nn.RNN, {"bidirectional": True}),
    pytest.param(nn.LSTM, {"num_layers": 2, "proj_size": 4, "bidirectional": True, "batch_first": True},
                 marks=pytest.mark.slow),
])
def test_gru_rnn_and_projected_lstm_meta_runs_the_cpu_generic_path(cls, options):
    torch.manual_seed(0)
    model, x = cls(8, 16, **options), torch.randn(3, 5, 8)

    def loss(out):
        return out[0].sum()
    meta = estimate_training_memory(model, x, loss_fn=loss, optimizer="adamw")
    real = estimate_training_memory(model, x, loss_fn=loss, optimizer="adamw", meta=False)
    assert meta.phases == real.phases and meta.activations_bytes == real.activations_bytes
    allocator = allocator_step(model, (x,), optimizer=torch_optimizer("adamw"), loss_fn=loss)
    assert allocator.dispatcher_peak_bytes == meta.peak_bytes + meta.optimizer_host_bytes


def test_gru_projects_the_inputs_of_all_steps_at_once():
    # nn.GRU(8, 16), 5 steps of batch 3, time-major, AdamW. The forward starts with the parameters
    # (48*8 + 48*16 + 2*48 = 1,248 fp32 = 4,992 B), the input (5*3*8 fp32 = 480 B), AdamW's two states
    # (9,984 B) and h0 (3*16 fp32 = 192 B): 15,648 B. The CPU's first allocation is the input projection
    # of all 5 steps, [5, 3, 48] fp32 = 2,880 B (one addmm): 18,528 B; the per-step form meta takes
    # by itself (rnn=None) projects one step, [3, 48] = 576 B: 16,224 B.
    torch.manual_seed(0)
    model, x = nn.GRU(8, 16), torch.randn(5, 3, 8)

    def first_totals(result):
        totals = [v for phase, v in result.timeline if phase == "forward"]
        return [v for i, v in enumerate(totals) if i == 0 or v != totals[i - 1]][:2]
    cpu = estimate_training_memory(model, x, loss_fn=lambda out: out[0].sum(), optimizer="adamw")
    assert first_totals(cpu) == [4_992 + 480 + 2 * 4_992 + 192, 15_648 + 2_880] == [15_648, 18_528]
    generic = estimate_training_memory(model, x, loss_fn=lambda out: out[0].sum(), optimizer="adamw", rnn=None)
    assert first_totals(generic) == [15_648, 15_648 + 576]


@pytest.mark.parametrize("kind, cls, extra", [("gru", nn.GRU, {}), ("rnn_tanh", nn.RNN, {}),
                                              ("lstm", nn.LSTM, {"proj_size": 4})])
def test_rnn_cpu_computes_what_torch_computes(kind, cls, extra):
    torch.manual_seed(0)
    model, x = cls(8, 16, num_layers=2, bidirectional=True, batch_first=True, **extra), torch.randn(3, 5, 8)
    out, hidden = model(x)
    zeros = torch.zeros(4, 3, 16)  # layers * directions, batch, hidden
    hx = (torch.zeros(4, 3, 4), zeros) if kind == "lstm" else zeros
    ours = rnn_cpu(kind, x, hx, model._flat_weights, True, 2, 0.0, True, True, True)
    theirs = (out, *(hidden if kind == "lstm" else (hidden,)))
    assert len(ours) == len(theirs)
    for mine, torch_s in zip(ours, theirs):
        assert torch.allclose(mine, torch_s, atol=1e-6)


class PatchTransformer(nn.Module):
    """A tiny ViT: 4x4 patches of a 16x16 image (16 tokens + class token), d 32, 2 pre-norm layers."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.patch = nn.Conv2d(3, 32, 4, 4)
        self.cls = nn.Parameter(torch.zeros(1, 1, 32))
        self.pos = nn.Parameter(torch.zeros(1, 17, 32))
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True,
                                           activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), tokens], 1) + self.pos
        return self.head(self.encoder(tokens)[:, 0])


def test_multihead_attention_inside_runs_the_chosen_attention_kernel():
    # nn.TransformerEncoderLayer calls nn.MultiheadAttention with need_weights=False: its attention is
    # scaled_dot_product_attention, called inside F.multi_head_attention_forward, out of the kernel
    # mode's sight before (meta took the math path, the CPU its flash kernel: +7,648 B at the peak).
    x = torch.randn(2, 3, 16, 16)
    meta = estimate_training_memory(PatchTransformer(), x, attention="cpu")
    real = estimate_training_memory(PatchTransformer(), x, attention="cpu", meta=False)
    assert meta.phases == real.phases and meta.activations_bytes == real.activations_bytes
    allocator = allocator_step(PatchTransformer(), (x,), optimizer=torch_optimizer("adamw"))
    assert allocator.dispatcher_peak_bytes == meta.peak_bytes + meta.optimizer_host_bytes
    # the CPU's flash kernel saves the output and a log-sum-exp per row, not the 17 x 17 attention
    # weights per head: the math path's activations are larger
    math = estimate_training_memory(PatchTransformer(), x, attention="math")
    assert math.activations_bytes > meta.activations_bytes


def wide():
    """Linear(64, 64) + ReLU + Linear(64, 64, bias=False) + LayerNorm(64): the optimizer step peaks."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64, bias=False), nn.LayerNorm(64))


O = torch.optim
BREADTH = [
    (O.Adamax, {}), (O.NAdam, {}), (O.NAdam, {"decoupled_weight_decay": True, "weight_decay": 0.1}), (O.RAdam, {}),
    (O.Adadelta, {}), (O.Rprop, {}), (O.ASGD, {}), (O.Adam, {"amsgrad": True}), (O.AdamW, {"weight_decay": 0.1}),
    (O.Adam, {"maximize": True}), (O.SGD, {"lr": 1e-3, "momentum": 0.9, "nesterov": True}),
    (O.SGD, {"lr": 1e-3, "momentum": 0.9, "weight_decay": 0.1, "maximize": True}),
    (O.RMSprop, {"centered": True, "momentum": 0.9}),
]
# Host scalars unseen by the dispatcher: the per-tensor loops' float64 wrap of a Python number (8 B,
# see WRAPPED); Adam's foreach step with maximize peaks at _foreach_neg, just before torch.tensor(1.0)
# (the step counters' increment, a 4 B CPU scalar that no operator makes) is alive.
UNSEEN = {("Adam", True, True): 4}
LOOP_WRAPS = {"Adamax", "RAdam", "Adadelta", "Adam", "AdamW"}


@pytest.mark.parametrize("foreach", [True, False])
@pytest.mark.parametrize("cls, options", BREADTH)
def test_more_optimizers_match_the_allocator(cls, options, foreach):
    x = torch.randn(2, 64)

    def make(params):
        return cls(params, foreach=foreach, **options)
    result = estimate_training_memory(wide(), x, optimizer=make)
    real = allocator_step(wide(), (x,), optimizer=make)
    unseen = UNSEEN.get((cls.__name__, options.get("maximize", False), foreach),
                        WRAPPED if not foreach and cls.__name__ in LOOP_WRAPS else 0)
    assert real.dispatcher_peak_bytes - result.peak_bytes - result.optimizer_host_bytes == unseen


def test_parameter_groups_with_their_own_options_match_the_allocator():
    # two groups: the first half of the tensors plain AdamW, the second with amsgrad (a third state)
    x = torch.randn(2, 64)

    def make(params):
        return torch.optim.AdamW([{"params": params[:2], "weight_decay": 0.0},
                                  {"params": params[2:], "betas": (0.8, 0.9), "amsgrad": True}], foreach=True)
    result = estimate_training_memory(wide(), x, optimizer=make)
    # parameters: 64*64 + 64 (first Linear) + 64*64 (second) + 2*64 (LayerNorm) = 8,384 fp32. States:
    # exp_avg and exp_avg_sq of every parameter (2 x 8,384 x 4 = 67,072 B) + max_exp_avg_sq of the
    # second group (64*64 + 2*64 = 4,224 fp32 = 16,896 B) = 83,968 B
    assert result.optimizer_bytes == 2 * 8_384 * 4 + 4_224 * 4 == 83_968
    real = allocator_step(wide(), (x,), optimizer=make)
    assert real.dispatcher_peak_bytes == result.peak_bytes + result.optimizer_host_bytes


# bitsandbytes' 8-bit optimizers (an optional extra: skipped where it is not installed). bitsandbytes
# 0.50.2 runs them on CPU, so they are checked against the real step. Its Optimizer2State.init_state:
# a tensor of min_8bit_size (4,096) elements or more keeps state1 and state2 in uint8 with a float32
# absmax per block of 256 elements; a smaller one keeps them in float32; the two quantisation maps
# (256 float32 each) are made in __init__ and shared by every 8-bit state.
def two_linears():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 16))


@pytest.mark.slow  # (the first import of bitsandbytes alone takes seconds)
@pytest.mark.parametrize("name", ["adamw8bit", "adam8bit"])
def test_8bit_optimizers_hold_uint8_states_with_block_absmax(name):
    bnb = pytest.importorskip("bitsandbytes")
    x = torch.randn(1, 256)
    result = estimate_training_memory(two_linears(), x, optimizer=name)
    # Linear(256, 256).weight, 65,536 elements: 2 x 65,536 B uint8 + 2 x 256 blocks x 4 B = 133,120
    # its bias, 256 elements (< 4,096): 2 x 256 x 4 B float32 = 2,048
    # Linear(256, 16).weight, 4,096 elements (not < 4,096: 8-bit): 2 x 4,096 B + 2 x 16 blocks x 4 B = 8,320
    # its bias, 16 elements: 2 x 16 x 4 B = 128; the two maps: 2 x 256 x 4 B = 2,048
    assert result.optimizer_bytes == 133_120 + 2_048 + 8_320 + 128 + 2_048 == 145_664
    # against AdamW's float32 states: 2 x (65,536 + 256 + 4,096 + 16) x 4 B = 559,232 B
    assert estimate_training_memory(two_linears(), x, optimizer="adamw").optimizer_bytes == 559_232
    cls = bnb.optim.AdamW8bit if name == "adamw8bit" else bnb.optim.Adam8bit
    real = estimate_training_memory(two_linears(), x, optimizer=cls, meta=False)
    assert real.phases == result.phases
    allocator = allocator_step(two_linears(), (x,), optimizer=cls)
    assert allocator.dispatcher_peak_bytes == result.peak_bytes + result.optimizer_host_bytes


@pytest.mark.slow  # (the first import of bitsandbytes alone takes seconds)
def test_8bit_optimizers_with_states_at_the_threshold_match_the_allocator():
    # wide(): two 64 x 64 weights of 4,096 elements (8-bit, 16 blocks each) beside float32 states of
    # the bias and the LayerNorm's tensors
    bnb = pytest.importorskip("bitsandbytes")
    x = torch.randn(1, 64)
    for cls in (bnb.optim.AdamW8bit, bnb.optim.Adam8bit):
        meta = estimate_training_memory(wide(), x, optimizer=cls)
        allocator = allocator_step(wide(), (x,), optimizer=cls)
        assert allocator.dispatcher_peak_bytes == meta.peak_bytes + meta.optimizer_host_bytes


@pytest.mark.slow  # (the first import of bitsandbytes alone takes seconds)
def test_paged_8bit_optimizers_are_refused_with_the_unpaged_one_to_pass():
    bnb = pytest.importorskip("bitsandbytes")
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match=r"PagedAdamW8bit is a paged optimizer.*bitsandbytes.optim.AdamW8bit or "
                                         r"optimizer='adamw8bit'"):
        estimate_training_memory(mlp(), x, optimizer=bnb.optim.PagedAdamW8bit)
    with pytest.raises(ValueError, match=r"PagedAdam8bit is a paged optimizer"):
        estimate_training_memory(mlp(), x, optimizer=lambda params: bnb.optim.PagedAdam8bit(params))


def test_8bit_optimizer_by_name_without_bitsandbytes_says_what_to_install(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # (an import of it now fails, as when not installed)
    monkeypatch.setitem(sys.modules, "bitsandbytes.optim", None)
    with pytest.raises(ValueError, match=r"optimizer='adamw8bit' needs bitsandbytes.*pip install bitsandbytes"):
        estimate_training_memory(mlp(), torch.randn(2, 8), optimizer="adamw8bit")


def test_an_optimizer_whose_step_needs_a_closure_is_refused():
    with pytest.raises(ValueError, match=r"LBFGS.step\(closure\) re-evaluates the model"):
        estimate_training_memory(mlp(), torch.randn(2, 8), optimizer=torch.optim.LBFGS)


class Bags(nn.Module):
    """nn.EmbeddingBag(50, 16) then Linear(16, 4)."""

    def __init__(self, **options) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bags = nn.EmbeddingBag(50, 16, **options)
        self.head = nn.Linear(16, 4)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.bags(ids, offsets))


def test_embedding_bag_saves_the_cpus_index_buffers():
    # 4 bags of 6 ids (a [4, 6] int64 input), mode "mean". What the bag module leaves for backward on
    # the CPU: the output [4, 16] fp32 256 B; the offsets F.embedding_bag makes for a 2-d input, 4 x 8 =
    # 32 B; offset2bag made with 24 + 1 int64 entries, 200 B; bag_size 32 B; max_indices one int64 per
    # bag, 32 B: 552 B. (CUDA's kernel, and the meta kernel, make offset2bag of 24 entries and an empty
    # max_indices: 40 B less.)
    ids = torch.randint(0, 50, (4, 6))
    result = estimate_training_memory(Bags(mode="mean"), ids, optimizer="sgd")
    assert result.activations_by_module["bags"] == 256 + 32 + 200 + 32 + 32 == 552
    real = estimate_training_memory(Bags(mode="mean"), ids, optimizer="sgd", meta=False)
    assert real.activations_by_module == result.activations_by_module


@pytest.mark.parametrize("options, offsets", [
    ({"mode": "mean"}, None), ({"mode": "sum"}, None), ({"mode": "max"}, None),
    ({"mode": "sum", "padding_idx": 0}, [0, 5, 9]), ({"mode": "mean", "include_last_offset": True}, [0, 5, 9, 12]),
])
def test_embedding_bag_steps_match_the_allocator(options, offsets):
    # SGD peaks in backward at _embedding_bag_backward, while the index buffers are still saved
    torch.manual_seed(1)
    inputs = (torch.randint(0, 50, (4, 6)),) if offsets is None else (torch.randint(0, 50, (12,)), torch.tensor(offsets))
    meta = estimate_training_memory(Bags(**options), *inputs, optimizer="sgd")
    real = estimate_training_memory(Bags(**options), *inputs, optimizer="sgd", meta=False)
    assert meta.phases == real.phases and meta.peak_op == "aten._embedding_bag_backward.default"
    allocator = allocator_step(Bags(**options), inputs, optimizer=torch_optimizer("sgd"))
    assert allocator.dispatcher_peak_bytes == meta.peak_bytes


# Gradient clipping: torch.nn.utils.clip_grad_norm_(params, max_norm) between backward and step.
CLIPS = [
    # (optimizer, foreach, unseen bytes at the real step's peak)
    # SGD's steps (plain, per-tensor; with momentum, foreach) update in place: clipping makes the step's peak;
    # the real step also holds the float64 scalars torch wraps 1e-6 and max_norm in (module docstring) then,
    # 4 B above ours (the norms' 16 B are freed before them)
    (lambda p: torch.optim.SGD(p, lr=1e-3, foreach=False), 4),
    (lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=True), 4),
    (lambda p: torch.optim.AdamW(p, foreach=True), 0),
    (lambda p: torch.optim.AdamW(p, foreach=False), WRAPPED),
]


@pytest.mark.parametrize("factory, unseen", CLIPS)
def test_gradient_clipping_matches_the_allocator(factory, unseen):
    x = torch.randn(8, 1000)
    result = estimate_training_memory(linear(), x, optimizer=factory, clip_grad_norm=1.0)
    real = allocator_step(linear(), (x,), optimizer=factory, clip_grad_norm=1.0)
    assert result.clip_grad_norm == 1.0 and "gradients clipped to norm 1" in result.summary()
    assert real.dispatcher_peak_bytes - result.peak_bytes - result.optimizer_host_bytes == unseen


def test_gradient_clipping_peak_derived_by_hand():
    # Linear(1000, 1000), batch 8, plain SGD (per-tensor loop: param.add_(grad) allocates nothing).
    # After backward: params 4,004,000 + input 32,000 + gradients 4,004,000 = 8,040,000 B.
    # clip_grad_norm_: a norm per gradient (2 x 4 B), their stack (8 B), the total norm (4 B): +20 B at
    # its height (the norms and the stack are freed before the clip coefficient's 3 scalars are made).
    # Without clipping the optimizer phase stays at 8,040,000 B.
    x = torch.randn(8, 1000)
    sgd = lambda p: torch.optim.SGD(p, lr=1e-3, foreach=False)  # noqa: E731
    plain = estimate_training_memory(linear(), x, optimizer=sgd)
    clipped = estimate_training_memory(linear(), x, optimizer=sgd, clip_grad_norm=0.5)
    optimizer_phase = {p.name: p for p in clipped.phases}["optimizer"]
    assert {p.name: p for p in plain.phases}["optimizer"].peak_bytes == 8_040_000
    assert optimizer_phase.start_bytes == optimizer_phase.end_bytes == 8_040_000
    assert optimizer_phase.peak_bytes == clipped.peak_bytes == 8_040_020
    assert clipped.peak_phase == "optimizer" and plain.peak_phase == "backward"
    # the gradients are scaled in place: nothing else changes
    assert (clipped.grads_bytes, clipped.activations_bytes) == (plain.grads_bytes, plain.activations_bytes)
    real = estimate_training_memory(linear(), x, optimizer=sgd, clip_grad_norm=0.5, meta=False)
    assert real.phases == clipped.phases


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_decoder_with_gradient_clipping_matches_the_allocator(name):
    ids = torch.randint(0, 64, (2, 16))
    result = estimate_training_memory(LlamaDecoder(), ids, loss_fn=lm_loss, target=ids, attention="cpu",
                                      optimizer=name, clip_grad_norm=1.0)
    real = allocator_step(LlamaDecoder(), (ids,), optimizer=torch_optimizer(name), loss_fn=lm_loss, target=ids,
                          clip_grad_norm=1.0)
    assert real.dispatcher_peak_bytes == result.peak_bytes + result.optimizer_host_bytes


@pytest.mark.parametrize("value", [0, -1.0, True, "1.0"])
def test_clip_grad_norm_must_be_a_positive_number(value):
    with pytest.raises(ValueError, match=r"clip_grad_norm must be None or the max_norm .* > 0"):
        estimate_training_memory(mlp(), torch.randn(2, 8), clip_grad_norm=value)


# Sparse gradients: nn.Embedding / EmbeddingBag(sparse=True). The gradient is a sparse COO tensor, held in
# its indices (int64) and values; measured with meta=False (the meta device cannot: see the refusal test).
class SparseLookup(nn.Module):
    """Embedding(1000, 64, sparse=True) -> Linear(64, 4): 64,000 + 260 fp32 parameters = 257,040 B."""

    def __init__(self, bag: str | None = None):
        super().__init__()
        torch.manual_seed(0)
        self.bag = bag
        self.e = nn.EmbeddingBag(1000, 64, mode=bag, sparse=True) if bag else nn.Embedding(1000, 64, sparse=True)
        self.l = nn.Linear(64, 4)

    def forward(self, ids, offsets=None):
        return self.l(self.e(ids, offsets) if self.bag else self.e(ids))


def _ids():
    torch.manual_seed(1)
    return torch.randint(0, 1000, (8, 16))


SPARSE_STEPS = [
    # (optimizer, bag mode, unseen at the real peak): SGD's momentum buffer scaled by a Python float (buf.mul_(0.9))
    # and SparseAdam's bias-corrected step size are wrapped in float64 scalars the dispatcher never sees
    (lambda p: torch.optim.SGD(p, lr=0.1), None, 0),
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), None, WRAPPED),
    (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=False), None, WRAPPED),
    (lambda p: torch.optim.Adagrad(p), None, 0),
    (lambda p: torch.optim.Adagrad(p, foreach=False), None, 0),
    (lambda p: torch.optim.SGD(p, lr=0.1), "sum", 0),
    (lambda p: torch.optim.Adagrad(p), "mean", 0),
]


@pytest.mark.parametrize("factory, bag, unseen", SPARSE_STEPS)
def test_sparse_gradients_match_the_allocator(factory, bag, unseen):
    ids = _ids()
    inputs = (ids.flatten(), torch.tensor([0, 10, 40, 100])) if bag else (ids,)
    result = estimate_training_memory(SparseLookup(bag), *inputs, optimizer=factory, meta=False)
    real = allocator_step(SparseLookup(bag), inputs, optimizer=factory)
    # the gradients: the Linear's 1,040 B + the embedding's sparse gradient, one entry per looked-up id
    # (128, uncoalesced): indices 1 x 128 int64 = 1,024 B + values 128 x 64 fp32 = 32,768 B
    assert result.grads_bytes == 1_040 + 1_024 + 32_768
    assert real.dispatcher_peak_bytes - result.peak_bytes - result.optimizer_host_bytes == unseen


def test_sparse_gradient_peak_derived_by_hand():
    # SGD (no momentum). Base: parameters 257,040 + ids 8 x 16 int64 1,024 = 258,064 B. The peak is autograd
    # storing the embedding's gradient: the sparse tensor built over the ids and the upstream gradient
    # (views: nothing new) is cloned into .grad: indices 1,024 + values 32,768, while the upstream gradient
    # (8 x 16 x 64 fp32, 32,768), the Linear's gradients (1,040), the loss and its gradient (4 + 4) are alive:
    # 258,064 + 33,792 + 32,768 + 1,040 + 8 = 325,672 B.
    result = estimate_training_memory(SparseLookup(), _ids(), optimizer=lambda p: torch.optim.SGD(p, lr=0.1),
                                      meta=False)
    assert result.peak_bytes == 325_672 and result.peak_at == "backward: aten.clone.default in ''"


def test_sparse_adam_on_an_all_sparse_model_matches_the_allocator():
    # SparseAdam needs every gradient sparse: an embedding alone. Its two states are dense (2 x 256,000 B).
    class Lookup(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.e = nn.Embedding(1000, 64, sparse=True)

        def forward(self, ids):
            return self.e(ids)

    ids = _ids()
    result = estimate_training_memory(Lookup(), ids, optimizer=torch.optim.SparseAdam, meta=False)
    real = allocator_step(Lookup(), (ids,), optimizer=torch.optim.SparseAdam)
    assert result.optimizer_bytes == 2 * 256_000 and result.grads_bytes == 1_024 + 32_768
    assert real.dispatcher_peak_bytes - result.peak_bytes - result.optimizer_host_bytes == WRAPPED


def test_sparse_gradients_on_meta_are_refused_with_what_to_pass():
    with pytest.raises(ValueError, match=r"Embedding\(sparse=True\) at 'e' makes sparse gradients.*pass meta=False"):
        estimate_training_memory(SparseLookup(), _ids(), optimizer="sgd")
    with pytest.raises(ValueError, match=r"EmbeddingBag\(sparse=True\) at 'e'"):
        estimate_training_memory(SparseLookup("sum"), _ids().flatten(), torch.tensor([0, 10]), optimizer="sgd")
    frozen = SparseLookup()
    frozen.e.weight.requires_grad_(False)  # no gradient, nothing sparse: measured on meta as usual
    assert estimate_training_memory(frozen, _ids(), optimizer="sgd").grads_bytes == 1_040


# Activation offloading: forward and loss under torch.autograd.graph.save_on_cpu (what a GPU run does: saved
# tensors copied to the host as they are saved, copied back for their backward node), against the real CPU
# step under hooks that do the same with host copies the allocator does not see (allocator_steps.py).
def small_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))


OFFLOADS = [
    (small_mlp, (torch.randn(16, 256),), {}, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    (small_mlp, (torch.randn(16, 256),), {}, lambda p: torch.optim.AdamW(p, foreach=True)),
    (LlamaDecoder, (torch.randint(0, 64, (2, 16)),), {"loss_fn": lm_loss, "attention": "cpu"},
     lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9)),
]


@pytest.mark.parametrize("factory, inputs, extra, optimizer", OFFLOADS)
def test_offloaded_activations_match_the_allocator(factory, inputs, extra, optimizer):
    target = {"target": inputs[0]} if "loss_fn" in extra else {}
    result = estimate_training_memory(factory(), *inputs, optimizer=optimizer, offload_activations=True, **extra,
                                      **target)
    on_device = estimate_training_memory(factory(), *inputs, optimizer=optimizer, offload_activations=True,
                                         meta=False, **extra, **target)
    real = allocator_step(factory(), inputs, optimizer=optimizer, offload_activations=True,
                          loss_fn=extra.get("loss_fn"), **target)
    assert real.dispatcher_peak_bytes == result.peak_bytes + result.optimizer_host_bytes
    assert on_device.timeline == result.timeline
    assert result.offloaded_activations_bytes == on_device.offloaded_activations_bytes > 0


def test_offloaded_activations_derived_by_hand():
    # Linear(1000, 1000), batch 8, plain SGD. addmm saves its input for the weight gradient (the input
    # needs no gradient, so the weight is not saved): 8 x 1000 fp32 = 32,000 B go to the host. Without
    # offloading the peak is at the bias gradient: parameters 4,004,000 + input 32,000 + weight gradient
    # 4,000,000 + bias gradient 4,000 + loss and its gradient 8 = 8,040,008 B. With it, the node copies the
    # input back (32,000 B on the device, freed before the bias gradient is made): the peak is at the weight
    # gradient's mm, 4,004,000 + 32,000 + 32,000 + 4,000,000 + 8 = 8,068,008 B. The output is not saved.
    x = torch.randn(8, 1000)
    sgd = lambda p: torch.optim.SGD(p, lr=0.1, foreach=False)  # noqa: E731
    plain = estimate_training_memory(linear(), x, optimizer=sgd)
    offloaded = estimate_training_memory(linear(), x, optimizer=sgd, offload_activations=True)
    assert plain.peak_bytes == 8_040_008 and offloaded.peak_bytes == 8_068_008
    assert offloaded.peak_op == "aten.mm.default" and offloaded.offloaded_activations_bytes == 32_000
    assert offloaded.activations_bytes == plain.activations_bytes == 32_000
    assert "activations offloaded (31.25 KiB on the host)" in offloaded.summary()


def test_offloading_the_decoders_activations_lowers_its_peak():
    # The decoder's saved activations leave the device during the forward: at its end only the logits
    # (2 x 16 x 64 fp32 = 8,192 B, not saved) are held instead of 153,216 B, and the peak, now at the
    # attention's backward, is 66,176 B lower; the host holds 298,372 B of copies at most (the weights the
    # backward reads included). Each figure equals the real step's (test above).
    ids = torch.randint(0, 64, (2, 16))
    run = {"loss_fn": lm_loss, "target": ids, "attention": "cpu", "optimizer": "sgd"}
    plain = estimate_training_memory(LlamaDecoder(), ids, **run)
    offloaded = estimate_training_memory(LlamaDecoder(), ids, offload_activations=True, **run)
    assert (plain.activations_bytes, offloaded.activations_bytes) == (153_216, 2 * 16 * 64 * 4)
    assert plain.peak_bytes - offloaded.peak_bytes == 66_176
    assert offloaded.offloaded_activations_bytes == 298_372
