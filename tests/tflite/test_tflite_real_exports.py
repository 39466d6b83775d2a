"""Real ``.tflite`` files, the kinds issue 25's hidden set holds, built offline: a MobileNetV2 (alpha 0.35,
96 x 96, ``weights=None``: no download) converted float and full-int8, and the fused recurrent kernels
(``UNIDIRECTIONAL_SEQUENCE_LSTM`` / ``_RNN``, ``BIDIRECTIONAL_SEQUENCE_LSTM`` / ``_RNN``, the one-step
``LSTM`` / ``RNN``).

The recurrent kernels: TF 2.21's converter turns a Keras 3 ``LSTM`` into a ``WHILE`` loop
(tests/tflite/test_tflite_control_flow.py); it fuses only Keras 2 layers (``tf.api_implements`` ``lstm_*``)
and ``tf.function(experimental_implements=...)`` composites. So the kernels are written here with LiteRT's
schema object API (``ai_edge_litert.schema_py_generated``) from a Keras layer's weights, and the LiteRT
interpreter runs each file against the Keras layer: the outputs agree, so the file is that layer, and its
count must be what Keras counts.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.tflite.conftest import convert

keras = pytest.importorskip("keras")
flatbuffers = pytest.importorskip("flatbuffers")
from ai_edge_litert import schema_py_generated as schema  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402

from deeplite_like.backends.keras import count_ops as count_keras  # noqa: E402
from deeplite_like.backends.tflite import count_ops  # noqa: E402
from deeplite_like.backends.tflite.compute import weight_stats  # noqa: E402
from deeplite_like.backends.tflite.graph import load_model  # noqa: E402

L = keras.layers


@pytest.fixture(scope="module")
def mobilenet():
    """MobileNetV2(alpha 0.35, 96 x 96) with trained-looking vectors (every BN statistic and bias random,
    variances positive: no all-zero bias a converter may drop), its float and int8 files."""
    model = keras.applications.MobileNetV2(weights=None, alpha=0.35, input_shape=(96, 96, 3))
    rng = np.random.default_rng(0)
    model.set_weights([w if w.ndim > 1 else rng.uniform(0.5, 1.5, w.shape).astype(w.dtype) for w in model.get_weights()])
    return model, convert(model), convert(model, int8=True)


@pytest.mark.slow  # two conversions of MobileNetV2: about 25 s
def test_mobilenet_v2_float_and_int8_count_the_keras_models_macs(mobilenet):
    model, float_file, int8_file = mobilenet
    live = count_keras(model, np.zeros((1, 96, 96, 3), np.float32))
    counted = {"float": count_ops(float_file), "int8": count_ops(int8_file)}
    # first conv by hand: 3 x 3 x 3 -> 16 filters (32 x 0.35 rounded to 8), stride 2: 48 x 48 x 16 = 36,864
    # outputs x 27 = 995,328 MACs
    first = {name: s.macs for name, s in live.by_module.items() if name.split(".")[-1] == "Conv1"}
    assert list(first.values()) == [995_328]
    for form, count in counted.items():
        assert (form, count.macs, count.untracked) == (form, live.macs, {})
    assert counted["float"].flops == counted["int8"].flops
    # the converter folds each BatchNormalization into the conv before it: Keras prices a BN (running
    # statistics) 4N + 2C, the folded conv's bias add N (its fused ReLU6 costs what Keras' ReLU does):
    # 3N + 2C fewer FLOPs per BN
    folded = sum(3 * int(np.prod(layer.output.shape[1:])) + 2 * layer.output.shape[-1]
                 for layer in model.layers if isinstance(layer, L.BatchNormalization))
    assert live.flops - counted["float"].flops == folded

    # the int8 file's first conv at its stored dtypes, by hand: a 16 x 3 x 3 x 3 int8 filter (432 B) with
    # per-channel quantization (16 float32 scales 64 B + 16 int64 zero points 128 B); an int32 bias of 16
    # (64 B) with its own 16 scales and zero points (192 B)
    tflite = load_model(int8_file)
    conv = next(op for op in tflite.ops if op.op == "CONV_2D")
    weights, bias = conv.input(1), conv.input(2)
    assert (weights.dtype, weights.nbytes, weights.quantization_bytes) == ("INT8", 432, 16 * 4 + 16 * 8)
    assert (bias.dtype, bias.nbytes, bias.quantization_bytes) == ("INT32", 64, 16 * 4 + 16 * 8)
    stats = weight_stats(tflite)
    assert stats.by_dtype["INT8"]["params"] == stats.by_dtype["INT8"]["bytes"]  # 1 byte a weight
    assert stats.params == weight_stats(load_model(float_file)).params  # the same tensors, int8 instead of float32


@pytest.mark.slow  # two more conversions: about 25 s
def test_mobilenet_v2_dynamic_range_and_float16_files_count_the_same(mobilenet):
    """The two other forms a converter ships: dynamic-range (int8 weights, float activations: the kernels
    dequantize on the fly) and float16 weights (a DEQUANTIZE to float32 before each kernel, free)."""
    import tensorflow as tf

    model, float_file, _ = mobilenet
    reference = count_ops(float_file)
    for form in ("dynamic-range", "float16"):
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if form == "float16":
            converter.target_spec.supported_types = [tf.float16]
        counted = count_ops(converter.convert())
        assert (form, counted.macs, counted.flops, counted.untracked) == (form, reference.macs, reference.flops, {})


def recurrent_file(layer, batch: int, steps: int, features: int, one_step: bool = False) -> bytes:
    """A ``.tflite`` holding a built Keras ``LSTM`` / ``SimpleRNN`` (``return_sequences=True``), or a
    ``Bidirectional`` of one, as one fused kernel, written with the schema's object API. ``one_step``:
    the one-step ``LSTM`` / ``RNN`` kernel over a ``[batch, features]`` input (steps must be 1)."""
    model, graph = schema.ModelT(), schema.SubGraphT()
    model.version, model.buffers, model.operatorCodes, model.subgraphs = 3, [schema.BufferT()], [], [graph]
    graph.tensors, graph.operators = [], []

    def tensor(name, shape, data=None, variable=False) -> int:
        t = schema.TensorT()
        t.name, t.shape, t.type, t.isVariable, t.buffer = name, list(shape), schema.TensorType.FLOAT32, variable, 0
        if data is not None:
            buffer = schema.BufferT()
            buffer.data = np.ascontiguousarray(data, np.float32).tobytes()
            model.buffers.append(buffer)
            t.buffer = len(model.buffers) - 1
        graph.tensors.append(t)
        return len(graph.tensors) - 1

    def lstm_inputs(cell, prefix: str) -> list[int]:  # Keras' gate order i, f, c, o; TFLite's [H, I] per gate
        kernel, recurrent, bias = (w.numpy() for w in cell.weights)
        h = cell.units
        gate = lambda m, g: m[:, g * h:(g + 1) * h].T  # noqa: E731
        ids = [tensor(f"{prefix}/w{g}", (h, kernel.shape[0]), gate(kernel, g)) for g in range(4)]
        ids += [tensor(f"{prefix}/r{g}", (h, h), gate(recurrent, g)) for g in range(4)]
        ids += [-1, -1, -1]  # no peepholes
        ids += [tensor(f"{prefix}/b{g}", (h,), bias[g * h:(g + 1) * h]) for g in range(4)]
        return ids + [-1, -1]  # no projection

    def rnn_inputs(cell, prefix: str) -> list[int]:
        kernel, recurrent, bias = (w.numpy() for w in cell.weights)
        h = cell.units
        return [tensor(f"{prefix}/w", (h, kernel.shape[0]), kernel.T), tensor(f"{prefix}/r", (h, h), recurrent.T),
                tensor(f"{prefix}/b", (h,), bias), tensor(f"{prefix}/state", (batch, h), variable=True)]

    bidi = isinstance(layer, L.Bidirectional)
    inner = layer.forward_layer if bidi else layer
    h, is_lstm = inner.cell.units, isinstance(inner, L.LSTM)
    # BIDIRECTIONAL_SEQUENCE_LSTM is written time-major (its default): in LiteRT 2.3 its batch-major form
    # with merged outputs reads memory it never wrote (the second sample's backward half varies run to run)
    time_major = bidi and is_lstm
    x = tensor("input", (batch, features) if one_step else (steps, batch, features) if time_major else (batch, steps, features))
    out = tensor("output", (batch, h) if one_step else (steps, batch, 2 * h) if time_major else (batch, steps, 2 * h if bidi else h))
    op_name, options = {
        (True, False, False): ("UNIDIRECTIONAL_SEQUENCE_LSTM", schema.UnidirectionalSequenceLSTMOptionsT()),
        (True, True, False): ("BIDIRECTIONAL_SEQUENCE_LSTM", schema.BidirectionalSequenceLSTMOptionsT()),
        (False, False, False): ("UNIDIRECTIONAL_SEQUENCE_RNN", schema.SequenceRNNOptionsT()),
        (False, True, False): ("BIDIRECTIONAL_SEQUENCE_RNN", schema.BidirectionalSequenceRNNOptionsT()),
        (True, False, True): ("LSTM", schema.LSTMOptionsT()),
        (False, False, True): ("RNN", schema.RNNOptionsT())}[(is_lstm, bidi, one_step)]
    if bidi:
        options.mergeOutputs = True
    if not one_step:
        options.timeMajor = time_major
    options.fusedActivationFunction = schema.ActivationFunctionType.TANH
    if is_lstm:
        state = lambda p: [tensor(f"{p}/h", (batch, h), variable=True), tensor(f"{p}/c", (batch, h), variable=True)]  # noqa: E731
        if bidi:
            fw, bw = lstm_inputs(layer.forward_layer.cell, "fw"), lstm_inputs(layer.backward_layer.cell, "bw")
            inputs = [x] + fw + bw + state("fw") + state("bw") + [-1] * 9  # no aux input
        else:
            inputs = [x] + lstm_inputs(inner.cell, "lstm") + state("lstm") + [-1] * 4  # no layer norm
    elif bidi:
        inputs = [x] + rnn_inputs(layer.forward_layer.cell, "fw") + rnn_inputs(layer.backward_layer.cell, "bw") + [-1] * 3
    else:
        inputs = [x] + rnn_inputs(inner.cell, "rnn")
    code = schema.OperatorCodeT()
    code.builtinCode = getattr(schema.BuiltinOperator, op_name)
    code.deprecatedBuiltinCode, code.version = min(code.builtinCode, 127), 1
    model.operatorCodes.append(code)
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, inputs, [out]
    op.builtinOptionsType = getattr(schema.BuiltinOptions, type(options).__name__[:-1])
    op.builtinOptions = options
    graph.operators.append(op)
    graph.inputs, graph.outputs = [x], [out]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def run(data: bytes, x: np.ndarray) -> np.ndarray:
    interpreter = Interpreter(model_content=data)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


BATCH, STEPS, FEATURES, UNITS = 2, 5, 3, 4
# By hand, rows = batch x steps = 10, I = 3, H = 4.
# LSTM: 10 x 4H x (I + H) = 10 x 16 x 7 = 1,120 MACs; FLOPs 2,240 + bias 10 x 16 + gate math 10 x 4 x 22
#   = 3,280. SimpleRNN: 10 x 4 x 7 = 280 MACs; FLOPs 560 + bias 40 + (add + tanh) 10 x 4 x 2 = 680.
#   Bidirectional: twice each.
RECURRENT = [("UNIDIRECTIONAL_SEQUENCE_LSTM", lambda: L.LSTM(UNITS, return_sequences=True, bias_initializer="random_normal"), 1_120, 3_280),
             ("UNIDIRECTIONAL_SEQUENCE_RNN", lambda: L.SimpleRNN(UNITS, return_sequences=True, bias_initializer="random_normal"), 280, 680),
             ("BIDIRECTIONAL_SEQUENCE_LSTM", lambda: L.Bidirectional(L.LSTM(UNITS, return_sequences=True, bias_initializer="random_normal")),
              2 * 1_120, 2 * 3_280),
             ("BIDIRECTIONAL_SEQUENCE_RNN", lambda: L.Bidirectional(L.SimpleRNN(UNITS, return_sequences=True, bias_initializer="random_normal")),
              2 * 280, 2 * 680)]


@pytest.mark.parametrize("op_name, make, macs, flops", RECURRENT, ids=[r[0] for r in RECURRENT])
def test_fused_recurrent_kernels_compute_and_count_the_keras_layer(op_name, make, macs, flops):
    keras.utils.set_random_seed(0)
    layer = make()
    live = keras.Sequential([keras.Input((STEPS, FEATURES), batch_size=BATCH), layer])
    x = np.random.default_rng(0).standard_normal((BATCH, STEPS, FEATURES)).astype(np.float32)
    data = recurrent_file(layer, BATCH, STEPS, FEATURES)
    assert [op.op for op in load_model(data).ops] == [op_name]
    swap = (lambda a: a.transpose(1, 0, 2).copy()) if op_name == "BIDIRECTIONAL_SEQUENCE_LSTM" else (lambda a: a)
    np.testing.assert_allclose(swap(run(data, swap(x))), np.asarray(live(x)), atol=1e-5)  # the file is the Keras layer
    # the backend's own run (``TFLiteModel.predict``), twice: the state tensors carry nothing over
    model = load_model(data)
    for _ in range(2):
        np.testing.assert_allclose(swap(model.predict(swap(x))), np.asarray(live(x)), atol=1e-5)
    counted, keras_count = count_ops(data), count_keras(live, x)
    assert (counted.macs, counted.flops, counted.untracked) == (macs, flops, {})
    assert (keras_count.macs, keras_count.flops) == (macs, flops)


@pytest.mark.parametrize("cell", ["LSTM", "RNN"])
def test_one_step_kernels_count_one_step_of_the_layer(cell):
    keras.utils.set_random_seed(0)
    layer = (L.LSTM if cell == "LSTM" else L.SimpleRNN)(UNITS, bias_initializer="random_normal")
    live = keras.Sequential([keras.Input((1, FEATURES), batch_size=BATCH), layer])
    x = np.random.default_rng(0).standard_normal((BATCH, 1, FEATURES)).astype(np.float32)
    data = recurrent_file(layer, BATCH, 1, FEATURES, one_step=True)
    assert [op.op for op in load_model(data).ops] == [cell]
    np.testing.assert_allclose(run(data, x[:, 0]), np.asarray(live(x)), atol=1e-5)
    # one step of the sequences above (rows = batch 2, a fifth of 10): 224 / 656 and 56 / 136
    expected = (224, 656) if cell == "LSTM" else (56, 136)
    counted = count_ops(data)
    assert (counted.macs, counted.flops) == expected == (count_keras(live, x).macs, count_keras(live, x).flops)


def _edited(data: bytes, edit) -> bytes:
    """``data`` read into the schema's object API, changed by ``edit(model, graph, op, add_tensor)``, packed."""
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    graph = model.subgraphs[0]

    def add_tensor(name: str, shape) -> int:
        buffer = schema.BufferT()
        buffer.data = np.ones(shape, np.float32).tobytes()
        model.buffers.append(buffer)
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shape), schema.TensorType.FLOAT32, len(model.buffers) - 1
        graph.tensors.append(t)
        return len(graph.tensors) - 1

    op = graph.operators[0]
    op.inputs, graph.inputs = [int(i) for i in op.inputs], [int(i) for i in graph.inputs]  # (read-only arrays)
    edit(model, graph, op, add_tensor)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def test_lstm_kernel_variants_by_hand():
    """Peepholes, a projection, CIFG, layer norm, an aux input: counted only (rows 10, I 3, H 4; the plain
    LSTM is 1,120 MACs / 3,280 FLOPs above)."""
    keras.utils.set_random_seed(0)
    layer = L.LSTM(UNITS, return_sequences=True)
    keras.Sequential([keras.Input((STEPS, FEATURES), batch_size=BATCH), layer])
    plain = recurrent_file(layer, BATCH, STEPS, FEATURES)

    def peepholes(model, graph, op, add):  # cell-to-gate weights [H] at 9-11: + 2 x 10 x 4 x 3 = 240 FLOPs
        op.inputs[9:12] = [add(f"peephole{g}", (UNITS,)) for g in range(3)]
    assert (count_ops(_edited(plain, peepholes)).macs, count_ops(_edited(plain, peepholes)).flops) == (1_120, 3_520)

    def projection(model, graph, op, add):  # P = 2: recurrent K = I + P = 5; 10 x 16 x 5 + 10 x 4 x 2 = 880 MACs
        op.inputs[16], op.inputs[17] = add("projection", (2, UNITS)), add("projection_bias", (2,))
    counted = count_ops(_edited(plain, projection))
    # FLOPs 1,760 + gate biases 160 + gate math 10 x 4 x 22 = 880 + projection bias 10 x 2 = 20: 2,820
    assert (counted.macs, counted.flops) == (880, 2_820)

    def cifg(model, graph, op, add):  # no input gate (weights 1, 5, bias 12): G = 3, i = 1 - f
        op.inputs[1] = op.inputs[5] = op.inputs[12] = -1
    counted = count_ops(_edited(plain, cifg))
    # 10 x 12 x 7 = 840 MACs; FLOPs 1,680 + biases 10 x 12 = 120 + gate math 10 x 4 x (3 + 8 + 2 + 4 + 1 = 18) = 720
    assert (counted.macs, counted.flops) == (840, 2_520)

    def layer_norm(model, graph, op, add):  # 4 gates' coefficients at 20-23: + 10 x (7 x 4 + 4) x 4 = 1,280
        op.inputs[20:24] = [add(f"norm{g}", (UNITS,)) for g in range(4)]
    assert count_ops(_edited(plain, layer_norm)).flops == 3_280 + 1_280

    bidi = L.Bidirectional(L.LSTM(UNITS, return_sequences=True))
    keras.Sequential([keras.Input((STEPS, FEATURES), batch_size=BATCH), bidi])

    def aux_input(model, graph, op, add):  # an aux input of 6 features: + 10 x 16 x 6 = 960 MACs per direction
        aux = schema.TensorT()
        aux.name, aux.shape, aux.type, aux.buffer = "aux", [STEPS, BATCH, 6], schema.TensorType.FLOAT32, 0
        graph.tensors.append(aux)
        op.inputs[39] = len(graph.tensors) - 1
        op.inputs[40:48] = [add(f"aux_w{g}", (UNITS, 6)) for g in range(8)]
        graph.inputs.append(op.inputs[39])
    counted = count_ops(_edited(recurrent_file(bidi, BATCH, STEPS, FEATURES), aux_input))
    assert (counted.macs, counted.flops) == (2 * (1_120 + 960), 2 * (3_280 + 2 * 960))

    bidi_rnn = L.Bidirectional(L.SimpleRNN(UNITS, return_sequences=True))
    keras.Sequential([keras.Input((STEPS, FEATURES), batch_size=BATCH), bidi_rnn])

    def rnn_aux_input(model, graph, op, add):  # aux input 9, its weights [H, 6] at 10, 11: + 10 x 4 x 6 = 240 MACs
        aux = schema.TensorT()
        aux.name, aux.shape, aux.type, aux.buffer = "aux", [BATCH, STEPS, 6], schema.TensorType.FLOAT32, 0
        graph.tensors.append(aux)
        op.inputs[9:12] = [len(graph.tensors) - 1, add("fw_aux_w", (UNITS, 6)), add("bw_aux_w", (UNITS, 6))]
    counted = count_ops(_edited(recurrent_file(bidi_rnn, BATCH, STEPS, FEATURES), rnn_aux_input))
    assert (counted.macs, counted.flops) == (2 * (280 + 240), 2 * (680 + 2 * 240))

    def basic(model, graph, op, add):  # the BASIC one-step kernel (one concatenated weight) is refused by name
        op.builtinOptions.kernelType = 1
    one_step = L.LSTM(UNITS)
    keras.Sequential([keras.Input((1, FEATURES), batch_size=BATCH), one_step])
    with pytest.raises(ValueError, match="BASIC LSTM kernel"):
        count_ops(_edited(recurrent_file(one_step, BATCH, 1, FEATURES, one_step=True), basic))
