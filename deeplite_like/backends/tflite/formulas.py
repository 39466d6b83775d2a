"""The TFLite formula table: one pure function per builtin op family, from an operator to a ``Cost``.

The conventions are the other backends' (docs/conventions.rst), so a ``.tflite`` file counts what
the Keras model it was converted from counts:

* contractions (``CONV_2D``, ``DEPTHWISE_CONV_2D``, ``FULLY_CONNECTED``, ``BATCH_MATMUL``,
  ``TRANSPOSE_CONV``) give MACs; FLOPs = 2 x MACs + 1 per output for a bias;
* a fused activation (``fused_activation_function`` of conv, FC, pooling, add/sub/mul/div) costs
  what the separate activation op costs, per output: ``RELU`` and ``TANH`` 1, ``RELU6`` and
  ``RELU_N1_TO_1`` 2 (a clip); so a converter that fuses ``Conv2D + ReLU`` counts what Keras counts
  for the two layers;
* a quantized op (int8 / uint8 / int16 tensors with a scale) counts as its float twin: the
  integer arithmetic does the same multiply-accumulates; ``QUANTIZE`` / ``DEQUANTIZE`` (also int8
  requantization) are free, as ONNX's ``QuantizeLinear`` / ``DequantizeLinear``;
* per-element ops are priced on real-valued outputs only (float, or integer with a scale): the
  int32 shape arithmetic converters emit (``SHAPE`` -> ``STRIDED_SLICE`` -> ``PACK``) is free;
* the fused recurrent kernels (``UNIDIRECTIONAL_SEQUENCE_LSTM`` / ``_RNN``, ``BIDIRECTIONAL_SEQUENCE_LSTM``
  / ``_RNN``, the one-step ``LSTM`` / ``RNN``) count as the Keras / torch recurrent layers
  (docs/conventions.rst, rnn row: LSTM gate math 22, RNN 2);
* data movement is in ``FREE``; an op in neither table (custom ops) is untracked:
  ``counting.count_ops`` names it, never a silent zero.

Counting a file: the pass over its operators:

    ``count_ops`` for ``.tflite`` files: every operator priced by the formula table, per op type and per module.

    One pass over the main subgraph's operators in execution order: each op's builtin name finds its
    formula, or marks it free, or untracked (counted 0, listed in ``OpCount.untracked`` and warned about
    once, by name and count; custom ops are keyed ``CUSTOM:code``). Control flow runs its subgraphs in
    its place (``_run``): a ``WHILE`` its condition and body as many times as its trip count
    (``trip_count``: the converter's counted loops, Keras' LSTM / GRU included); one whose trip count
    the file does not fix counts its body once and says so; an ``IF`` the branch a constant condition
    takes, else the costlier branch, and says so; a ``CALL_ONCE`` its init subgraph once.

    Modules come from the scopes of the op's first output tensor's name: the converter names it
    ``lenet5_keras_1/fc1_1/MatMul;lenet5_keras_1/relu3_1/Relu`` (fused ops joined by ``;``); the first
    name's scopes are the module, ``lenet5_keras_1.fc1_1``. ``by_module`` is nested like the other
    backends' (a module's figures include its children's; ``calls`` counts the operators directly in it).
"""
from __future__ import annotations

import itertools
import warnings
from typing import Any, Callable, Mapping

from deeplite_like.backends.tflite.graph import ALIAS_OPS, DTYPE_BITS, OpView, TFLiteModel, load_model, settled
from deeplite_like.results import Cost, GraphCount, OpCount


__all__ = ["ACTIVATIONS", "FORMULAS", "FREE", "FUSED_ACTIVATIONS", "Formula", "UntrackedTFLiteOpWarning",
           "count_model", "count_ops", "formula", "module_of", "price"]

Formula = Callable[[OpView], Cost]
FORMULAS: dict[str, Formula] = {}

#: Known to cost nothing: data movement, shapes, casts, comparisons, indexing, and the edges of quantization.
FREE = frozenset({
    "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE", "CONCATENATION", "PAD", "PADV2", "MIRROR_PAD", "QUANTIZE",
    "DEQUANTIZE", "SHAPE", "STRIDED_SLICE", "SLICE", "PACK", "UNPACK", "GATHER", "GATHER_ND", "SCATTER_ND", "SPLIT",
    "SPLIT_V", "CAST", "TILE", "BROADCAST_TO", "BROADCAST_ARGS", "FILL", "ZEROS_LIKE", "ONES_LIKE", "RANGE",
    "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "REVERSE_V2", "ARG_MAX", "ARG_MIN",
    "TOPK_V2", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
    "LOGICAL_NOT", "SELECT", "SELECT_V2", "WHERE", "ONE_HOT", "RESIZE_NEAREST_NEIGHBOR", "EMBEDDING_LOOKUP",
})


def formula(*ops: str) -> Callable[[Formula], Formula]:
    """Register ``function`` for the builtin op names; an op registered twice is a bug (refused)."""
    def register(function: Formula) -> Formula:
        for op in ops:
            if op in FORMULAS or op in FREE:
                raise ValueError(f"TFLite op {op!r} already has a formula or is free")
            FORMULAS[op] = function
        return function
    return register


#: ``ActivationFunctionType`` codes -> (name, FLOPs per output element). ``SIGN_BIT`` has no cost row.
FUSED_ACTIVATIONS = {0: ("NONE", 0), 1: ("RELU", 1), 2: ("RELU_N1_TO_1", 2), 3: ("RELU6", 2), 4: ("TANH", 1)}


def _fused(op: OpView) -> int:
    """FLOPs of the op's fused activation over its outputs (0 for none)."""
    code = op.option("fusedActivationFunction", 0) or 0
    if code not in FUSED_ACTIVATIONS:
        raise ValueError(f"{op.label}: fused activation code {code} has no per-element cost")
    return FUSED_ACTIVATIONS[code][1] * op.numel_out()


def _bias(op: OpView, at: int) -> int:
    return op.numel_out() if op.has_input(at) else 0


# ----------------------------------------------------------------------------- contractions
@formula("CONV_2D", "CONV_3D")
def conv(op: OpView) -> Cost:
    """Conv: out x (C_in / groups) x kernel; filter ``[C_out, kh, kw, C_in / groups]`` (3-D: ``[kd, kh, kw,
    C_in, C_out]``); + out for a bias, + the fused activation."""
    weight = op.input(1).shape
    per_output = weight[1] * weight[2] * weight[3] if op.op == "CONV_2D" else weight[0] * weight[1] * weight[2] * weight[3]
    return Cost.contraction(op.numel_out() * per_output, _bias(op, 2) + _fused(op))


@formula("DEPTHWISE_CONV_2D")
def depthwise_conv(op: OpView) -> Cost:
    """Depthwise conv: out x kh x kw (one input channel per output); filter ``[1, kh, kw, C_out]``; + out for a
    bias, except an all-zero bias when a ``CONV_2D`` alone reads the output: a Keras ``SeparableConv2D``
    lowered to depthwise + pointwise, whose depthwise half has no bias in Keras (the converter writes zeros)."""
    weight = op.input(1).shape
    placeholder = op.has_input(2) and op.input(2).zeros_only and op.consumers == ("CONV_2D",)
    return Cost.contraction(op.numel_out() * weight[1] * weight[2], (0 if placeholder else _bias(op, 2)) + _fused(op))


@formula("TRANSPOSE_CONV")
def transpose_conv(op: OpView) -> Cost:
    """Transposed conv (inputs: output shape, filter ``[C_out, kh, kw, C_in]``, input, bias): every input
    element meets C_out x kh x kw weights: N_in x C_out x kh x kw, as ONNX's ``ConvTranspose``."""
    c_out, kh, kw, _ = op.input(1).shape
    return Cost.contraction(op.input(2).numel * c_out * kh * kw, _bias(op, 3) + _fused(op))


@formula("FULLY_CONNECTED")
def fully_connected(op: OpView) -> Cost:
    """Fully connected: out x K, filter ``[units, K]``; + out for a bias, + the fused activation."""
    return Cost.contraction(op.numel_out() * op.input(1).shape[-1], _bias(op, 2) + _fused(op))


@formula("BATCH_MATMUL")
def batch_matmul(op: OpView) -> Cost:
    """Batch matmul: out x K, K the last dimension of A (its second last with ``adj_x``)."""
    a = op.input(0).shape
    k = a[-2] if op.option("adjX", False) else a[-1]
    return Cost.contraction(op.numel_out() * k)


# ----------------------------------------------------------------------------- fused recurrent ops
#: Input slots of one direction of the LSTM kernels (``UNIDIRECTIONAL_SEQUENCE_LSTM`` and the one-step
#: ``LSTM``: the schema's 24 inputs): input-to-gate weights (i, f, c, o), recurrent weights, peepholes
#: (cell-to-i, f, o), gate biases, projection weights, layer-norm coefficients.
_LSTM_SLOTS = {"input_weights": (1, 2, 3, 4), "recurrent": (5, 6, 7, 8), "peephole": (9, 10, 11),
               "bias": (12, 13, 14, 15), "projection": 16, "projection_bias": 17, "norms": (20, 21, 22, 23)}
#: ``BIDIRECTIONAL_SEQUENCE_LSTM``'s 48 inputs: (forward slots, backward slots, aux weights per direction).
_BIDI_LSTM = ({"input_weights": (1, 2, 3, 4), "recurrent": (5, 6, 7, 8), "peephole": (9, 10, 11),
               "bias": (12, 13, 14, 15), "projection": 16, "projection_bias": 17, "norms": (), "aux": (40, 41, 42, 43)},
              {"input_weights": (18, 19, 20, 21), "recurrent": (22, 23, 24, 25), "peephole": (26, 27, 28),
               "bias": (29, 30, 31, 32), "projection": 33, "projection_bias": 34, "norms": (), "aux": (44, 45, 46, 47)})


def _activation_cost(op: OpView) -> int:
    code = op.option("fusedActivationFunction", 0) or 0
    if code not in FUSED_ACTIVATIONS:
        raise ValueError(f"{op.label}: activation code {code} has no per-element cost")
    return FUSED_ACTIVATIONS[code][1]


def _lstm_direction(op: OpView, slots: Mapping[str, Any], rows: int) -> Cost:
    """One direction of an LSTM kernel over ``rows`` = steps x batch (docs/conventions.rst, rnn row):

    MACs  rows x G·H x (I + P) (+ rows x G·H x I_aux with an auxiliary input) (+ rows x H x P with a
          projection; P = H without one), G = 4 gates, 3 with CIFG (no input gate: ``i = 1 - f``);
    FLOPs 2 x MACs + rows x G·H for the gate biases + rows x H x gate math, gate math = G (gate adds)
          + 4 (G - 1) (sigmoids) + 2a (the activation of g and of c; a = the fused activation's cost,
          tanh 1) + 4 (f*c, i*g, their add, o*act(c)) (+ 1 for CIFG's 1 - f): 22 for the usual LSTM, the
          torch / Keras figure; + 2 x rows x H per peephole (a multiply and an add), + rows x (7H + 4)
          per layer-normalised gate (6N + 4R and the scale), + rows x P for a projection bias.
    """
    weights = [at for at in slots["input_weights"] if op.has_input(at)]
    gates = len(weights)
    hidden = op.input(slots["input_weights"][1]).shape[0]  # the forget gate's weights [H, I] (always present)
    in_size = op.input(slots["input_weights"][1]).shape[1]
    projected = op.has_input(slots["projection"])
    state = op.input(slots["projection"]).shape[0] if projected else hidden
    aux = sum(op.input(at).shape[1] for at in slots.get("aux", ())[1:2] if op.has_input(at))
    macs = rows * gates * hidden * (in_size + state + aux) + (rows * hidden * state if projected else 0)
    activation = _activation_cost(op)
    gate_math = gates + 4 * (gates - 1) + 2 * activation + 4 + int(gates == 3)
    flops = rows * hidden * gate_math
    flops += rows * hidden * sum(1 for at in slots["bias"] if op.has_input(at))
    flops += 2 * rows * hidden * sum(1 for at in slots["peephole"] if op.has_input(at))
    flops += rows * (7 * hidden + 4) * sum(1 for at in slots["norms"] if op.has_input(at))
    flops += rows * state if op.has_input(slots["projection_bias"]) else 0
    return Cost.contraction(macs, flops)


def _rows(op: OpView) -> int:
    """Steps x batch of a recurrent kernel: the input's elements over its feature size (either layout)."""
    x = op.input(0)
    return x.numel // x.shape[-1]


@formula("UNIDIRECTIONAL_SEQUENCE_LSTM", "LSTM")
def lstm(op: OpView) -> Cost:
    """LSTM kernels (``UNIDIRECTIONAL_SEQUENCE_LSTM`` over ``[B, T, I]`` or time-major ``[T, B, I]``; the
    one-step ``LSTM`` over ``[B, I]``): ``_lstm_direction`` with rows = steps x batch."""
    if op.op == "LSTM" and op.option("kernelType", 0):  # BASIC: one concatenated weight, 4 inputs
        raise ValueError(f"{op.label}: the BASIC LSTM kernel (kernel_type 1) is not counted; the FULL kernel is")
    return _lstm_direction(op, _LSTM_SLOTS, _rows(op))


@formula("BIDIRECTIONAL_SEQUENCE_LSTM")
def bidirectional_lstm(op: OpView) -> Cost:
    """``BIDIRECTIONAL_SEQUENCE_LSTM`` (48 inputs): the forward and the backward direction, each as
    ``_lstm_direction`` over the same rows (with the auxiliary input's weights when given)."""
    rows = _rows(op)
    return _lstm_direction(op, _BIDI_LSTM[0], rows) + _lstm_direction(op, _BIDI_LSTM[1], rows)


def _rnn_direction(op: OpView, weights: int, recurrent: int, bias: int, aux: int | None, rows: int) -> Cost:
    """One direction of a vanilla RNN kernel: rows x H x (I + H (+ I_aux)) MACs; FLOPs 2 x MACs + rows x H
    for the bias + rows x H x (1 + a): the add of the two products and the activation (tanh 1: 2, as Keras)."""
    hidden, in_size = op.input(weights).shape
    aux_size = op.input(aux).shape[1] if aux is not None and op.has_input(aux) else 0
    macs = rows * hidden * (in_size + op.input(recurrent).shape[1] + aux_size)
    flops = rows * hidden * (int(op.has_input(bias)) + 1 + _activation_cost(op))
    return Cost.contraction(macs, flops)


@formula("UNIDIRECTIONAL_SEQUENCE_RNN", "RNN")
def rnn(op: OpView) -> Cost:
    """Vanilla RNN kernels (input, weights ``[H, I]``, recurrent ``[H, H]``, bias, state): ``_rnn_direction``."""
    return _rnn_direction(op, 1, 2, 3, None, _rows(op))


@formula("BIDIRECTIONAL_SEQUENCE_RNN")
def bidirectional_rnn(op: OpView) -> Cost:
    """``BIDIRECTIONAL_SEQUENCE_RNN`` (input, forward weights / recurrent / bias / state at 1-4, backward
    at 5-8, aux input 9 and its forward / backward weights 10, 11): both directions."""
    rows = _rows(op)
    return _rnn_direction(op, 1, 2, 3, 10, rows) + _rnn_direction(op, 5, 6, 7, 11, rows)


# ----------------------------------------------------------------------------- per element
#: Activation ops, the torch table's per-element costs (docs/conventions.rst, activation row).
ACTIVATIONS = {"RELU": 1, "RELU6": 2, "RELU_N1_TO_1": 2, "RELU_0_TO_1": 2, "TANH": 1, "LOGISTIC": 4,
               "HARD_SWISH": 5, "LEAKY_RELU": 2, "PRELU": 2, "ELU": 3}


def _per_output(per: int, fused: bool = False) -> Formula:
    def cost(op: OpView) -> Cost:
        priced = op.outputs[0].numeric
        return Cost.elementwise((per * op.numel_out() + (_fused(op) if fused else 0)) if priced else 0)
    cost.__doc__ = f"{per} FLOP(s) per real-valued output element{' + the fused activation' if fused else ''}."
    return cost


for _op in ("ADD", "SUB", "MUL", "DIV"):
    formula(_op)(_per_output(1, fused=True))
for _op in ("MAXIMUM", "MINIMUM", "POW", "SQRT", "EXP", "LOG", "ABS", "NEG", "FLOOR", "CEIL", "ROUND", "SIN", "COS",
            "SQUARE", "SIGN", "FLOOR_DIV", "FLOOR_MOD"):
    formula(_op)(_per_output(1))
formula("RSQRT")(_per_output(2))  # a square root and a reciprocal, as torch's rsqrt row
formula("SQUARED_DIFFERENCE")(_per_output(2))  # a subtract and a multiply
for _op, _cost in ACTIVATIONS.items():
    formula(_op)(_per_output(_cost))


@formula("GELU")
def gelu(op: OpView) -> Cost:
    """GELU: 5 per output (erf form), 9 with ``approximate`` (the tanh form)."""
    return Cost.elementwise((9 if op.option("approximate", False) else 5) * op.numel_out() if op.outputs[0].numeric else 0)


@formula("SOFTMAX", "LOG_SOFTMAX")
def softmax(op: OpView) -> Cost:
    """Softmax / log-softmax: 5 per input element (max, sub, exp, sum, div)."""
    return Cost.elementwise(5 * op.input(0).numel)


# ----------------------------------------------------------------------------- pooling and reductions
@formula("MAX_POOL_2D", "AVERAGE_POOL_2D")
def pool(op: OpView) -> Cost:
    """Max pool: out x K; average pool: out x (K + 1) (the sums and a divide); K = filter height x width;
    + the fused activation."""
    window = int(op.option("filterHeight")) * int(op.option("filterWidth"))
    per = window if op.op == "MAX_POOL_2D" else window + 1
    return Cost.elementwise(per * op.numel_out() + _fused(op))


#: (FLOPs per input element, per reduced output): the torch table's reduction row.
_REDUCTIONS = {"SUM": (1, 0), "REDUCE_MAX": (1, 0), "REDUCE_MIN": (1, 0), "REDUCE_PROD": (1, 0), "MEAN": (1, 1)}


@formula(*_REDUCTIONS)
def reduction(op: OpView) -> Cost:
    """Reductions: sum / max / min / prod N; mean N + R (R = reduced outputs); real-valued inputs only.
    Keras' ``GlobalAveragePooling2D`` converts to ``MEAN``: N + R is the average pool's out x (K + 1)."""
    if not op.input(0).numeric:
        return Cost()
    per_input, per_output = _REDUCTIONS[op.op]
    return Cost.elementwise(per_input * op.input(0).numel + per_output * op.numel_out())


# -- Counting a file: the pass over its operators ---------------------------------------------------


class UntrackedTFLiteOpWarning(UserWarning):
    """Operators ran with no formula and are not known to be free: they were counted as 0."""


def module_of(op: OpView) -> str:
    """``a/b/MatMul;a/c/Relu`` -> ``a.b`` (the scopes of the first fused name); ``""`` when there are none."""
    if not op.outputs:
        return ""
    parts = [p for p in op.outputs[0].name.split(";")[0].split("/") if p]
    return ".".join(parts[:-1])


def price(op: OpView) -> Cost | None:
    """The op's ``Cost``; ``None`` when it is untracked (no formula, not free)."""
    function = FORMULAS.get(op.op)
    if function is not None:
        try:
            return function(op)
        except (IndexError, TypeError, ZeroDivisionError, AttributeError) as exc:
            raise ValueError(f"cannot price {op.label}: {type(exc).__name__}: {exc}") from exc
    return Cost() if op.op in FREE else None


_TORCH_DTYPES = {"FLOAT32": "float32", "FLOAT16": "float16", "BFLOAT16": "bfloat16", "FLOAT64": "float64",
                 "INT8": "int8", "UINT8": "uint8", "INT16": "int16", "INT32": "int32", "INT64": "int64"}


def _moves(op: OpView, graph: int = 0) -> tuple[list, list, str]:
    """What ``op`` reads (each distinct input tensor, weights included) and writes, at the stored types,
    and its dtype; a tensor is told apart by its subgraph and index."""
    def row(tensors: Any) -> list[tuple[Any, int]]:
        distinct = {t.index: t for t in tensors if t is not None}
        return [((graph, index), t.nbytes) for index, t in distinct.items()]
    types = [t.dtype for t in op.inputs if t is not None and t.numeric]
    floats = [t for t in types if t.startswith(("FLOAT", "BFLOAT"))]
    widest = max(floats, key=lambda t: DTYPE_BITS.get(t, 0)) if floats else types[0] if types else ""
    return row(op.inputs), row(op.outputs), _TORCH_DTYPES.get(widest, widest.lower())


_COMPARISONS = {"LESS": 0, "LESS_EQUAL": 1, "GREATER": 0, "GREATER_EQUAL": 1, "NOT_EQUAL": 0}
_FLIPPED = {"LESS": "GREATER", "GREATER": "LESS", "LESS_EQUAL": "GREATER_EQUAL", "GREATER_EQUAL": "LESS_EQUAL"}
#: Control-flow ops -> the options naming the subgraphs they run.
_CONTROL_FLOW = {"WHILE": ("condSubgraphIndex", "bodySubgraphIndex"), "IF": ("thenSubgraphIndex", "elseSubgraphIndex"),
                 "CALL_ONCE": ("initSubgraphIndex",)}
_MAX_DEPTH = 16  # nested control flow entered; deeper is a damaged or adversarial file
_MAX_RUNS = 1_000_000  # operator runs in one count; more is a loop bound no real model has


def _subgraph_option(model: TFLiteModel, op: OpView, name: str) -> int | None:
    """The subgraph index option ``name`` of a control-flow op, when it names a subgraph other than the main one."""
    index = op.option(name)
    return index if isinstance(index, int) and 0 < index < len(model.graphs) else None


def _one_bound(op: OpView, cond: Any, body: Any, compare: OpView) -> int | None:
    """Trips allowed by one comparison of the condition subgraph: a loop variable against a constant,
    the variable entering the ``WHILE`` as a constant and stepped by a constant ``ADD`` / ``SUB`` in the body."""
    positions = {t.index: at for at, t in enumerate(cond.inputs)}
    if len(compare.inputs) != 2 or None in compare.inputs:
        return None
    left, right = compare.inputs
    if left.index in positions and right.value is not None and len(right.value) == 1:
        slot, limit, name = positions[left.index], right.value[0], compare.op
    elif right.index in positions and left.value is not None and len(left.value) == 1:
        slot, limit, name = positions[right.index], left.value[0], _FLIPPED.get(compare.op, compare.op)
    else:
        return None
    start_tensor = op.inputs[slot] if slot < len(op.inputs) else None
    if (start_tensor is None or start_tensor.value is None or len(start_tensor.value) != 1
            or slot >= len(body.inputs) or slot >= len(body.outputs)):
        return None
    start = start_tensor.value[0]
    loop_var, result_var = body.inputs[slot].index, body.outputs[slot].index
    step = None
    for body_op in body.ops:
        if body_op.op in ("ADD", "SUB") and body_op.outputs and body_op.outputs[0].index == result_var:
            a, b = (body_op.inputs + (None, None))[:2]
            constant = b if a is not None and a.index == loop_var else a if b is not None and b.index == loop_var else None
            if constant is not None and constant.value is not None and len(constant.value) == 1:
                step = constant.value[0] if body_op.op == "ADD" else -constant.value[0]
    if not step:
        return None
    inclusive = _COMPARISONS[name]
    if name in ("LESS", "LESS_EQUAL") and step > 0:
        span = limit - start + inclusive
    elif name in ("GREATER", "GREATER_EQUAL") and step < 0:
        span = start - limit + inclusive
    elif name == "NOT_EQUAL" and (limit - start) % step == 0 and (limit - start) // step >= 0:
        return (limit - start) // step
    else:
        return None
    return max(0, -(-span // abs(step)))


def trip_count(model: TFLiteModel, op: OpView) -> int | None:
    """How many times a ``WHILE`` runs its body, when the file fixes it; ``None`` otherwise.

    The converter's counted loops: the condition subgraph is one comparison (``LESS``,
    ``LESS_EQUAL``, ``GREATER``, ``GREATER_EQUAL``, ``NOT_EQUAL``) of a loop variable with a
    constant (``fori_loop``, ``range``), or a ``LOGICAL_AND`` of several (Keras' recurrent layers:
    ``step < 5 and time < 5``): the trip count is the smallest bound. Each loop variable enters the
    ``WHILE`` as a constant and the body adds a constant step to it (``ADD`` or ``SUB``). Anything
    else (a data-dependent condition, a bound computed at run time, a ``LOGICAL_OR``) is not static.
    """
    cond_index, body_index = _subgraph_option(model, op, "condSubgraphIndex"), _subgraph_option(model, op, "bodySubgraphIndex")
    if cond_index is None or body_index is None:
        return None
    cond, body = model.graphs[cond_index], model.graphs[body_index]
    if not cond.ops or len(cond.outputs) != 1 or any(c.op not in _COMPARISONS and c.op != "LOGICAL_AND" for c in cond.ops):
        return None
    # a conjunction of every comparison: each op's output is the condition or feeds a LOGICAL_AND
    and_inputs = {t.index for c in cond.ops if c.op == "LOGICAL_AND" for t in c.inputs if t is not None}
    if any(not c.outputs or c.outputs[0].index not in and_inputs | {cond.outputs[0].index} for c in cond.ops):
        return None
    bounds = [_one_bound(op, cond, body, c) for c in cond.ops if c.op in _COMPARISONS]
    return None if None in bounds else min(bounds)


def _if_branch(model: TFLiteModel, op: OpView) -> int | None:
    """The subgraph an ``IF`` takes when its condition is a constant in the file; ``None`` otherwise."""
    flag = op.inputs[0] if op.inputs else None
    if flag is None or flag.value is None or len(flag.value) != 1:
        return None
    return _subgraph_option(model, op, "thenSubgraphIndex" if flag.value[0] else "elseSubgraphIndex")


def _note(untracked: dict[str, int], key: str) -> None:
    untracked[key] = untracked.get(key, 0) + 1


def _run(model: TFLiteModel, ops: list[OpView], untracked: dict[str, int], depth: int, graph: int = 0):
    """``(op, cost, subgraph)`` of every operator that runs, in order, control flow entered in its place.

    * ``WHILE``: its condition (trip + 1 times) and body (trip times) when the trip count is static
      (``trip_count``); else the condition and body once, and ``untracked`` says so
      (``WHILE (trip count not static: body counted once)``: a lower bound).
    * ``IF``: the branch a constant condition takes; else the costlier branch (by MACs, then FLOPs),
      and ``untracked`` says so (``IF (condition not static: costlier branch counted)``: an upper bound).
    * ``CALL_ONCE``: its init subgraph (the variables' initialisation; it runs on the first call), once.
    * A control-flow op naming no valid subgraph, or nested deeper than 16, is untracked by its name.
    """
    for op in ops:
        if op.op not in _CONTROL_FLOW:
            cost = price(op)
            if cost is None:
                _note(untracked, op.op)
                cost = Cost()
            yield op, cost, graph
            continue
        yield op, Cost(), graph
        targets = [_subgraph_option(model, op, name) for name in _CONTROL_FLOW[op.op]]
        if None in targets or depth >= _MAX_DEPTH:
            _note(untracked, op.op)
            continue

        def enter(index: int):
            return _run(model, model.graphs[index].ops, untracked, depth + 1, index)

        if op.op == "CALL_ONCE":
            yield from enter(targets[0])
        elif op.op == "IF":
            branch = _if_branch(model, op)
            if branch is None:
                runs = {index: list(itertools.islice(_run(model, model.graphs[index].ops, {}, depth + 1, index),
                                                     _MAX_RUNS + 1)) for index in targets}
                if any(len(run) > _MAX_RUNS for run in runs.values()):
                    raise ValueError(f"{op.label}: a branch runs more than {_MAX_RUNS:,} operators")
                costs = {index: (sum(c.macs for _, c, _ in run), sum(c.flops for _, c, _ in run)) for index, run in runs.items()}
                branch = max(targets, key=lambda index: costs[index])
                _note(untracked, "IF (condition not static: costlier branch counted)")
            yield from enter(branch)
        else:
            cond, body = targets
            trips = trip_count(model, op)
            if trips is not None and trips * max(1, len(model.graphs[cond].ops) + len(model.graphs[body].ops)) > _MAX_RUNS:
                raise ValueError(f"{op.label} runs its body {trips:,} times: more than {_MAX_RUNS:,} operator runs; "
                                 "the file is damaged or its loop bounds are not a model's")
            if trips is None:
                _note(untracked, "WHILE (trip count not static: body counted once)")
            for _ in range(1 if trips is None else trips):  # as it runs: condition, body, ..., condition
                yield from enter(cond)
                yield from enter(body)
            if trips is not None:
                yield from enter(cond)


def count_model(model: TFLiteModel, bytes_moved: bool = False) -> OpCount:
    """The ``OpCount`` of a read model (``graph.load_model``); see the module docstring.

    ``bytes_moved``: also one ``OpRecord`` per operator with the bytes it reads and writes (every
    distinct input tensor, weights included, and every output, at its stored type; ``RESHAPE``,
    ``SQUEEZE`` and ``EXPAND_DIMS`` are views and ``SHAPE`` reads no data: no record).
    """
    counting = GraphCount(bytes_moved)
    try:
        model = settled(model)  # stored placeholder shapes (a run-time RESHAPE's) replaced by the run's
    except ValueError:  # the interpreter cannot run the file (a custom op): the stored shapes, and said
        _note(counting.result.untracked, "RESHAPE (placeholder shapes stored; the file could not run to settle them)")
    for runs, (op, cost, graph) in enumerate(_run(model, model.ops, counting.result.untracked, 0), 1):
        if runs > _MAX_RUNS:
            raise ValueError(f"more than {_MAX_RUNS:,} operator runs (a WHILE's trip count?): the file is damaged or "
                             "its loop bounds are not a model's")
        moves = None
        if bytes_moved and op.op not in (*ALIAS_OPS, "SHAPE", *_CONTROL_FLOW):  # (no data read, or control flow)
            moves = _moves(op, graph)
        counting.add(op.op, module_of(op), cost, moves)
    return counting.finish(t.shape[0] for t in model.inputs if t.shape)


def untracked_message(untracked: Mapping[str, int]) -> str:
    listing = ", ".join(f"{name} ({calls} op{'s' if calls != 1 else ''})"
                        for name, calls in sorted(untracked.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"{len(untracked)} TFLite op type(s) have no FLOP formula and were counted as 0: {listing}. "
            "Add a formula to deeplite_like.backends.tflite.formulas (formula decorator) or list the op in FREE.")


def count_ops(model: Any, warn_untracked: bool = True, bytes_moved: bool = False) -> OpCount:
    """MACs and FLOPs of one run of a ``.tflite`` model at its stored shapes, per op type and per module.

    Args:
        model: a path to a ``.tflite`` file or its bytes (never modified).
        warn_untracked: warn once (``UntrackedTFLiteOpWarning``) about ops with no formula.
        bytes_moved: also the bytes each operator reads and writes (``OpCount.records``;
            ``count_model``), for ``deeplite_like.roofline``.

    Returns an ``OpCount`` whose ``batch_size`` is the inputs' common first dimension (if any).
    """
    result = count_model(load_model(model), bytes_moved=bytes_moved)
    if warn_untracked and result.untracked:
        warnings.warn(untracked_message(result.untracked), UntrackedTFLiteOpWarning, stacklevel=2)
    return result
