"""``If`` / ``Loop`` / ``Scan`` in ONNX files: their subgraphs counted as they run (graphs built by hand,
every count derived in a comment), trip counts read from the file's constants, bounds said in ``untracked``."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from deeplite_like.backends.onnx import count_ops  # noqa: E402
from deeplite_like.backends.onnx.formulas import loop_trips  # noqa: E402
from deeplite_like.backends.onnx.graph import prepare  # noqa: E402

F, B, I64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64
vi = helper.make_tensor_value_info


def _model(nodes, initializers, x_shape=(1, 8), opset=17):
    graph = helper.make_graph(nodes, "g", [vi("x", F, list(x_shape))], [vi("y", F, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _const(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


W = numpy_helper.from_array(np.ones((8, 8), np.float32), "W")


def _loop(trips=None, start=None, cond_nodes=None, body_nodes=None):
    """``Loop(M, cond, x)``: the body ``h_out = h_in @ W`` (8 x 8 = 64 MACs on (1, 8)); its condition the
    input's passed through (``Identity``), or what ``cond_nodes`` compute. The body declares no shapes."""
    body_nodes = body_nodes or [helper.make_node("MatMul", ["h_in", "W"], ["h_out"], name="body_mm")]
    cond_nodes = cond_nodes or [helper.make_node("Identity", ["c_in"], ["c_out"])]
    body = helper.make_graph(body_nodes + cond_nodes, "body",
                             [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, None)],
                             [vi("c_out", B, []), vi("h_out", F, None)])
    initializers = [W]
    if trips is not None:
        initializers.append(_const("M", trips, np.int64))
    if start is not None:
        initializers.append(_const("c0", start, np.bool_))
    node = helper.make_node("Loop", ["M" if trips is not None else "", "c0" if start is not None else "", "x"], ["y"],
                            body=body, name="loop")
    return _model([node], initializers)


def test_a_loop_with_a_constant_trip_count_runs_its_body_that_many_times():
    proto = _loop(trips=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exact: nothing untracked
        counted = count_ops(proto, bytes_moved=True)
    # 5 x (1x8 @ 8x8) = 5 x 64 = 320 MACs, 640 FLOPs; the body's shapes come from the outer x (1, 8)
    assert (counted.macs, counted.flops, counted.untracked) == (320, 640, {})
    # one record per run: each MatMul reads h (32 bytes) and W (256) and writes h (32)
    assert [(r.op, r.bytes) for r in counted.records] == [("MatMul", 320)] * 5
    info = prepare(proto)
    assert info.shapes["h_out"] == (1, 8) and info.shapes["y"] == (1, 8)
    assert loop_trips(info.model.graph.node[0], info) == (5, "")
    # the caller's proto is unchanged: the body still declares no shape
    assert not proto.graph.node[0].attribute[0].g.input[2].type.tensor_type.HasField("shape")


def test_loop_bounds_that_the_file_does_not_fix_are_said():
    # no M (a while loop on the data): the body once, 64 MACs, a lower bound
    with pytest.warns(UserWarning, match="trip count not static"):
        open_loop = count_ops(_loop(start=True))
    assert (open_loop.macs, open_loop.untracked) == (64, {"Loop (trip count not static: body counted once)": 1})
    # M = 5 but the body computes its condition (sum(h) < 100): M trips, an upper bound
    cond = [helper.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0),
            helper.make_node("Less", ["s", "limit"], ["c_out"])]
    proto = _loop(trips=5, cond_nodes=cond)
    proto.graph.initializer.append(_const("limit", 100.0, np.float32))
    with pytest.warns(UserWarning, match="upper bound"):
        bounded = count_ops(proto)
    # per trip: MatMul 64 MACs (128 FLOPs) + ReduceSum of 8 (8 FLOPs) + Less (free): x 5 = 320 MACs, 680 FLOPs
    assert (bounded.macs, bounded.flops) == (320, 680)
    assert bounded.untracked == {"Loop (condition on the data: M trips counted, an upper bound)": 1}
    # a constant false initial condition: the body never runs
    assert count_ops(_loop(trips=5, start=False)).macs == 0


def test_a_loop_bound_no_model_has_is_refused_and_a_growing_carried_value_stays_unknown():
    with pytest.raises(ValueError, match=r"node .loop. runs its body 1,000,000,000,000 times: more than 1,000,000"):
        count_ops(_loop(trips=10**12))
    # the carried value doubles each trip (Concat), so its shape is not the one that went in: the body
    # keeps no seeded shape, and the Relu that needs one names itself
    grow = [helper.make_node("Concat", ["h_in", "h_in"], ["h_cat"], axis=1),
            helper.make_node("Relu", ["h_cat"], ["h_out"], name="grow_relu")]
    with pytest.raises(ValueError, match="grow_relu"):
        count_ops(_loop(trips=3, body_nodes=grow))


def test_scan_runs_its_body_once_per_step_of_the_sequence():
    """``Scan`` over x (4, 3) with the state h (8,): ``h' = tanh(x_t @ Wx + h @ Wh)``, 4 steps."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "Wx"], ["a"]), helper.make_node("MatMul", ["h", "Wh"], ["b"]),
         helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Tanh", ["c"], ["h2"]),
         helper.make_node("Identity", ["h2"], ["o"])],
        "step", [vi("h", F, None), vi("x_t", F, None)], [vi("h2", F, None), vi("o", F, None)])
    scan = helper.make_node("Scan", ["h0", "x"], ["h_last", "y"], body=body, num_scan_inputs=1, name="scan")
    proto = _model([scan], [numpy_helper.from_array(np.ones((3, 8), np.float32), "Wx"),
                            numpy_helper.from_array(np.ones((8, 8), np.float32), "Wh"),
                            numpy_helper.from_array(np.zeros(8, np.float32), "h0")], x_shape=(4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counted = count_ops(proto)
    # per step: x_t @ Wx 8 x 3 = 24 MACs, h @ Wh 8 x 8 = 64: 88 MACs (176 FLOPs), Add 8, Tanh 8: 192 FLOPs;
    # 4 steps (x's length along axis 0): 352 MACs, 768 FLOPs
    assert (counted.macs, counted.flops, counted.untracked) == (352, 768, {})
    assert counted.by_operator["Tanh"].calls == 4


def _if(flag=None):
    """``If``: then ``x @ W`` (64 MACs, 128 FLOPs), else ``x * 2`` (8 FLOPs); the condition a constant, or
    ``sum(x) > 0`` (ReduceSum of 8: 8 FLOPs; Greater free)."""
    then = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["t"])], "then", [], [vi("t", F, None)])
    other = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["e"])], "else", [], [vi("e", F, None)])
    nodes, initializers = [], [W, _const("two", 2.0, np.float32)]
    if flag is None:
        nodes += [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                  helper.make_node("Greater", ["s", "zero"], ["flag"])]
        initializers.append(_const("zero", 0.0, np.float32))
    else:
        initializers.append(_const("flag", flag, np.bool_))
    nodes.append(helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other, name="choose"))
    return _model(nodes, initializers)


def test_an_if_takes_a_constant_conditions_branch_else_the_costlier_and_says_so():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        then, other = count_ops(_if(True)), count_ops(_if(False))
    assert (then.macs, then.flops) == (64, 128)
    assert (other.macs, other.flops) == (0, 8)
    with pytest.warns(UserWarning, match="costlier branch"):
        either = count_ops(_if(), bytes_moved=True)
    # ReduceSum 8 + the MatMul branch 128: 64 MACs, 136 FLOPs, an upper bound said in untracked
    assert (either.macs, either.flops) == (64, 136)
    assert either.untracked == {"If (condition not static: costlier branch counted)": 1}
    assert [r.op for r in either.records] == ["ReduceSum", "Greater", "MatMul"]


@pytest.mark.slow  # (a dynamo export: seconds)
def test_torch_cond_exported_counts_its_costlier_branch():
    torch = pytest.importorskip("torch")

    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: self.fc(x), lambda x: x * 2.0, (x,))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's own notes
        proto = torch.onnx.export(Branchy(), (torch.randn(1, 8),), dynamo=True).model_proto
    assert [n.op_type for n in proto.graph.node] == ["ReduceSum", "Greater", "If"]
    with pytest.warns(UserWarning, match="costlier branch"):
        counted = count_ops(proto)
    # ReduceSum of 8 (8 FLOPs); the Linear branch: 8 x 8 = 64 MACs, 128 FLOPs + 8 bias = 136: 64 MACs, 144 FLOPs
    assert (counted.macs, counted.flops) == (64, 144)
