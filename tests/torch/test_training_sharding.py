"""Per-rank training memory under DDP / ZeRO / FSDP, and the batch-size search."""
from __future__ import annotations

import pytest
import torch

from deeplite_like.backends.torch import estimate_training_memory, largest_batch
from deeplite_like.backends.torch.training.step import repeated_blocks, shard_bytes
from deeplite_like.units import parse_bytes
from tests.torch.training_models import LlamaDecoder, lm_loss, mlp

# training_models.mlp: Linear(8,16) weight [16,8] + bias [16], Linear(16,4) weight [4,16] + bias [4].
# Divided on dim 0 over 2 ranks: 8*8*4 + 8*4 + 2*16*4 + 2*4 = 256 + 32 + 128 + 8 = 424 (= 848 / 2);
# over 3 ranks: ceil(16/3)=6 rows: 6*8*4 + 6*4 + 2*16*4 + 2*4 = 192 + 24 + 128 + 8 = 352.
FULL = 848
HALF = 424
THIRD = 352
INPUT = 2 * 8 * 4


def run(**options):
    return estimate_training_memory(mlp(), torch.randn(2, 8), **options)


@pytest.mark.parametrize("sharding, ws, params, grads, states", [
    ("ddp", 2, FULL, FULL, 2 * FULL),
    ("zero1", 2, FULL, FULL, 2 * HALF),
    ("zero2", 2, FULL, HALF, 2 * HALF),
    ("zero3", 2, HALF, HALF, 2 * HALF),
    ("fsdp", 2, HALF, HALF, 2 * HALF),
    ("zero3", 3, THIRD, THIRD, 2 * THIRD),
    ("zero1", 1, FULL, FULL, 2 * FULL),
])
def test_model_states_divided_per_strategy(sharding, ws, params, grads, states):
    result = run(sharding=sharding, world_size=ws)
    assert (result.params_bytes, result.grads_bytes, result.optimizer_bytes) == (params, grads, states)
    assert result.sharding == sharding and result.world_size == ws


def test_ddp_adds_gradient_buckets_to_every_phase():
    plain, ddp = run(), run(sharding="ddp", world_size=4)
    assert ddp.comm_buffer_bytes == FULL  # the buckets hold a flat copy of every gradient
    assert ddp.peak_bytes == plain.peak_bytes + FULL
    assert [p.peak_bytes for p in ddp.phases] == [p.peak_bytes + FULL for p in plain.phases]


def test_zero1_forward_start_by_hand():
    # params 848 + input 64 + AdamW states divided 2 * 424.
    assert run(sharding="zero1", world_size=2).phases[0].start_bytes == FULL + INPUT + 2 * HALF


def test_zero3_gathers_the_whole_root_unit():
    # No nn.ModuleList: the whole model is FSDP's root unit. Its pre-forward all-gathers it: the flat
    # all-gather output (848, no padding: 16 and 4 rows divide by 2) and the parameters copied out of it
    # (848), the output kept until the root's post-forward (FSDP2's implicit prefetch): the forward starts
    # with both, and peaks with both (at the ReLU).
    result = run(sharding="zero3", world_size=2)
    assert result.collective_buffers == {"gathered parameters": FULL, "all-gather buffers": FULL,
                                         "reduce-scatter buffers": 0, "unsharded gradients": 0}
    assert (result.gather_bytes, result.comm_buffer_bytes) == (FULL, FULL)
    assert result.phases[0].start_bytes == HALF + INPUT + 2 * HALF + 2 * FULL
    # the final callback reshards the root and reduce-scatters its gradients; the input it reduce-scattered
    # from is freed there: the optimizer starts with the shards of the gradients alone
    optimizer = result.phases[-1]
    assert optimizer.name == "optimizer" and optimizer.start_bytes == HALF + INPUT + 2 * HALF + HALF


def test_zero3_units_of_a_decoder():
    # Units: blocks.0 and blocks.1, 8768 fp32 each = 35072 B; root: embed 2048 + norm 32 + head 2048
    # = 4128 fp32 = 16512 B. The peak is in blocks.1's backward: the root (gathered from its forward to
    # its backward) and blocks.1 copied out, 16512 + 35072 = 51584, while blocks.0's all-gather output
    # (35072, prefetched by blocks.1's pre-backward) waits for its copy-out.
    model = LlamaDecoder()
    assert repeated_blocks(model) == ["blocks.0", "blocks.1"]
    ids = torch.randint(0, 64, (2, 16))
    result = estimate_training_memory(model, ids, loss_fn=lm_loss, target=ids, sharding="fsdp", world_size=2)
    assert result.peak_phase == "backward" and result.peak_module.startswith("blocks.1")
    assert result.collective_buffers["gathered parameters"] == 16512 + 35072
    assert result.collective_buffers["all-gather buffers"] == result.comm_buffer_bytes == 35072
    assert result.params_bytes == 86656 // 2


def test_shard_bytes_pads_rows():
    assert shard_bytes(torch.empty(10, 3, device="meta"), 4) == 3 * 3 * 4  # ceil(10/4) = 3 rows of 12 B
    assert shard_bytes(torch.empty((), device="meta"), 4) == 4


def test_parse_bytes():
    assert parse_bytes("80GiB") == 80 * 2**30
    assert parse_bytes("24 GB") == 24 * 10**9
    assert parse_bytes("512MiB") == 512 * 2**20
    assert parse_bytes("80G") == 80 * 2**30
    assert parse_bytes(1000) == 1000
    with pytest.raises(ValueError, match="write it like '80GiB'"):
        parse_bytes("eighty gigs")


def test_largest_batch_is_verified_on_both_sides():
    # MLP, no allowance: need(n) measured; the answer fits and the next size does not.
    found = largest_batch(mlp(), torch.randn(1, 8), fit=5000, allowance=False)
    assert found.size == 9
    assert found.measured[9] <= 5000 < found.measured[10]
    assert found.result.peak_bytes == found.measured[9] and found.result.batch_size == 9
    assert found.next_peak_bytes == found.measured[10]


def test_largest_batch_true_scaling_not_a_linear_guess():
    # At batch 1 and 2 the decoder's peak is in the optimizer step (slope = the input's 16*8 B +
    # target 16*8 B = 256 B per sample); beyond, the backward dominates: the affine guess from 1 and 2
    # is far too large, and the search still answers the measured size.
    ids = torch.zeros(1, 16, dtype=torch.long)
    found = largest_batch(LlamaDecoder(), ids, fit="2MiB", allowance=False, loss_fn=lm_loss, target=ids,
                          attention="cpu")
    assert found.slope_bytes == 256
    assert found.measured[found.size] <= 2 * 2**20 < found.measured[found.size + 1]
    assert found.size < (2 * 2**20 - found.intercept_bytes) // found.slope_bytes


def test_largest_sequence_length():
    ids = torch.zeros(1, 16, dtype=torch.long)
    found = largest_batch(LlamaDecoder(), ids, fit=600_000, axis=1, allowance=False, loss_fn=lm_loss, target=ids,
                          attention="cpu", max_size=128)
    assert found.axis == 1
    assert found.measured[found.size] <= 600_000 < found.measured[found.size + 1]


def test_nothing_fits():
    found = largest_batch(mlp(), torch.randn(1, 8), fit=100, allowance=False)
    assert found.size == 0 and found.result is None


# FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) and reshard_after_forward.
BF16_FP32 = {"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32}


def test_fsdp_mixed_precision_keeps_master_states_and_gathers_bf16():
    from torch.distributed.fsdp import MixedPrecisionPolicy

    policy = MixedPrecisionPolicy(**BF16_FP32)
    plain = run(sharding="fsdp", world_size=2)
    mixed = run(sharding="fsdp", world_size=2, mixed_precision=policy)
    # the sharded float32 parameters, gradients and AdamW states are those of the plain run: 424, 424, 2 * 424
    assert (mixed.params_bytes, mixed.grads_bytes, mixed.optimizer_bytes) == (HALF, HALF, 2 * HALF)
    # plain: the forward peaks with the root gathered twice (the all-gather output and the copy-out, 848 B
    # each); under the policy (half the activations) the peak moves to the end of the backward, the root's
    # reduce-scatter input in fp32: 212 parameters * 4 = 848 B, beside the gradients' shards
    assert plain.collective_buffers["gathered parameters"] == plain.collective_buffers["all-gather buffers"] == FULL
    assert mixed.collective_buffers == {"gathered parameters": 0, "all-gather buffers": 0,
                                        "reduce-scatter buffers": 212 * 4, "unsharded gradients": 0}
    assert mixed.peak_at == "backward: FSDP2 hooks at the end of the backward in ''"
    # the forward computes in bf16: the activations are those of a pure-bf16 run, half the float32 ones
    pure_bf16 = run(dtype=torch.bfloat16)
    assert mixed.activations_bytes == pure_bf16.activations_bytes == plain.activations_bytes // 2
    # the float32 input (64 B) and the bf16 copy FSDP casts (cast_forward_inputs): 64 + 32
    assert mixed.input_bytes == INPUT + INPUT // 2
    assert mixed.mixed_precision == "param bfloat16, reduce float32"
    # a dict of the policy's fields is the same policy; real bf16 copies give the meta figures
    assert run(sharding="fsdp", world_size=2, mixed_precision=BF16_FP32).peak_bytes == mixed.peak_bytes
    real = run(sharding="fsdp", world_size=2, mixed_precision=policy, meta=False)
    assert real.timeline == mixed.timeline and real.activations_bytes == mixed.activations_bytes


def test_fsdp_mixed_precision_saves_no_weight_copy():
    # bf16 autocast over FSDP casts every weight it uses and linear saves the copy for backward (an
    # activation of the linear layer); under the policy the bf16 weights are FSDP's gathered buffers, freed
    # after each unit, and a linear layer whose input another module made holds nothing. The output
    # projection o (32 x 32) and down (48 -> 32) of each block: their weight copy is all they hold under
    # autocast, 32 * 32 * 2 = 2,048 B and 32 * 48 * 2 = 3,072 B.
    ids = torch.randint(0, 64, (2, 16))
    options = {"loss_fn": lm_loss, "target": ids, "attention": "cuda", "sharding": "fsdp", "world_size": 2}
    autocast = estimate_training_memory(LlamaDecoder(), ids, autocast="bf16", **options)
    mixed = estimate_training_memory(LlamaDecoder(), ids, mixed_precision=BF16_FP32, **options)
    for block in ("blocks.0", "blocks.1"):
        assert autocast.activations_by_module[f"{block}.o"] == 32 * 32 * 2
        assert autocast.activations_by_module[f"{block}.down"] == 32 * 48 * 2
        assert f"{block}.o" not in mixed.activations_by_module and f"{block}.down" not in mixed.activations_by_module


def test_fsdp_reshard_after_forward_false_holds_every_unit():
    # units=nn.Linear: every linear layer is a unit (q, k, v, o: 32*32 = 1,024; gate, up, down: 32*48 = 1,536;
    # head 64*32 = 2,048 parameters); the root holds the rest: embedding 2,048 + 5 norms * 32 = 2,208.
    # 21,664 parameters in all (86,656 B fp32).
    ids = torch.randint(0, 64, (2, 16))
    options = {"loss_fn": lm_loss, "target": ids, "sharding": "fsdp", "world_size": 2, "units": torch.nn.Linear}
    resharded = estimate_training_memory(LlamaDecoder(), ids, **options)
    kept = estimate_training_memory(LlamaDecoder(), ids, reshard_after_forward=False, **options)
    # resharded: the peak is the head's weight-gradient mm: the root (2,208 parameters, kept gathered from
    # its forward to its backward) and the head copied out, (2,208 + 2,048) * 4 = 17,024 B; blocks.1.down
    # (1,536 * 4 = 6,144 B, the unit before the head in the forward) prefetched; the head's weight gradient
    # unsharded, 8,192 B, 4,096 beyond its shard
    assert resharded.peak_at == "backward: aten.mm.default in 'head'"
    assert resharded.collective_buffers == {"gathered parameters": 17_024, "all-gather buffers": 6_144,
                                            "reduce-scatter buffers": 0, "unsharded gradients": 4_096}
    # kept: every unit's from the forward on, all 21,664 parameters = 86,656 B, nothing re-gathered
    assert kept.collective_buffers["gathered parameters"] == kept.gather_bytes == 86_656
    assert kept.comm_buffer_bytes == 0 and kept.peak_bytes > resharded.peak_bytes
    # with the policy, gathered in bf16
    mixed = estimate_training_memory(LlamaDecoder(), ids, reshard_after_forward=False, mixed_precision=BF16_FP32,
                                     **options)
    assert mixed.gather_bytes == 86_656 // 2 == 43_328
    assert not kept.reshard_after_forward


def test_fsdp_options_errors_name_what_to_pass():
    with pytest.raises(ValueError, match="mixed_precision is an option of FSDP2.*sharding='fsdp'"):
        run(mixed_precision=BF16_FP32)
    with pytest.raises(ValueError, match="reshard_after_forward=False is an option of FSDP2"):
        run(sharding="ddp", world_size=2, reshard_after_forward=False)
    with pytest.raises(TypeError, match="reshard_after_forward must be a bool"):
        run(sharding="fsdp", world_size=2, reshard_after_forward=8)
    with pytest.raises(ValueError, match="unknown field 'param'"):
        run(sharding="fsdp", world_size=2, mixed_precision={"param": torch.bfloat16})
    with pytest.raises(ValueError, match="param_dtype=torch.int8 is not a floating"):
        run(sharding="fsdp", world_size=2, mixed_precision={"param_dtype": torch.int8})
    with pytest.raises(TypeError, match="MixedPrecisionPolicy"):
        run(sharding="fsdp", world_size=2, mixed_precision="bf16")


def test_fsdp_cpu_offload_moves_the_shards_and_the_update_to_the_host():
    # MLP, fsdp x2, AdamW: the rank's shards - parameters 424, gradients 424, states 2 * 424 - are host memory.
    plain = run(sharding="fsdp", world_size=2)
    offloaded = run(sharding="fsdp", world_size=2, cpu_offload=True)
    assert offloaded.offloaded_bytes == HALF + HALF + 2 * HALF == 1696
    assert (offloaded.params_bytes, offloaded.grads_bytes, offloaded.optimizer_bytes) == (HALF, HALF, 2 * HALF)
    phases = {p.name: p for p in offloaded.phases}
    # the forward starts with the input (64 B) and the root unit gathered on the device: the all-gather
    # output (848 B) beside the parameters copied out of it (848 B)
    assert phases["forward"].start_bytes == INPUT + 2 * FULL
    # the update runs on the host: the device holds the input alone through the optimizer step
    assert phases["optimizer"].start_bytes == phases["optimizer"].peak_bytes == INPUT
    # the backward on the device is the plain one less the sharded parameters (424), the states (848) and
    # the gradients' shards made so far
    plain_phases = {p.name: p for p in plain.phases}
    assert phases["backward"].start_bytes == plain_phases["backward"].start_bytes - HALF - 2 * HALF
    # both peak in the forward (the ReLU, the root gathered twice): the offloaded one without the parameters'
    # shards and the states
    assert plain.peak_phase == offloaded.peak_phase == "forward"
    assert offloaded.peak_bytes == plain.peak_bytes - HALF - 2 * HALF
    with pytest.raises(ValueError, match="cpu_offload=True is an option of FSDP2"):
        run(cpu_offload=True)


def test_fsdp2_units_pad_rows_to_the_world_size():
    # The stack of the distributed tests on 3 ranks: every tensor padded on dim 0 to a multiple of 3 rows.
    # Head Linear(64, 64): weight ceil(64/3) = 22 -> 66 rows * 64 * 4 = 16,896, bias 66 * 4 = 264: 17,160 B.
    # Block: [256, 64] -> 258 rows: 66,048; bias 258 * 4 = 1,032; [64, 256] -> 66 rows: 67,584; bias 264:
    # 134,928 B. fp32 everywhere: the reduce-scatter input is as big, its output a third, no cast, no copy-in.
    from deeplite_like.backends.torch.tensors import storage_key
    from deeplite_like.backends.torch.training.step import Fsdp2Unit, fsdp2_units, resolve_sharding
    from tests.distributed.test_training_memory_fsdp import stack

    blocks = ["blocks.0", "blocks.1", "blocks.2"]
    units = fsdp2_units(dict(stack().named_parameters()), blocks, resolve_sharding("fsdp", 3), {})
    assert units[0] == Fsdp2Unit("", 17_160, 0, 17_160, 17_160 // 3, False)
    assert units[1:] == [Fsdp2Unit(f"blocks.{i}", 134_928, 0, 134_928, 134_928 // 3, False) for i in range(3)]
    # under the bf16 / fp32 policy (float32 masters: 4 B): gathered in bf16 (half), a flat bf16 copy of the
    # shard before the all-gather (a sixth), reduce-scattered in fp32 (the masters' dtype: no cast)
    bf16 = {n: p.detach().to(torch.bfloat16).requires_grad_() for n, p in stack().named_parameters()}
    mixed = fsdp2_units(bf16, blocks, resolve_sharding("fsdp", 3, BF16_FP32), {storage_key(t): 4 for t in bf16.values()})
    assert mixed[1] == Fsdp2Unit("blocks.0", 134_928 // 2, 134_928 // 6, 134_928, 134_928 // 3, False)


def test_comm_backend_is_checked_and_gloo_adds_its_copies():
    from tests.distributed.test_training_memory_fsdp import stack

    with pytest.raises(ValueError, match="comm_backend='mpi'.*'nccl', 'gloo'"):
        run(sharding="fsdp", world_size=2, comm_backend="mpi")
    # The stack on 2 ranks, AdamW. gloo peaks as blocks.1's pre-backward prefetches blocks.0: FSDP2's all-gather
    # output (132,352 B) beside gloo's flat copy of it (as big); the root (16,640) and blocks.1 (132,352) copied
    # out; blocks.2's reduce-scatter input kept (132,352); the head's gradients unsharded (the root reduce-scatters
    # in the final callback): 16,640 B, 8,320 beyond their shards.
    x = torch.randn(8, 64)
    gloo = estimate_training_memory(stack(), x, sharding="fsdp", world_size=2, comm_backend="gloo")
    nccl = estimate_training_memory(stack(), x, sharding="fsdp", world_size=2)
    assert gloo.peak_at == "backward: FSDP2 hooks before aten.t.default in 'blocks.1.2'"
    assert gloo.collective_buffers == {"gathered parameters": 16_640 + 132_352, "all-gather buffers": 2 * 132_352,
                                       "reduce-scatter buffers": 132_352, "unsharded gradients": 8_320}
    assert gloo.comm_buffer_bytes == 3 * 132_352 and gloo.gather_bytes == 16_640 + 132_352 + 8_320
    # NCCL makes no copy: one all-gather output at its peak
    assert nccl.collective_buffers["all-gather buffers"] == 132_352
    assert "of which the strategy's buffers: gathered parameters" in gloo.summary()
