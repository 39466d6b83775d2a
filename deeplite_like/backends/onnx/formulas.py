"""The ONNX formula table: one pure function per op family, from a node's shapes and attributes to a ``Cost``.

The conventions are the torch backend's (docs/conventions.rst), so a file counts what the live
model it came from counts:

* contractions (``Conv``, ``ConvTranspose``, ``Gemm``, ``MatMul``, ``Einsum``, the recurrent
  layers) give MACs; FLOPs = 2 x MACs + a bias add of 1 per output (+ 1 per output for each
  ``alpha``/``beta`` != 1 of ``Gemm``);
* a quantized op (``QLinearConv``, ``QLinearMatMul``, ``ConvInteger``, ``MatMulInteger``,
  ``com.microsoft.MatMulNBits``) counts as its float twin: its weights are read from the slot
  that op keeps them in; ``QuantizeLinear`` / ``DequantizeLinear`` at the edges of a QDQ pair are
  free, as casts are, so the float op between them counts as itself;
* every other op has a per-element cost (the torch table's: sigmoid 4, GELU 5, softmax 5, layer
  norm 6N + 4R + affine ...), only on floating-point outputs, or is in ``FREE`` (moves, shapes,
  casts, comparisons, indexing);
* an op in neither table is untracked (``counting.count_ops`` names it, never a silent zero), and so is a
  node whose formula raises ``Unpriced`` (its cost depends on values the file does not fix), with the reason.

``FORMULAS`` maps an op key (``Conv``; ``com.microsoft.MatMulNBits`` outside the default domain)
to its function; ``op_key`` makes the key of a node.

Counting a file: the pass over its operators:

    ``count_ops`` for ONNX files: every node priced by the formula table, per op type and per module.

    One pass over the inferred graph in its stored (topological) order: each node's key
    (``formulas.op_key``) finds its formula, or marks it free, or untracked (counted 0, listed in
    ``OpCount.untracked`` and warned about once, by name and count). Control flow runs its subgraphs
    in its place (``_walk``): an ``If`` the branch a constant condition takes, else the costlier one,
    said in ``untracked``; a ``Loop`` its body ``M`` times when ``M`` is a constant and only ``M``
    ends it (``loop_trips``), else once (or ``M`` times as an upper bound) and said; a ``Scan`` its
    body once per step of its sequence. Value names are unique across a model's subgraphs, so a body
    node's shapes are read like any other's (``graph.seed_subgraphs`` gives a body its inputs' shapes).

    Modules come from the node-name scopes exporters write: ``torch.onnx.export`` names a node
    ``/layer1/layer1.0/conv1/Conv`` (each scope is the module's name in its parent, a ``Sequential``'s
    child spelled with its parent's name), which is the module ``layer1.0.conv1``; tf2onnx writes
    ``model/conv1/Conv2D``, the module ``model.conv1``. The dynamo exporter (``torch.onnx.export(...,
    dynamo=True)``) names nodes ``node_Conv_0`` and writes the scopes into the node's metadata instead
    (``pkg.torch.onnx.name_scopes``: ``['', 'features', 'features.0', 'conv2d']``), which is read first.
    A node with no scope belongs to the root ``""``.
    ``by_module`` is nested like the torch backend's: a module's figures include its children's; its
    ``calls`` is the number of nodes directly inside it (a file records no module calls).
"""
from __future__ import annotations

import ast
import itertools
import math
import string
import warnings
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Sequence

from deeplite_like.backends.onnx.graph import (ALIAS_OPS, FLOAT_TYPES, GraphInfo, NodeView, dtype_name, element_bits,
                                               prepare)
from deeplite_like.backends.onnx.transformer import TRANSFORMER_FORMULAS, Unpriced
from deeplite_like.results import Cost, GraphCount, OpCount


__all__ = ["FORMULAS", "FREE", "Formula", "GATE_MATH", "SeededShapesWarning", "UntrackedOnnxOpWarning", "count_graph",
           "count_ops", "formula", "module_of", "node_costs", "node_module", "op_key", "warn_about"]

Formula = Callable[[NodeView], Cost]
FORMULAS: dict[str, Formula] = {}

_DEFAULT_DOMAINS = ("", "ai.onnx")


def op_key(domain: str, op_type: str) -> str:
    """``Conv`` for the default domain, ``com.microsoft.MatMulNBits`` for another."""
    return op_type if domain in _DEFAULT_DOMAINS else f"{domain}.{op_type}"


def formula(*keys: str) -> Callable[[Formula], Formula]:
    """Register ``function`` for the op keys; a key registered twice is a bug (refused)."""
    def register(function: Formula) -> Formula:
        for key in keys:
            if key in FORMULAS or key in FREE:
                raise ValueError(f"ONNX op {key!r} already has a formula or is free")
            FORMULAS[key] = function
        return function
    return register


#: Activations, the torch table's per-element costs (docs/conventions.rst, activation row); also the
#: ``activation`` attribute of com.microsoft's FusedConv / FusedGemm.
ACTIVATIONS = {"Relu": 1, "Tanh": 1, "Clip": 2, "LeakyRelu": 2, "PRelu": 2, "Elu": 3, "Selu": 4, "Celu": 4,
               "Sigmoid": 4, "HardSigmoid": 4, "HardSwish": 5, "Softplus": 3, "Mish": 5, "Swish": 5,
               "Softsign": 3, "ThresholdedRelu": 1, "Shrink": 2}


def _fused_activation(node: NodeView, outputs: int) -> int:
    """FLOPs of a fused ``activation`` attribute (com.microsoft FusedConv / FusedGemm), 0 when none."""
    activation = node.attr("activation")
    if not activation:
        return 0
    if activation not in ACTIVATIONS:
        raise ValueError(f"{node.label}: fused activation {activation!r} has no per-element cost")
    return ACTIVATIONS[activation] * outputs


def _prod(values) -> int:
    return math.prod(int(v) for v in values)


#: Known to cost nothing: data movement, shapes, casts, comparisons, indexing, creation, the edges
#: of quantization (QDQ), and dropout (a deployed graph runs inference).
FREE = frozenset({
    "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Gather",
    "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Scatter", "Shape", "Size", "Constant",
    "ConstantOfShape", "Cast", "CastLike", "Expand", "Tile", "Pad", "DepthToSpace", "SpaceToDepth", "Range",
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Where", "IsNaN", "IsInf",
    "ArgMax", "ArgMin", "TopK", "NonZero", "OneHot", "EyeLike", "Trilu", "QuantizeLinear", "DequantizeLinear",
    "Dropout", "Compress", "ReverseSequence", "SplitToSequence", "ConcatFromSequence", "SequenceAt",
    "SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceLength", "Optional", "OptionalGetElement",
    "OptionalHasElement", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli",
    "Multinomial", "Unique",
    # opset-1 experimental creation op the TorchScript exporter still writes at opsets 7-8 (an RNN's initial
    # state): a fill, as ConstantOfShape
    "ConstantFill",
    # quantization edges, free as casts are (torch's quantize_per_tensor / dequantize, and the dynamic
    # quantization of an input inside torch's linear_dynamic kernel)
    "DynamicQuantizeLinear", "com.microsoft.QuantizeLinear", "com.microsoft.DequantizeLinear",
    "com.microsoft.QLinearConcat",
    # onnxruntime's layout moves (its saved ORT_ENABLE_ALL graphs)
    "com.microsoft.nchwc.ReorderInput", "com.microsoft.nchwc.ReorderOutput",
    # a look-up in a block-quantized table (an LLM's int4 embedding): Gather, its dequantization a cast
    "com.microsoft.GatherBlockQuantized",
})


# ---------------------------------------------------------------------------- contractions
def _conv(x_at: int, weight_at: int, bias_at: int | None, transposed: bool = False) -> Formula:
    """Conv: out x (C_in / group) x prod(kernel); transposed: N_in x (C_out / group) x prod(kernel).

    The weight is ``(C_out, C_in / group, k...)`` for ``Conv`` and ``(C_in, C_out / group, k...)``
    for ``ConvTranspose``, so both are ``W[1] x prod(W[2:])`` per output (per input when transposed)
    element: grouped, depthwise, dilated and strided convolutions included. + 1 per output for a bias.
    """
    def cost(node: NodeView) -> Cost:
        weight = node.input_shape(weight_at)
        per_element = _prod(weight[1:])
        positions = node.numel_in(x_at) if transposed else node.numel_out()
        outputs = node.numel_out()
        bias = outputs if bias_at is not None and node.has_input(bias_at) else 0
        fused = node.op_type == "FusedConv" or node.node.domain == "com.microsoft.nchwc"
        fused_sum = outputs if fused and node.has_input(3) else 0  # + Z (FusedConv) / Sum (nchwc.Conv)
        return Cost.contraction(positions * per_element, bias + fused_sum + _fused_activation(node, outputs))
    return cost


#: onnxruntime's saved ``ORT_ENABLE_ALL`` graphs carry its CPU layouts: ``com.microsoft.nchwc.Conv`` (blocked
#: channels; OIHW weights, the channels padded to the block where they are not a multiple of it, and the
#: padded work counted, as the kernel does it; a fused activation and residual ``Sum`` input) and the
#: channels-last ``com.microsoft.QLinearConv``; their shapes keep the formula's reading.
formula("Conv", "com.microsoft.FusedConv", "com.microsoft.nchwc.Conv")(_conv(0, 1, 2))
formula("ConvInteger")(_conv(0, 1, None))  # inputs: x, w, x_zero_point, w_zero_point (no bias)
formula("QLinearConv", "com.microsoft.QLinearConv")(_conv(0, 3, 8))  # x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B
formula("ConvTranspose")(_conv(0, 1, 2, transposed=True))


def _gemm(a_at: int, b_at: int, c_at: int) -> Formula:
    """Gemm: M x N x K; + M x N for C, + M x N for alpha != 1, + M x N for beta != 1 with C."""
    def cost(node: NodeView) -> Cost:
        a, b = node.input_shape(a_at), node.input_shape(b_at)
        m, k = (a[1], a[0]) if node.attr("transA", 0) else (a[0], a[1])
        n = b[0] if node.attr("transB", 0) else b[1]
        outputs = m * n
        has_c = node.has_input(c_at)
        scaled = int(node.attr("alpha", 1.0) != 1.0) + int(has_c and node.attr("beta", 1.0) != 1.0)
        return Cost.contraction(m * n * k, outputs * (int(has_c) + scaled) + _fused_activation(node, outputs))
    return cost


formula("Gemm", "com.microsoft.FusedGemm")(_gemm(0, 1, 2))
formula("com.microsoft.QGemm")(_gemm(0, 3, 6))  # A, a_scale, a_zp, B, b_scale, b_zp, C (int32), y_scale, y_zp


def _matmul(a_at: int, bias_at: int | None = None) -> Formula:
    """MatMul (numpy semantics, batch broadcast): out x K, K the last dimension of A (its second last
    with ``transA``, com.microsoft.FusedMatMul); + 1 per output for a bias and for ``alpha`` != 1."""
    def cost(node: NodeView) -> Cost:
        a = node.input_shape(a_at)
        k = a[-2] if node.attr("transA", 0) and len(a) > 1 else a[-1]
        outputs = node.numel_out()
        extra = outputs * (int(bias_at is not None and node.has_input(bias_at)) + int(node.attr("alpha", 1.0) != 1.0))
        return Cost.contraction(outputs * k, extra)
    return cost


formula("MatMul", "MatMulInteger", "com.microsoft.FusedMatMul")(_matmul(0))
formula("QLinearMatMul")(_matmul(0))  # a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
formula("com.microsoft.DynamicQuantizeMatMul")(_matmul(0, bias_at=4))  # A, B, b_scale, b_zp, bias
formula("com.microsoft.MatMulIntegerToFloat")(_matmul(0, bias_at=6))  # A, B, a_scale, b_scale, a_zp, b_zp, bias


@formula("com.microsoft.MatMulNBits")
def matmul_nbits(node: NodeView) -> Cost:
    """MatMulNBits (4-bit weights, com.microsoft): rows x N x K with rows = numel(A) / K; + out for a bias."""
    k, n = int(node.attr("K")), int(node.attr("N"))
    rows = node.numel_in(0) // k
    bias = node.numel_out() if node.has_input(5) else 0
    return Cost.contraction(rows * n * k, bias)


@formula("com.microsoft.MatMulBnb4")
def matmul_bnb4(node: NodeView) -> Cost:
    """MatMulBnb4 (A, B (FP4 / NF4 packed two per byte), absmax; bitsandbytes' 4-bit weights): the float
    MatMul of A by the N x K weight, rows x N x K, rows = numel(A) / A's last dimension (K, or N with
    ``transB=0``); the dequantization is free, as ``DequantizeLinear`` is."""
    k, n = int(node.attr("K")), int(node.attr("N"))
    return Cost.contraction(node.numel_in(0) // node.input_shape(0)[-1] * n * k)


def _einsum_terms(node: NodeView) -> tuple[list[str], str, dict[str, int]]:
    """Operand subscripts, output subscript and each letter's size; an ellipsis becomes letters the
    equation does not use, right-aligned across operands as broadcasting aligns them."""
    equation = node.attr("equation").replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    operands = lhs.split(",")
    shapes = [node.input_shape(index) for index in range(len(operands))]
    extras = [len(shape) - (len(term) - 3) if "..." in term else 0 for term, shape in zip(operands, shapes)]
    widest = max(extras, default=0)
    spare = [c for c in string.ascii_letters if c not in equation][:widest]  # the ellipsis's own letters
    sizes: dict[str, int] = {}
    expanded: list[str] = []
    for term, shape, extra in zip(operands, shapes, extras):
        term = term.replace("...", "".join(spare[widest - extra:]))
        for letter, size in zip(term, shape):
            sizes[letter] = max(sizes.get(letter, 1), int(size))
        expanded.append(term)
    if not arrow:  # implicit output: the ellipsis, then the letters seen once in alphabetical order
        counts = {c: sum(t.count(c) for t in expanded) for c in sizes}
        rhs = "".join(spare) + "".join(sorted(c for c in sizes if c not in spare and counts[c] == 1))
    else:
        rhs = rhs.replace("...", "".join(spare))
    return expanded, rhs, sizes


@formula("Einsum")
def einsum(node: NodeView) -> Cost:
    """Einsum, contracted pairwise left to right as torch runs it: a pair that sums a letter is a
    (batched) matmul of prod(all its letters) MACs; a pair that sums none is an outer product, 1 per
    output (a mul); a single operand summing letters is a reduction, 1 per input element."""
    terms, output, sizes = _einsum_terms(node)
    macs = flops = 0
    current = set(terms[0])
    if len(terms) == 1:
        return Cost.elementwise(_prod(sizes[c] for c in current) if current - set(output) else 0)
    for position, term in enumerate(terms[1:], start=1):
        union = current | set(term)
        needed = set(output).union(*map(set, terms[position + 1:]))
        summed = union - needed
        if summed:
            macs += _prod(sizes[c] for c in union)
        else:
            flops += _prod(sizes[c] for c in union)
        current = union & needed
    return Cost.contraction(macs, flops)


#: FLOPs of gate math per hidden unit and row: the torch table's (backends/torch/counting/formulas/rnn.py,
#: GATE_MATH; tests/onnx check the two agree). LSTM 22: gate adds 4, three sigmoids 12, tanh g 1, f*c 1,
#: i*g 1, c add 1, tanh c 1, o*tanh 1; GRU 16; RNN 2.
GATE_MATH = {"LSTM": 22, "GRU": 16, "RNN": 2}


@formula("LSTM", "GRU", "RNN", "com.microsoft.DynamicQuantizeLSTM")
def recurrent(node: NodeView) -> Cost:
    """LSTM / GRU / RNN: per direction rows x G*H x (I + H) MACs, rows = steps x batch.

    FLOPs: 2 x MACs + 2 x rows x G*H per direction for the two biases (input ``B``, when given) +
    rows x H x the gate math (``GATE_MATH``). The same formula as the torch backend's fused layer.
    com.microsoft's ``DynamicQuantizeLSTM`` (what ``quantize_dynamic`` makes of an LSTM) is the LSTM with
    int8 weights stored transposed, ``W`` [D, I, 4H] and ``R`` [D, H, 4H]: counted as its float twin.
    """
    x, w, r = node.input_shape(0), node.input_shape(1), node.input_shape(2)
    steps, batch = (x[1], x[0]) if node.attr("layout", 0) else (x[0], x[1])
    rows = steps * batch
    if node.node.domain == "com.microsoft":
        (directions, input_size, gates_h), hidden, cell = w, r[1], "LSTM"
    else:
        (directions, gates_h, input_size), hidden, cell = w, r[2], node.op_type
    macs = directions * rows * gates_h * (input_size + hidden)
    biases = 2 * rows * gates_h * directions if node.has_input(3) else 0
    return Cost.contraction(macs, biases + directions * rows * hidden * GATE_MATH[cell])


# ------------------------------------------------------------------------------ per element
def _per_output(cost_per_element: int, any_dtype: bool = False) -> Formula:
    def cost(node: NodeView) -> Cost:
        priced = any_dtype or node.float_out()
        return Cost.elementwise(cost_per_element * node.numel_out() if priced else 0)
    cost.__doc__ = f"{cost_per_element} FLOP(s) per {'' if any_dtype else 'floating-point '}output element."
    return cost


#: Elementwise math: 1 per output element (a transcendental is one step), float outputs only.
for _op in ("Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Neg", "Sin", "Cos",
            "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf", "Floor", "Ceil",
            "Round", "Sign", "Mod"):
    formula(_op)(_per_output(1))
for _op, _cost in ACTIVATIONS.items():
    if _op not in FORMULAS:
        formula(_op)(_per_output(_cost))
#: Quantized elementwise ops (com.microsoft) as their float twins: priced whatever their integer dtype.
for _op, _cost in (("QLinearAdd", 1), ("QLinearMul", 1), ("QLinearSigmoid", ACTIVATIONS["Sigmoid"]),
                   ("QLinearLeakyRelu", ACTIVATIONS["LeakyRelu"])):
    formula(f"com.microsoft.{_op}")(_per_output(_cost, any_dtype=True))


@formula("Gelu", "com.microsoft.Gelu", "com.microsoft.FastGelu", "com.microsoft.BiasGelu")
def gelu(node: NodeView) -> Cost:
    """GELU: 5 per output (erf form), 9 with approximate='tanh' (``FastGelu`` is the tanh form); + 1 per
    output for the bias com.microsoft's ``BiasGelu`` (input 1) and ``FastGelu`` (optional input 1) add first:
    what the torch table counts for the ``Linear`` bias and the ``gelu`` the fusion replaced."""
    tanh_form = node.attr("approximate", "none") == "tanh" or node.op_type == "FastGelu"
    bias = int(node.op_type in ("BiasGelu", "FastGelu") and node.has_input(1))
    return Cost.elementwise(((9 if tanh_form else 5) + bias) * node.numel_out() if node.float_out() else 0)


@formula("com.microsoft.QuickGelu")
def quick_gelu(node: NodeView) -> Cost:
    """QuickGelu, x * sigmoid(alpha x): 6 per output (alpha x 1, sigmoid 4, the product 1)."""
    return Cost.elementwise(6 * node.numel_out() if node.float_out() else 0)


@formula("Sum", "Max", "Min", "Mean")
def variadic(node: NodeView) -> Cost:
    """Sum / Max / Min of n inputs: n - 1 per output element; Mean: n (the sums and a divide)."""
    inputs = sum(1 for i in range(len(node.node.input)) if node.has_input(i))
    per = inputs if node.op_type == "Mean" else inputs - 1
    return Cost.elementwise(per * node.numel_out() if node.float_out() else 0)


# ------------------------------------------------------------------------------------ norms
def _normalisation(n: int, groups: int, weight: bool, bias: bool) -> Cost:
    """With batch statistics: 6N + 4R (+ N weight, + N bias): the torch table's norm row."""
    return Cost.elementwise(6 * n + 4 * groups + n * int(weight) + n * int(bias))


@formula("BatchNormalization")
def batch_norm(node: NodeView) -> Cost:
    """BatchNormalization with running statistics (inference): 2N + 2C + N (scale) + N (bias);
    ``training_mode=1``: batch statistics, 6N + 4C + N + N."""
    n, channels = node.numel_in(0), node.input_shape(0)[1]
    if node.attr("training_mode", 0):
        return _normalisation(n, channels, True, True)
    return Cost.elementwise(2 * n + 2 * channels + n + n)


_RMS_FORMS = ("RMSNormalization", "SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization")


@formula("LayerNormalization", "com.microsoft.LayerNormalization", "SimplifiedLayerNormalization",
         "com.microsoft.SimplifiedLayerNormalization", "RMSNormalization")
def layer_norm(node: NodeView) -> Cost:
    """LayerNormalization: 6N + 4R + N (scale) (+ N bias), R = rows = prod(shape[:axis]);
    RMS forms (``RMSNormalization``, ``SimplifiedLayerNormalization``, which onnxruntime registers in the
    default domain as well as com.microsoft's): 3N + 3R + N (scale)."""
    shape = node.input_shape(0)
    axis = int(node.attr("axis", -1)) % len(shape)
    n, rows = _prod(shape), _prod(shape[:axis])
    if node.op_type in _RMS_FORMS:
        return Cost.elementwise(3 * n + 3 * rows + n)
    return _normalisation(n, rows, True, node.has_input(2))


@formula("com.microsoft.SkipLayerNormalization", "com.microsoft.SkipSimplifiedLayerNormalization")
def skip_layer_norm(node: NodeView) -> Cost:
    """SkipLayerNormalization (input, skip, gamma, beta?, bias?; onnxruntime's transformer fusion of a
    linear layer's bias add, the residual add and the LayerNorm after them): N for the skip add, + N for
    the bias, then the layer norm over the last axis: 6N + 4R + N (gamma) (+ N beta); the RMS form
    (``SkipSimplifiedLayerNormalization``: input, skip, gamma, bias?) 3N + 3R + N. N = input elements,
    R = N / hidden. The torch table's add, add and ``native_layer_norm`` rows, so the totals match."""
    shape = node.input_shape(0)
    n, rows = _prod(shape), _prod(shape[:-1])
    simplified = node.op_type == "SkipSimplifiedLayerNormalization"
    adds = n + n * int(node.has_input(3 if simplified else 4))
    if simplified:
        return Cost.elementwise(adds + 3 * n + 3 * rows + n)
    return Cost.elementwise(adds + _normalisation(n, rows, True, node.has_input(3)).flops)


@formula("com.microsoft.EmbedLayerNormalization", "com.microsoft.QEmbedLayerNormalization")
def embed_layer_norm(node: NodeView) -> Cost:
    """EmbedLayerNormalization (input_ids, segment_ids?, word, position, segment embeddings?, gamma, beta,
    mask?): the lookups are free (as ``Gather``); word + position N, + N with segments; the layer norm
    6N + 4R + N + N. N = output elements, R = batch x sequence. The mask index output (a sum of an
    integer mask) costs 0. The quantized form (int8 tables) counts the same."""
    n = node.numel_out()
    rows = n // node.output_shape()[-1]
    segments = node.has_input(1) and node.has_input(4)
    return Cost.elementwise(n + n * int(segments) + _normalisation(n, rows, True, True).flops)


@formula("InstanceNormalization")
def instance_norm(node: NodeView) -> Cost:
    """InstanceNormalization: 6N + 4R + N (scale) + N (bias), R = batch x channels. A scale stored as all
    ones or a bias as all zeros costs nothing: the exporters write them where the source has none (torch's
    ``InstanceNorm2d(affine=False)``; ``GroupNorm``, exported as Reshape, this node, Reshape, Mul, Add)."""
    shape = node.input_shape(0)
    return _normalisation(_prod(shape), shape[0] * shape[1], not node.filled_with(1, 1.0), not node.filled_with(2, 0.0))


@formula("GroupNormalization")
def group_norm(node: NodeView) -> Cost:
    """GroupNormalization: 6N + 4R + N + N, R = batch x num_groups."""
    shape = node.input_shape(0)
    return _normalisation(_prod(shape), shape[0] * int(node.attr("num_groups")), True, True)


@formula("LRN")
def local_response_norm(node: NodeView) -> Cost:
    """LRN (AlexNet, GoogLeNet-v1): N x (size + 6), what the torch table counts of ``LocalResponseNorm``'s
    decomposition: the square 1, the average over ``size`` channels size + 1, x alpha 1, + bias 1,
    the power 1, the divide 1."""
    return Cost.elementwise((int(node.attr("size")) + 6) * node.numel_out())


@formula("ImageScaler")
def image_scaler(node: NodeView) -> Cost:
    """ImageScaler (opsets 1-9, older model-zoo CNNs such as Tiny YOLOv2): scale x + bias[c], 2 per output."""
    return Cost.elementwise(2 * node.numel_out())


@formula("Softmax", "LogSoftmax", "com.microsoft.QLinearSoftmax")
def softmax(node: NodeView) -> Cost:
    """Softmax / LogSoftmax: 5 per input element (max, sub, exp, sum, div)."""
    return Cost.elementwise(5 * node.numel_in(0))


#: onnxruntime's transformer and LLM contrib ops (attention family, rotary embeddings, bias fusions):
#: ``transformer.py``, registered here into the one table.
for _key, _function in TRANSFORMER_FORMULAS.items():
    formula(_key)(_function)


# ---------------------------------------------------------------------------------- pooling
@formula("MaxPool", "AveragePool", "com.microsoft.nchwc.MaxPool", "com.microsoft.nchwc.AveragePool",
         "com.microsoft.NhwcMaxPool")
def pool(node: NodeView) -> Cost:
    """MaxPool: out x K; AveragePool: out x (K + 1); K = prod(kernel_shape), padding included (also
    onnxruntime's NCHWc and channels-last forms)."""
    window = _prod(node.attr("kernel_shape"))
    per = window if node.op_type.endswith("MaxPool") else window + 1  # AveragePool, QLinearAveragePool
    return Cost.elementwise(per * node.numel_out())


formula("com.microsoft.QLinearAveragePool")(pool)  # x, x_scale, x_zp, y_scale, y_zp: AveragePool's twin


@formula("GlobalMaxPool", "GlobalAveragePool", "com.microsoft.QLinearGlobalAveragePool",
         "com.microsoft.nchwc.GlobalAveragePool")
def global_pool(node: NodeView) -> Cost:
    """Global pools (adaptive to 1): out x K (max), out x (K + 1) (average), K = input / output elements
    (the spatial size, whatever the layout: QLinearGlobalAveragePool may be channels-last)."""
    window = node.numel_in(0) // node.numel_out()
    per = window if node.op_type == "GlobalMaxPool" else window + 1
    return Cost.elementwise(per * node.numel_out())


# ------------------------------------------------------------------------------- reductions
#: (FLOPs per input element, per reduced output): the torch table's reduction row.
_REDUCTIONS = {"ReduceSum": (1, 0), "ReduceMax": (1, 0), "ReduceMin": (1, 0), "ReduceProd": (1, 0),
               "ReduceMean": (1, 1), "ReduceL2": (2, 1), "ReduceL1": (2, 0), "ReduceSumSquare": (2, 0),
               "ReduceLogSum": (1, 1), "ReduceLogSumExp": (4, 2), "CumSum": (1, 0)}


@formula(*_REDUCTIONS)
def reduction(node: NodeView) -> Cost:
    """Reductions: sum / max / min / prod N; mean N + R; L2 2N + R; L1 and sum of squares 2N;
    log-sum N + R; log-sum-exp 4N + 2R; cumsum N (R = reduced outputs; float inputs only)."""
    if not node.float_in(0):
        return Cost()
    per_input, per_output = _REDUCTIONS[node.op_type]
    return Cost.elementwise(per_input * node.numel_in(0) + per_output * node.numel_out())


@formula("Resize", "Upsample")
def resize(node: NodeView) -> Cost:
    """Resize / Upsample: per output element, nearest 0; linear (Upsample-1's ``bilinear``) over d resized
    axes 2 x 2^d - 1 (bilinear 7); cubic 2 x 4^d - 1 (bicubic 31): a weighted sum of the neighbours, as
    the torch table. Upsample-7's ``scales`` attribute and Upsample-9's input give the same shapes."""
    mode = node.attr("mode", "nearest")
    if mode == "nearest":
        return Cost()
    if mode not in ("linear", "bilinear", "cubic"):
        raise ValueError(f"{node.label}: resize mode {mode!r} has no per-output cost")
    resized = sum(1 for a, b in zip(node.input_shape(0), node.output_shape()) if a != b)
    neighbours = (4 if mode == "cubic" else 2) ** resized  # Upsample-1 spelled linear "bilinear"
    return Cost.elementwise((2 * neighbours - 1) * node.numel_out() if resized else 0)


# -- Counting a file: the pass over its operators ---------------------------------------------------


class UntrackedOnnxOpWarning(UserWarning):
    """Nodes ran with no formula and are not known to be free: they were counted as 0."""


class SeededShapesWarning(UserWarning):
    """Shapes that depend on the input values (after ``NonZero``, ``NonMaxSuppression``, ...) were read
    from a run on seeded inputs, since only shapes were given: the counts after them are that data's."""


def warn_about(info: GraphInfo, counted: OpCount, warn_untracked: bool = True) -> None:
    """The warnings a count of ``info`` owes its caller: untracked ops, shapes read from seeded data."""
    if warn_untracked and counted.untracked:
        warnings.warn(untracked_message(counted.untracked), UntrackedOnnxOpWarning, stacklevel=3)
    if info.seeded_nodes:
        more = f" (and {len(info.seeded_nodes) - 1} more)" if len(info.seeded_nodes) > 1 else ""
        warnings.warn(f"the output shapes of {info.seeded_nodes[0]}{more} depend on the input values, and only "
                      "shapes were given: they were read from a run on seeded random inputs, so the counts of the "
                      "nodes after them are that data's; pass the real inputs as arrays for your data's count",
                      SeededShapesWarning, stacklevel=3)


def module_of(node_name: str) -> str:
    """The module a node belongs to, from its name's scopes (``/layer1/layer1.0/conv1/Conv`` -> ``layer1.0.conv1``)."""
    parts = [p for p in node_name.replace("\\", "/").split("/") if p]
    if len(parts) < 2:
        return ""
    module = ""
    for scope in parts[:-1]:  # the last part is the node's own name (``Conv``, ``Conv_1``)
        if module and scope.startswith(module + "."):
            module = scope  # torch spells a Sequential's child with its full name: features/features.0
        elif module and module.endswith("." + scope.split(".")[0]) and "." in scope:
            module = module.rpartition(".")[0] + "." + scope
        else:
            module = f"{module}.{scope}" if module else scope
    return module


_TORCH_SCOPES = "pkg.torch.onnx.name_scopes"


def node_module(node: Any) -> str:
    """The module of a node: the dynamo exporter's metadata scopes if present, else its name's (``module_of``)."""
    for prop in node.metadata_props:
        if prop.key == _TORCH_SCOPES:
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                break  # not the exporter's list: fall back to the name
            if isinstance(scopes, list) and len(scopes) >= 2 and all(isinstance(x, str) for x in scopes):
                return scopes[-2]  # qualified module names, outermost first; the last is the op itself
            break
    return module_of(node.name)


_NO_DATA = ("Constant", "Shape", "Size")  # stored data, or a question about a shape


def _value_bytes(name: str, info: GraphInfo) -> int:
    """Bytes of a value at its inferred shape and stored type (0 where either is unknown)."""
    shape, elem_type = info.shapes.get(name), info.dtypes.get(name)
    if shape is None or elem_type is None:
        return 0
    return (math.prod(shape) * element_bits(elem_type) + 7) // 8


def _dtype(names: Sequence[str], info: GraphInfo) -> str:
    """The widest floating (else the first) element type among ``names``, spelled as torch does."""
    types = [info.dtypes[n] for n in names if n in info.dtypes]
    floats = [t for t in types if t in FLOAT_TYPES]
    pick = max(floats, key=element_bits) if floats else (types[0] if types else None)
    if pick is None:
        return ""
    name = dtype_name(pick)
    return {"float": "float32", "double": "float64"}.get(name, name.replace("float8", "float8_"))


def _moves(node: Any, info: GraphInfo, serial: dict[str, int]) -> tuple[list, list]:
    """What a node reads (each distinct input value, weights included) and writes (its outputs)."""
    def row(names: Sequence[str]) -> list[tuple[int, int]]:
        out = []
        for name in dict.fromkeys(n for n in names if n):
            out.append((serial.setdefault(name, len(serial)), _value_bytes(name, info)))
        return out
    return row(node.input), row(node.output)


_MAX_DEPTH = 16  # nested subgraphs entered; deeper is a damaged or adversarial file
_MAX_RUNS = 1_000_000  # node runs in one count; more is a loop bound no real model has
_CONTROL_FLOW = ("If", "Loop", "Scan")


def _body(node: Any, name: str) -> Any:
    return next((a.g for a in node.attribute if a.name == name and a.HasField("g")), None)


def _truth(value: Any) -> bool | None:
    """A constant scalar condition's truth; ``None`` when it is not one."""
    if value is None or getattr(value, "size", 0) != 1:
        return None
    return bool(value.reshape(-1)[0])


def _keeps_going(body: Any, info: GraphInfo) -> bool:
    """A ``Loop`` body whose condition output is its condition input passed through (``Identity``, or the
    same name) or a constant true: only the trip count ``M`` ends the loop."""
    if len(body.input) < 2 or not body.output:
        return False
    cond_in, cond_out = body.input[1].name, body.output[0].name
    if cond_out == cond_in or _truth(info.constants.get(cond_out)) is True:
        return True
    return any(n.op_type == "Identity" and list(n.output) == [cond_out] and list(n.input) == [cond_in] for n in body.node)


def loop_trips(node: Any, info: GraphInfo) -> tuple[int | None, str]:
    """How many times a ``Loop`` or ``Scan`` runs its body, and ``""``; or a count and the note that it is a bound.

    * ``Loop`` with a constant trip count ``M``, a constant (or absent) initial condition and a body
      that keeps its condition (``_keeps_going``): ``M`` (0 when the initial condition is false);
      a body that computes its condition from the data: ``M``, noted as an upper bound; no constant
      ``M``: ``None``, counted once and noted as a lower bound.
    * ``Scan``: the length of its first scan input along its scan axis (``scan_input_axes``), known
      from the shapes; else ``None``.
    """
    if node.op_type == "Scan":
        scans = next((int(a.i) for a in node.attribute if a.name == "num_scan_inputs"), 0)
        axes = next((list(a.ints) for a in node.attribute if a.name == "scan_input_axes"), [0])
        first = node.input[len(node.input) - scans] if 0 < scans <= len(node.input) else ""
        shape = info.shapes.get(first)
        if not shape:
            return None, "Scan (sequence length unknown: body counted once)"
        axis = axes[0] if axes else 0
        return shape[axis + len(shape) if axis < 0 else axis], ""
    given = list(node.input) + ["", ""]
    limit = info.constants.get(given[0]) if given[0] else None
    start = _truth(info.constants.get(given[1])) if given[1] else True
    if limit is None or getattr(limit, "size", 0) != 1 or start is None:
        return None, "Loop (trip count not static: body counted once)"
    if not start:
        return 0, ""
    body = _body(node, "body")
    trips = max(0, int(limit.reshape(-1)[0]))
    if body is not None and _keeps_going(body, info):
        return trips, ""
    return trips, "Loop (condition on the data: M trips counted, an upper bound)"


def _walk(graph: Any, info: GraphInfo, untracked: dict[str, int], depth: int = 0):
    """``(node, cost)`` of every node that runs, in order, control flow entered in its place.

    * ``If``: the branch a constant condition takes; a condition from the data counts the costlier
      branch (by MACs, then FLOPs) and says so in ``untracked`` (an upper bound).
    * ``Loop`` / ``Scan``: the body as many times as it runs (``loop_trips``), or once, and said.
    * A control-flow node without its subgraph, or nested deeper than 16, is untracked by its name.
    """
    for node in graph.node:
        key = op_key(node.domain, node.op_type)
        if key not in _CONTROL_FLOW:
            yield node, _price(node, info, untracked, key)
            continue
        yield node, Cost()
        names = ("then_branch", "else_branch") if key == "If" else ("body",)
        bodies = [_body(node, name) for name in names]
        if None in bodies or depth >= _MAX_DEPTH:
            untracked[key] = untracked.get(key, 0) + 1
            continue
        if key == "If":
            flag = _truth(info.constants.get(node.input[0])) if node.input else None
            if flag is None:
                totals = []
                for body in bodies:
                    costs = [cost for _, cost in itertools.islice(_walk(body, info, {}, depth + 1), _MAX_RUNS + 1)]
                    if len(costs) > _MAX_RUNS:
                        raise ValueError(f"{node.op_type} node {node.name!r}: a branch runs more than {_MAX_RUNS:,} nodes")
                    totals.append((sum(c.macs for c in costs), sum(c.flops for c in costs)))
                flag = totals[0] >= totals[1]
                note = "If (condition not static: costlier branch counted)"
                untracked[note] = untracked.get(note, 0) + 1
            yield from _walk(bodies[0] if flag else bodies[1], info, untracked, depth + 1)
            continue
        trips, note = loop_trips(node, info)
        if trips is not None and trips * max(1, len(bodies[0].node)) > _MAX_RUNS:
            raise ValueError(f"{node.op_type} node {node.name!r} runs its body {trips:,} times: more than {_MAX_RUNS:,} "
                             "node runs; the file is damaged or its loop bounds are not a model's")
        if note:
            untracked[note] = untracked.get(note, 0) + 1
        for _ in range(1 if trips is None else trips):
            yield from _walk(bodies[0], info, untracked, depth + 1)


def _price(node: Any, info: GraphInfo, untracked: dict[str, int], key: str) -> Cost:
    """The node's ``Cost`` from the formula table; 0 and noted in ``untracked`` when it has none and is not free."""
    function = FORMULAS.get(key)
    if function is not None:
        view = NodeView(node, info)
        try:
            return function(view)
        except Unpriced as why:  # the cost depends on values the file does not fix: untracked, with the reason
            note = f"{key} ({why})"
            untracked[note] = untracked.get(note, 0) + 1
            return Cost()
        except (KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
            raise ValueError(f"cannot price {view.label}: {type(exc).__name__}: {exc}") from exc
    if key not in FREE:
        untracked[key] = untracked.get(key, 0) + 1
    return Cost()


def count_graph(info: GraphInfo, bytes_moved: bool = False) -> OpCount:
    """The ``OpCount`` of an inferred graph (``graph.prepare``); see the module docstring.

    ``bytes_moved``: also one ``OpRecord`` per node with the bytes it reads and writes (the
    convention of ``docs/conventions.rst``, "Bytes moved": every distinct input value, weights
    included, and every output, at its stored type; ``Reshape``/``Flatten``/``Squeeze``/
    ``Unsqueeze``/``Identity`` are views, ``Constant`` is stored data, ``Shape``/``Size`` read no
    data and ``If``/``Loop``/``Scan`` are control flow, their subgraphs' nodes recorded as they run: no record).
    """
    counting = GraphCount(bytes_moved)
    serial: dict[str, int] = {}
    for runs, (node, cost) in enumerate(_walk(info.model.graph, info, counting.result.untracked), 1):
        if runs > _MAX_RUNS:
            raise ValueError(f"more than {_MAX_RUNS:,} node runs (a Loop's trip count?): the file is damaged or its "
                             "loop bounds are not a model's")
        key = op_key(node.domain, node.op_type)
        moves = None
        if bytes_moved and not (node.domain in ("", "ai.onnx")
                                and node.op_type in (*ALIAS_OPS, *_NO_DATA, *_CONTROL_FLOW)):
            moves = (*_moves(node, info, serial), _dtype(node.input, info))
        counting.add(key, node_module(node), cost, moves)
    return counting.finish(shape[0] for shape in info.input_shapes.values() if shape)


def node_costs(info: GraphInfo) -> list[tuple[Any, Cost, int]]:
    """``(node, cost, bytes moved)`` of each node of the main graph, in stored order: the per-node figures that
    ORT's per-node times are joined to (``compute.node_times``).

    A control-flow node's cost is what its subgraphs run in its place (as ``count_graph`` counts them) and its
    bytes are theirs, since ORT times the whole ``If`` / ``Loop`` / ``Scan`` as one node. Bytes follow
    ``count_graph``'s rules (views, ``Constant``, ``Shape`` and ``Size`` move none); each node counts every
    distinct value it reads and writes once.
    """
    rows = []
    for node in info.model.graph.node:
        cost, moved = Cost(), 0
        for inner, inner_cost in _walk(SimpleNamespace(node=[node]), info, {}):
            cost = cost + inner_cost
            if not (inner.domain in ("", "ai.onnx") and inner.op_type in (*ALIAS_OPS, *_NO_DATA, *_CONTROL_FLOW)):
                reads, writes = _moves(inner, info, {})
                moved += sum(size for _, size in reads) + sum(size for _, size in writes)
        rows.append((node, cost, moved))
    return rows


def untracked_message(untracked: Mapping[str, int]) -> str:
    listing = ", ".join(f"{name} ({calls} node{'s' if calls != 1 else ''})"
                        for name, calls in sorted(untracked.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"{len(untracked)} ONNX op type(s) have no FLOP formula and were counted as 0: {listing}. "
            "Add a formula to deeplite_like.backends.onnx.formulas (formula decorator) or list the op in FREE.")


def count_ops(model: Any, inputs_or_shapes: Any = None, warn_untracked: bool = True, bytes_moved: bool = False,
              **dims: int) -> OpCount:
    """MACs and FLOPs of one run of an ONNX model, per op type and per module.

    Args:
        model: a path to a ``.onnx`` file, its bytes, or an ``onnx.ModelProto`` (never modified).
        inputs_or_shapes: the inputs' shapes: ``None`` (the model's fixed shapes), one array or
            shape for a one-input model, a sequence in graph-input order, or a dict by input name.
        warn_untracked: warn once (``UntrackedOnnxOpWarning``) about ops with no formula.
        bytes_moved: also the bytes each node reads and writes (``OpCount.records``; ``count_graph``),
            for ``deeplite_like.roofline``.
        **dims: symbolic dimensions bound by name (``batch=8, sequence=128``).

    Returns an ``OpCount`` whose ``batch_size`` is the inputs' common first dimension (if any).
    """
    info = prepare(model, inputs_or_shapes, dims)
    result = count_graph(info, bytes_moved=bytes_moved)
    warn_about(info, result, warn_untracked)
    return result
