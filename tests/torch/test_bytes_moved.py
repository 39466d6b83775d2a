"""Bytes moved per operator call (``count_ops(..., bytes_moved=True)``, ``tensors.TrafficLog``).

Every expected figure is derived by hand in a comment: float32 is 4 bytes an element.
"""
import copy
import json
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from deeplite_like.backends.torch.compute import count_ops


def rows(count):
    return [(r.op, r.module, r.phase, r.bytes_read, r.bytes_written, r.fused_bytes) for r in count.records]


class GeluMLP(nn.Module):
    """fc1 (no bias) -> + b -> gelu -> * 0.5 -> fc2 (no bias): three elementwise ops between two matmuls."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32, bias=False)
        self.b = nn.Parameter(torch.zeros(32))
        self.fc2 = nn.Linear(32, 16, bias=False)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x) + self.b) * 0.5)


class Attention(nn.Module):
    """softmax(Q Kᵀ / √d) V, written out: bmm, div, softmax, bmm."""

    def forward(self, q, k, v):
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        return torch.bmm(scores.softmax(-1), v)


def test_linear_gelu_linear_reads_weights_inputs_and_bias_once_and_writes_outputs():
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    count = count_ops(model, torch.randn(8, 64), bytes_moved=True)
    # addmm(b1, x, W1ᵀ): reads b1 256·4 = 1,024 + x 8·64·4 = 2,048 + W1 256·64·4 = 65,536 -> 68,608;
    #   writes 8·256·4 = 8,192
    # gelu: reads 8,192, writes 8,192
    # addmm(b2, h, W2ᵀ): reads b2 64·4 = 256 + h 8,192 + W2 65,536 -> 73,984; writes 8·64·4 = 2,048
    # The chain between the two contractions is gelu alone: it reads its input and writes its output
    # in the fused view too.
    assert rows(count) == [
        ("aten.addmm", "0", "forward", 68_608, 8_192, 76_800),
        ("aten.gelu", "1", "forward", 8_192, 8_192, 16_384),
        ("aten.addmm", "2", "forward", 73_984, 2_048, 76_032),
    ]
    # model: 76,800 + 16,384 + 76,032 = 169,216 (fused: the same, nothing to fuse)
    assert count.bytes == count.fused_bytes == 169_216
    assert {name: stats.bytes for name, stats in count.by_module.items()} == {
        "": 169_216, "0": 76_800, "1": 16_384, "2": 76_032}
    assert count.by_operator["aten.addmm"].bytes == 76_800 + 76_032
    assert count.phases["forward"].bytes == 169_216
    assert [r.dtype for r in count.records] == ["float32"] * 3


def test_fused_view_of_a_gelu_mlp_moves_only_the_chain_ends():
    count = count_ops(GeluMLP(), torch.randn(4, 16), bytes_moved=True)
    # unfused: mm fc1 reads x 4·16·4 = 256 + W1 32·16·4 = 2,048 -> 2,304, writes 4·32·4 = 512;
    #   add reads 512 + b 32·4 = 128 -> 640, writes 512; gelu 512 / 512; mul 512 / 512 (0.5 is a scalar);
    #   mm fc2 reads 512 + W2 2,048 -> 2,560, writes 4·16·4 = 256.
    # fused: the chain add -> gelu -> mul reads mm's output and b (640, at add), keeps its two
    #   intermediates on chip (gelu 0) and writes only what fc2 reads (512, at mul).
    assert rows(count) == [
        ("aten.mm", "fc1", "forward", 2_304, 512, 2_816),
        ("aten.add", "", "forward", 640, 512, 640),
        ("aten.gelu", "", "forward", 512, 512, 0),
        ("aten.mul", "", "forward", 512, 512, 512),
        ("aten.mm", "fc2", "forward", 2_560, 256, 2_816),
    ]
    # unfused 2,816 + 1,152 + 1,024 + 1,024 + 2,816 = 8,832; fused 2,816 + 640 + 0 + 512 + 2,816 = 6,784
    assert (count.bytes, count.fused_bytes) == (8_832, 6_784)


def test_fused_view_of_an_attention_block_keeps_scores_on_chip_between_the_two_bmms():
    q, k, v = (torch.randn(2, 4, 8) for _ in range(3))
    count = count_ops(Attention(), q, k, v, bytes_moved=True)
    # bmm(q, kᵀ): reads q 2·4·8·4 = 256 + k 256 (its transpose is a view: no record) -> 512,
    #   writes the scores 2·4·4·4 = 128
    # div: 128 / 128; softmax: 128 / 128
    # bmm(p, v): reads p 128 + v 256 -> 384, writes 2·4·8·4 = 256
    # fused: div reads the scores (128) and writes nothing (softmax alone reads it); softmax
    #   writes p (128), which the second bmm reads.
    assert rows(count) == [
        ("aten.bmm", "", "forward", 512, 128, 640),
        ("aten.div", "", "forward", 128, 128, 128),
        ("aten._softmax", "", "forward", 128, 128, 128),
        ("aten.bmm", "", "forward", 384, 256, 640),
    ]
    assert (count.bytes, count.fused_bytes) == (640 + 256 + 256 + 640, 640 + 128 + 128 + 640)


class InPlace(nn.Module):
    def forward(self, x):
        y = x * 2
        y.relu_()
        return y @ y.t(), y.reshape(16).view(4, 4)


def test_in_place_op_reads_and_writes_self_a_storage_read_twice_counts_once_views_move_nothing():
    count = count_ops(InPlace(), torch.randn(4, 4), bytes_moved=True)
    # mul: reads x 16·4 = 64, writes y 64; relu_: reads y 64 and writes it back 64;
    # y @ yᵀ: y and its transpose are one storage, read once (64), writes 64;
    # reshape/view of a contiguous tensor: views, no record.
    # fused: the chain mul -> relu_ reads x (64) and writes y once (64, at relu_, its last write).
    assert rows(count) == [
        ("aten.mul", "", "forward", 64, 64, 64),
        ("aten.relu_", "", "forward", 64, 64, 64),
        ("aten.mm", "", "forward", 64, 64, 128),
    ]


class Broadcast(nn.Module):
    def forward(self, x, b):
        return x + b.expand_as(x)


class SplitHeads(nn.Module):
    def forward(self, qk):
        q, k = qk.chunk(2, dim=-1)
        return q @ k.transpose(-1, -2)


def test_a_broadcast_dimension_is_read_once_and_views_of_one_storage_add_up():
    count = count_ops(Broadcast(), torch.randn(8, 32), torch.randn(32), bytes_moved=True)
    # add: x 8·32·4 = 1,024 + b expanded over 8 rows, stride 0: its 32 elements once, 128 -> 1,152;
    #   writes 1,024
    assert rows(count) == [("aten.add", "", "forward", 1_152, 1_024, 2_176)]
    count = count_ops(SplitHeads(), torch.randn(4, 16), bytes_moved=True)
    # q and k are the two halves of one (4, 16) storage: 4·8·4 = 128 each, 256 in all (the whole
    # storage, not 128 for "one storage"); writes 4·4·4 = 64
    assert rows(count) == [("aten.mm", "", "forward", 256, 64, 320)]


def test_conv2d_reads_input_weight_bias_and_writes_its_output():
    count = count_ops(nn.Conv2d(3, 8, 3), torch.randn(1, 3, 8, 8), bytes_moved=True)
    # input 3·8·8·4 = 768 + weight 8·3·3·3·4 = 864 + bias 8·4 = 32 -> 1,664; output 8·6·6·4 = 1,152
    ((op, _, _, read, written, _),) = rows(count)
    assert (op, read, written) == ("aten.convolution", 1_664, 1_152)


def test_bytes_follow_the_dtype_bfloat16_halves_them():
    model = nn.Linear(64, 32).to(torch.bfloat16)
    count = count_ops(model, torch.randn(4, 64, dtype=torch.bfloat16), bytes_moved=True)
    # bf16 is 2 bytes: bias 32·2 = 64 + x 4·64·2 = 512 + W 32·64·2 = 4,096 -> 4,672; writes 4·32·2 = 256
    assert rows(count) == [("aten.addmm", "", "forward", 4_672, 256, 4_928)]
    assert count.records[0].dtype == "bfloat16"


def test_backward_records_carry_their_phase_and_module():
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    count = count_ops(model, torch.randn(8, 64), backward=True, bytes_moved=True)
    backward = [r for r in count.records if r.phase == "backward"]
    # Linear 2's weight grad: mm(grad_outᵀ, h) reads the grad (all ones expanded from one scalar:
    # one element, 4) and h 8·256·4 = 8,192, writes W2's grad 64·256·4 = 65,536
    weight_grads = [r for r in backward if r.op == "aten.mm" and r.bytes_written == 65_536]
    assert [(r.module, r.bytes_read) for r in weight_grads] == [("2", 8_196), ("0", 10_240)]
    # (Linear 0's: the gelu's input grad 8·256·4 = 8,192 + x 8·64·4 = 2,048 = 10,240)
    assert count.phases["backward"].bytes == sum(r.bytes for r in backward)
    assert {r.phase for r in count.records} == {"forward", "loss", "backward"}


def test_meta_gives_the_same_records_and_repeated_counts_are_identical():
    model, x = GeluMLP(), torch.randn(4, 16)
    first = count_ops(model, x, bytes_moved=True)
    assert count_ops(model, x, bytes_moved=True).records == first.records
    assert count_ops(model, x, bytes_moved=True, meta=True).records == first.records


def test_counting_bytes_leaves_the_model_and_the_counts_as_they_were():
    model, x = GeluMLP(), torch.randn(4, 16)
    before = copy.deepcopy(model.state_dict())
    plain, with_bytes = count_ops(model, x), count_ops(model, x, bytes_moved=True)
    assert (plain.macs, plain.flops) == (with_bytes.macs, with_bytes.flops)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert plain.records == [] and not plain.bytes_counted and plain.bytes == 0


def test_json_carries_bytes_only_when_counted():
    model, x = GeluMLP(), torch.randn(4, 16)
    data = json.loads(count_ops(model, x, bytes_moved=True).to_json())
    assert (data["bytes"], data["fused_bytes"]) == (8_832, 6_784)
    assert data["by_module"]["fc1"]["bytes"] == 2_816
    assert "bytes" not in json.loads(count_ops(model, x).to_json())


def test_bytes_moved_must_be_a_bool():
    with pytest.raises(TypeError, match="bytes_moved"):
        count_ops(nn.Linear(2, 2), torch.randn(1, 2), bytes_moved="yes")


class MatMul3d(nn.Module):
    def forward(self, x, w):
        return torch.matmul(x, w)  # folds x to (6, 8), mm, then _unsafe_view back to (2, 3, 4)


def test_an_op_whose_output_lies_on_its_input_storage_is_a_view_and_a_look_up_reads_only_its_rows():
    count = count_ops(MatMul3d(), torch.randn(2, 3, 8), torch.randn(8, 4), bytes_moved=True)
    # mm reads x 6·8·4 = 192 + w 8·4·4 = 128 -> 320, writes 6·4·4 = 96; the _unsafe_view after it
    # returns mm's storage: no record
    assert rows(count) == [("aten.mm", "", "forward", 320, 96, 416)]
    count = count_ops(nn.Embedding(1000, 16), torch.randint(0, 1000, (2, 3)), bytes_moved=True)
    # embedding reads the ids 2·3·8 = 48 and the 6 rows it selects, 6·16·4 = 384 (not the table's
    # 1000·16·4 = 64,000) -> 432; writes 384
    assert rows(count) == [("aten.embedding", "", "forward", 432, 384, 816)]


class Scatters(nn.Module):
    """A KV cache's update and its relatives: index_copy_, index_add_, scatter_, scatter_add_ into ``cache``."""

    def forward(self, cache, new, pos, idx, src):
        cache.index_copy_(0, pos, new)
        cache.index_add_(0, pos, new)
        cache.scatter_(0, idx, src)
        return cache.scatter_add_(0, idx, src)


def test_an_in_place_scatter_writes_what_it_scatters_not_its_whole_self():
    cache, new, src = torch.zeros(8, 4), torch.ones(1, 4), torch.ones(1, 4)
    pos, idx = torch.tensor([3]), torch.tensor([[1, 2, 3, 4]])
    count = count_ops(Scatters(), cache, new, pos, idx, src, bytes_moved=True)
    # cache (8, 4) float32 = 128 bytes, of which each op writes 4 elements = 16 (not 128):
    # index_copy_: reads new 16 + pos 8 = 24 (not what it overwrites), writes 16;
    # index_add_: reads new 16 + pos 8 + the 16 it adds to = 40, writes 16;
    # scatter_: reads idx 4 · 8 = 32 + src 16 = 48, writes one element per index, 16;
    # scatter_add_: 48 + the 16 it adds to = 64, writes 16.
    # fused (one chain): new, pos, idx, src read once (24 at index_copy_, 48 at scatter_), the cache
    # written once at its last write (16).
    assert rows(count) == [
        ("aten.index_copy_", "", "forward", 24, 16, 24),
        ("aten.index_add_", "", "forward", 40, 16, 0),
        ("aten.scatter_", "", "forward", 48, 16, 48),
        ("aten.scatter_add_", "", "forward", 64, 16, 16),
    ]


@pytest.mark.parametrize("layout", [torch.jagged, torch.strided])
def test_a_nested_input_is_read_as_its_buffer_and_metadata_questions_leave_no_record(layout):
    x = torch.nested.nested_tensor([torch.randn(3, 8), torch.randn(5, 8)], layout=layout)
    count = count_ops(nn.Linear(8, 4), x, bytes_moved=True)
    # linear reads the 3 + 5 = 8 rows of 8 (256), W 4·8·4 = 128 and b 16 -> 400, writes 8 rows of 4: 128
    linear = [(r.bytes_read, r.bytes_written) for r in count.records if r.op == "aten.linear"]
    assert linear == [(400, 128)]
    assert not any(r.op in ("aten.sym_size", "prim.layout") for r in count.records)
