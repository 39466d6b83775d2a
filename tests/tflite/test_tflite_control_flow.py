"""Control flow in ``.tflite`` files: a ``WHILE``'s condition and body subgraphs are counted as they run,
trip-count times when the file fixes it (``formulas.trip_count``), else the body once, and said; an
``IF`` its constant condition's branch, else the costlier one, and said; a ``CALL_ONCE`` its init subgraph."""
from __future__ import annotations

import warnings

import pytest

from tests.tflite.conftest import convert, keras

from deeplite_like.backends.tflite import count_ops  # noqa: E402
from deeplite_like.backends.tflite.formulas import trip_count  # noqa: E402
from deeplite_like.backends.tflite.graph import load_model  # noqa: E402

L = keras.layers


class Counted(L.Layer):
    """``fori_loop(0, 5, h -> h @ W)`` on (1, 8) with W (8, 8)."""

    def build(self, shape):
        self.w = self.add_weight(shape=(8, 8), initializer="ones")

    def call(self, x):
        return keras.ops.fori_loop(0, 5, lambda i, h: keras.ops.matmul(h, self.w), x)


class Open(L.Layer):
    """``while_loop(sum(h) < 100, h -> h * 2)``: how often depends on the data."""

    def call(self, x):
        return keras.ops.while_loop(lambda h: keras.ops.sum(h) < 100.0, lambda h: (h * 2.0,), (x,))[0]


@pytest.fixture(scope="module")
def counted_file():
    return convert(keras.Sequential([keras.Input((8,)), Counted(name="loop")]))


@pytest.mark.slow  # (a conversion: about 2 s)
def test_a_counted_loop_runs_its_body_trip_count_times_as_keras_counts_it(counted_file):
    from deeplite_like.backends.keras.counting import count_ops as count_keras

    model = load_model(counted_file)
    assert model.subgraphs == 3 and [op.op for op in model.ops] == ["WHILE"]
    # the condition compares the counter (entering as the constant 0) with the constant 5; the body adds 1
    assert trip_count(model, model.ops[0]) == 5
    counted = count_ops(counted_file, bytes_moved=True)
    # 5 x (1x8 @ 8x8) = 5 x 64 = 320 MACs, 640 FLOPs; the int32 counter and comparison are free
    assert (counted.macs, counted.flops, counted.untracked) == (320, 640, {})
    live = count_keras(keras.Sequential([keras.Input((8,)), Counted(name="loop")]), (1, 8))
    assert (counted.macs, counted.flops) == (live.macs, live.flops)
    # in running order: LESS, then ADD and FULLY_CONNECTED, five times, then the last LESS: 16 records
    ops = [r.op for r in counted.records]
    assert ops == ["LESS", "ADD", "FULLY_CONNECTED"] * 5 + ["LESS"]
    # each FULLY_CONNECTED reads h (1x8 float32, 32 bytes) and W (8x8, 256) and writes h (32)
    assert {r.bytes for r in counted.records if r.op == "FULLY_CONNECTED"} == {320}


@pytest.mark.slow
def test_a_loop_whose_trip_count_depends_on_the_data_counts_its_body_once_and_says_so():
    data = convert(keras.Sequential([keras.Input((8,)), Open(name="open")]))
    model = load_model(data)
    loops = [op for op in model.ops if op.op == "WHILE"]
    assert loops and trip_count(model, loops[0]) is None
    with pytest.warns(UserWarning, match="trip count not static"):
        counted = count_ops(data)
    # the condition and the body once (a lower bound, said in untracked): SUM of 8 elements (8 FLOPs, the
    # reduction convention), LESS (a comparison: free), MUL h * 2.0 on 8 elements (8): 16 FLOPs
    assert counted.untracked == {"WHILE (trip count not static: body counted once)": 1}
    assert counted.flops == 16


@pytest.mark.slow  # (three conversions: about 6 s)
def test_keras_recurrent_layers_loop_over_time_and_count_what_keras_counts():
    """Keras' LSTM / SimpleRNN / GRU convert to a ``WHILE`` whose condition is ``step < 5 and time < 5``
    (two comparisons joined by LOGICAL_AND): 5 trips. Input (1, 5, 3), 4 units; biases of ones (an
    all-zero bias is dropped by the converter's arithmetic simplification, and its adds with it)."""
    from deeplite_like.backends.keras.counting import count_ops as count_keras

    def both(layer):
        live = keras.Sequential([keras.Input((5, 3), batch_size=1), layer])
        data = convert(live)
        model = load_model(data)
        loop = next(op for op in model.ops if op.op == "WHILE")
        assert [op.op for op in model.graphs[loop.option("condSubgraphIndex")].ops] == ["LESS", "LESS", "LOGICAL_AND"]
        assert trip_count(model, loop) == 5
        return count_ops(data), count_keras(live, (1, 5, 3))

    lstm, keras_lstm = both(L.LSTM(4, bias_initializer="ones", unit_forget_bias=False))
    # per step: x @ W (3 x 16 = 48 MACs) + h @ U (4 x 16 = 64): 112; x 5 steps = 560 MACs, 1,120 FLOPs;
    # + per step: bias 16, xW + hU 16, 3 sigmoids 3 x 4 x 4 = 48, tanh(g) 4, c = f*c + i*g 12, tanh(c) 4,
    # o * tanh(c) 4 = 104; x 5 = 520: 1,640 FLOPs, as Keras counts
    assert (lstm.macs, lstm.flops, lstm.untracked) == (560, 1640, {})
    assert (keras_lstm.macs, keras_lstm.flops) == (560, 1640)
    by_op = {name: s.flops for name, s in lstm.by_operator.items()}
    # ADD per step: bias 16 + xW + hU 16 + c's sum 4 = 36, x 5; LOGISTIC 4 per element, 12 elements x 5
    assert (by_op["FULLY_CONNECTED"], by_op["ADD"], by_op["LOGISTIC"], by_op["MUL"], by_op["TANH"]) == (1120, 180, 240, 60, 40)

    rnn, keras_rnn = both(L.SimpleRNN(4, bias_initializer="ones"))
    # per step: 3 x 4 + 4 x 4 = 28 MACs: 140; FLOPs 2 x 140 + (bias 4 + add 4 + tanh 4) x 5 = 340
    assert (rnn.macs, rnn.flops) == (keras_rnn.macs, keras_rnn.flops) == (140, 340)

    gru, keras_gru = both(L.GRU(4, bias_initializer="ones"))
    # per step: 3 x 12 + 4 x 12 = 84 MACs: 420, as Keras. FLOPs: the converter's GRU has one more
    # per-element op per unit than Keras' formula (the SUB of 1 - z): 4 x 5 = 20 more
    assert gru.macs == keras_gru.macs == 420
    assert gru.flops - keras_gru.flops == 20


class Branch(L.Layer):
    """``cond(sum(x) > 0, x @ W, x * 2)`` on (1, 8), W (8, 8)."""

    def build(self, shape):
        self.w = self.add_weight(shape=(8, 8), initializer="ones")

    def call(self, x):
        return keras.ops.cond(keras.ops.sum(x) > 0, lambda: keras.ops.matmul(x, self.w), lambda: x * 2.0)


@pytest.fixture(scope="module")
def branch_file():
    return convert(keras.Sequential([keras.Input((8,), batch_size=1), Branch(name="branch")]))


def _repacked(data: bytes, edit) -> bytes:
    """``data`` read with the schema's object API, changed by ``edit(model, schema)``, packed again."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    edit(model, schema)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _branches(data: bytes) -> dict[str, int]:
    """``{"then": i, "else": j}`` and which of them holds the FULLY_CONNECTED."""
    model = load_model(data)
    op = next(op for op in model.ops if op.op == "IF")
    then, other = op.option("thenSubgraphIndex"), op.option("elseSubgraphIndex")
    return {"then": then, "else": other,
            "fc": then if [o.op for o in model.graphs[then].ops] == ["FULLY_CONNECTED"] else other}


@pytest.mark.slow
def test_an_if_on_the_data_counts_its_costlier_branch_and_says_so(branch_file):
    from deeplite_like.backends.keras.counting import count_ops as count_keras

    with pytest.warns(UserWarning, match="condition not static"):
        counted = count_ops(branch_file, bytes_moved=True)
    # SUM of 8 (8 FLOPs), GREATER (free), then the costlier branch: x @ W, 8 x 8 = 64 MACs, 128 FLOPs
    # (the other, x * 2, is 8 FLOPs): 64 MACs, 136 FLOPs, an upper bound said in untracked
    assert (counted.macs, counted.flops) == (64, 136)
    assert counted.untracked == {"IF (condition not static: costlier branch counted)": 1}
    assert [r.op for r in counted.records] == ["SUM", "GREATER", "FULLY_CONNECTED"]
    live = count_keras(keras.Sequential([keras.Input((8,), batch_size=1), Branch(name="branch")]), (1, 8))
    assert (live.macs, live.flops) == (64, 136)


@pytest.mark.slow
def test_an_if_on_a_constant_takes_its_branch_and_call_once_runs_its_init_subgraph(branch_file):
    """The file's IF condition replaced by a constant BOOL tensor (false, then true); a CALL_ONCE added
    in front of the main subgraph, its init subgraph the FULLY_CONNECTED branch."""
    branches = _branches(branch_file)

    def constant_condition(value: bool):
        def edit(model, schema):
            main = model.subgraphs[0]
            buffer = schema.BufferT()
            buffer.data = [int(value)]
            model.buffers.append(buffer)
            tensor = schema.TensorT()
            tensor.shape, tensor.type, tensor.buffer, tensor.name = [], schema.TensorType.BOOL, len(model.buffers) - 1, b"flag"
            main.tensors.append(tensor)
            for op in main.operators:
                if op.builtinOptionsType == schema.BuiltinOptions.IfOptions:
                    op.inputs[0] = len(main.tensors) - 1
        return edit

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing untracked, nothing said
        false = count_ops(_repacked(branch_file, constant_condition(False)))
        true = count_ops(_repacked(branch_file, constant_condition(True)))
    # SUM 8 FLOPs (still in the file, now unused) + the branch taken: x * 2 is 8 FLOPs; x @ W 64 MACs, 128 FLOPs
    taken = {"then": true, "else": false}
    fc_side = "then" if branches["fc"] == branches["then"] else "else"
    mul_side = "else" if fc_side == "then" else "then"
    assert (taken[fc_side].macs, taken[fc_side].flops, taken[fc_side].untracked) == (64, 136, {})
    assert (taken[mul_side].macs, taken[mul_side].flops, taken[mul_side].untracked) == (0, 16, {})

    def call_once(init: int):
        def edit(model, schema):
            code = schema.OperatorCodeT()
            code.builtinCode, code.deprecatedBuiltinCode = schema.BuiltinOperator.CALL_ONCE, 127  # (> 127: the placeholder)
            model.operatorCodes.append(code)
            op = schema.OperatorT()
            op.opcodeIndex, op.inputs, op.outputs = len(model.operatorCodes) - 1, [], []
            op.builtinOptionsType = schema.BuiltinOptions.CallOnceOptions
            op.builtinOptions = schema.CallOnceOptionsT()
            op.builtinOptions.initSubgraphIndex = init
            model.subgraphs[0].operators.insert(0, op)
        return edit

    with pytest.warns(UserWarning, match="condition not static"):
        once = count_ops(_repacked(branch_file, call_once(branches["fc"])))
    # the init subgraph once (64 MACs, 128 FLOPs) + the model as before (64, 136)
    assert (once.macs, once.flops) == (128, 264)
    assert once.by_operator["CALL_ONCE"].calls == 1
    with pytest.warns(UserWarning, match=r"CALL_ONCE \(1 op\)"):
        broken = count_ops(_repacked(branch_file, call_once(99)))
    # a subgraph index the file does not have: the CALL_ONCE is untracked by its name, the rest counted
    assert broken.untracked == {"CALL_ONCE": 1, "IF (condition not static: costlier branch counted)": 1}
    assert (broken.macs, broken.flops) == (64, 136)


@pytest.mark.slow
def test_a_trip_count_no_model_has_is_refused_by_the_loop_name(counted_file):
    """The counted loop's bound 5 rewritten to 10^9: 10^9 x 3 operators is past the 10^6 operator runs a count
    allows, refused before any is counted (a damaged or adversarial file never hangs the count)."""
    def edit(model, schema):
        loop = next(op for op in model.subgraphs[0].operators if op.builtinOptionsType == schema.BuiltinOptions.WhileOptions)
        cond = model.subgraphs[loop.builtinOptions.condSubgraphIndex]
        for tensor in cond.tensors:
            if model.buffers[tensor.buffer].data is not None and list(model.buffers[tensor.buffer].data) == [5, 0, 0, 0]:
                model.buffers[tensor.buffer].data = list((10**9).to_bytes(4, "little"))

    with pytest.raises(ValueError, match=r"WHILE#0 .* runs its body 1,000,000,000 times: more than 1,000,000"):
        count_ops(_repacked(counted_file, edit))
