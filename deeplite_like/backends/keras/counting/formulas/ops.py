"""Keras operations that appear as nodes of a functional model (``x + y``, ``keras.ops.relu(x)``
applied to symbolic inputs), reported as ``ops.<ClassName>`` (``ops.Add``).

Costs follow the torch backend's elementwise, activation, matmul and reduction formulas::

    elementwise arithmetic and math     1 per output element (add, multiply, exp, sqrt, ...)
    clip 2, logaddexp 4
    activations                         as activation layers (relu 1, sigmoid 4, gelu 5 or 9, ...)
    matmul                              numel(out) * k MACs;  einsum: the joint index space
    sum, max, min, prod, cumsum         N  (N input elements, R output elements)
    mean                                N + R;  var 4N + 2R;  std 4N + 3R;  logsumexp 4N + 2R
    reshapes, transposes, indexing, concatenation, casts, comparisons, creation: free

Eager code in a subclassed model's or custom layer's ``call`` runs these functions directly
(no operation object is created): it is priced op by op from the framework's own operators
(``engine.own_ops``, ``counting/tf_ops.py`` on TensorFlow, the torch formula table on torch).
"""
from __future__ import annotations

import deeplite_like.backends.keras.counting.formulas._common as c
from ..registry import Cost, LayerCall, register_free_layer, register_layer_formula
from ._common import ACTIVATIONS, einsum_cost, float_elements, named, per_output_element

_NP, _NN, _CORE, _MATH = "keras.src.ops.numpy.", "keras.src.ops.nn.", "keras.src.ops.core.", "keras.src.ops.math."

ELEMENTWISE_1 = [_NP + name for name in (
    "Add", "Subtract", "Multiply", "Divide", "TrueDivide", "FloorDivide", "DivideNoNan", "Negative", "Absolute",
    "Abs", "Fabs", "Reciprocal", "Square", "Sqrt", "Cbrt", "Power", "Maximum", "Minimum", "Fmax", "Fmin", "Exp",
    "Exp2", "Expm1", "Log", "Log10", "Log1p", "Log2", "Sin", "Cos", "Tan", "Sinh", "Cosh", "Tanh", "Arcsin",
    "Arccos", "Arctan", "Arctan2", "Arcsinh", "Arccosh", "Arctanh", "Floor", "Ceil", "Round", "Trunc", "Sign",
    "Mod", "Fmod", "Hypot", "Deg2rad", "Rad2deg", "Sinc",
)] + [_MATH + name for name in ("Rsqrt", "Erf", "Erfc", "Erfinv")]

ACTIVATION_OPS = {
    "Relu": "relu", "Relu6": "relu6", "Sigmoid": "sigmoid", "Softplus": "softplus", "Softsign": "softsign",
    "SoftShrink": "soft_shrink", "SparsePlus": "sparse_plus", "Silu": "silu", "Squareplus": "squareplus",
    "LogSigmoid": "log_sigmoid", "LeakyRelu": "leaky_relu", "HardSigmoid": "hard_sigmoid", "HardSilu": "hard_silu",
    "Elu": "elu", "Selu": "selu", "Celu": "celu", "Glu": "glu", "TanhShrink": "tanh_shrink", "HardTanh": "hard_tanh",
    "HardShrink": "hard_shrink", "Threshold": "hard_shrink", "Softmax": "softmax", "LogSoftmax": "log_softmax",
}

FREE_OPS = [_NP + name for name in (
    "Reshape", "Transpose", "ExpandDims", "Squeeze", "Concatenate", "Stack", "Hstack", "Vstack", "Dstack",
    "GetItem", "Take", "TakeAlongAxis", "Tile", "Repeat", "BroadcastTo", "Ravel", "Swapaxes", "Moveaxis", "Flip",
    "Fliplr", "Flipud", "Roll", "Rot90", "Pad", "Split", "ArraySplit", "Hsplit", "Vsplit", "Dsplit", "Where",
    "Select", "Copy", "ZerosLike", "OnesLike", "EmptyLike", "Full", "FullLike", "Arange", "Linspace", "Tril", "Triu",
    "Diagonal", "Diag", "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd",
    "LogicalOr", "LogicalNot", "LogicalXor", "Isnan", "Isinf", "Isfinite", "Sort", "Argsort", "Real", "Imag",
)] + [_CORE + name for name in ("Cast", "Slice", "ConvertToTensor", "StopGradient", "Unstack", "SaturateCast")] + \
    [_NN + name for name in ("OneHot", "MultiHot")] + [_MATH + "TopK"]


def _per_output(per: int):
    return per_output_element(per, f"op_elementwise_{per}", f"{per} FLOP(s) per floating-point output element.")


register_layer_formula(*ELEMENTWISE_1, opaque=False)(_per_output(1))
register_layer_formula(_NP + "Clip", opaque=False)(_per_output(2))
register_layer_formula(_NP + "Logaddexp", opaque=False)(_per_output(4))
for _op, _activation in ACTIVATION_OPS.items():
    register_layer_formula(_NN + _op, opaque=False)(_per_output(ACTIVATIONS[_activation]))


@register_layer_formula(_NN + "Gelu", opaque=False)
def gelu(call: LayerCall) -> Cost:
    """5 FLOPs per element (erf form), 9 with approximate=True (tanh form)."""
    per = c.GELU_TANH if getattr(call.layer, "approximate", False) else c.GELU
    return Cost.elementwise(per * float_elements(call.output))


@register_layer_formula(_NP + "Matmul", opaque=False)
def matmul(call: LayerCall) -> Cost:
    """numel(out) * k MACs (k: the contracted size, the last dim of the first operand)."""
    x1 = call.argument("x1", 0)
    return Cost.contraction(max(call.output.numel, 1) * x1.shape[-1])


@register_layer_formula(_NP + "Einsum", opaque=False)
def einsum(call: LayerCall) -> Cost:
    """One MAC per point of the joint index space (as torch's einsum)."""
    return einsum_cost(call.layer.subscripts, *(spec.shape for spec in call.args))


def _reduction(per_input: int, per_output: int = 0):
    def formula(call: LayerCall) -> Cost:
        x = call.input
        n = float_elements(x)
        return Cost.elementwise(per_input * n + per_output * (max(call.output.numel, 1) if n else 0))

    return named(formula, f"op_reduction_{per_input}N_{per_output}R",
                 f"{per_input} FLOP(s) per input element + {per_output} per output element.")


register_layer_formula(*(_NP + n for n in ("Sum", "Max", "Min", "Amax", "Amin", "Prod", "Cumsum", "Cumprod",
                                           "Argmax", "Argmin")), opaque=False)(_reduction(1))
register_layer_formula(_NP + "Mean", opaque=False)(_reduction(1, 1))
register_layer_formula(_NP + "Var", opaque=False)(_reduction(4, 2))
register_layer_formula(_NP + "Std", opaque=False)(_reduction(4, 3))
register_layer_formula(_MATH + "Logsumexp", opaque=False)(_reduction(4, 2))

register_free_layer(*FREE_OPS)
