"""Keras on TensorFlow: what one executed TensorFlow operation costs (``tf_op_cost``), and TensorFlow's
own count of a traced graph (``count_graph``); the twin of ``jax_ops.py`` and ``torch_ops.py``.

**One operation**, priced with the torch backend's conventions: inputs and outputs are TensorFlow
tensors (anything with ``.shape`` and ``.dtype``), and pricing imports no TensorFlow.
``tf_op_cost`` prices one executed operation and lists the rules.

**The traced graph** (``count_ops(..., method='graph')``, TensorFlow's profiler).
The model is traced once as a ``tf.function`` into a concrete function whose input signature
has the *fixed* shapes of the inputs given, batch included, and
``tf.compat.v1.profiler.profile(graph, options=float_operation())`` sums the ``float_ops`` of
its nodes. The batch must be fixed: with an unknown batch dimension TensorFlow's FLOP
statistics cannot size the tensors, and those nodes are silently left out (an undercount, not
an error).

What TensorFlow counts, compared with the analytic count (``by_operator`` holds TF op types):

* a multiply-accumulate is 2 float ops (MatMul, BatchMatMul, Conv2D, DepthwiseConv2dNative,
  Conv2DBackpropInput): ``macs`` here is half the float ops of those contraction types;
* BiasAdd and AddV2 count 1 per output element, MaxPool K per output element: the same as
  the analytic count;
* AvgPool counts K per output (analytic: K + 1, the divide), Mean N (analytic global
  average pooling: N + outputs), and batch normalisation decomposes into Rsqrt/Mul/Sub/AddV2
  counted one by one;
* Conv2DBackpropInput (a transposed convolution) is priced by TensorFlow as the dense
  gradient of a convolution, not as the analytic input x kernel x filters;
* activations (Relu, Sigmoid, Tanh, Exp...), ``Einsum`` and loops (``While``, the body of a
  recurrent layer) have no FLOP statistic, nor do ops inside nested functions
  (``StatefulPartitionedCall``: Keras runs grouped convolutions through XLA on CPU): they
  count 0 and are listed in ``OpCount.untracked`` by TF op type, with ops that cost nothing
  (reads, reshapes, casts) excluded.

So the two methods agree exactly on models made of Dense, EinsumDense (when TensorFlow lowers
its einsum to a MatMul), Conv1D/2D/3D (not grouped), DepthwiseConv2D and SeparableConv2D
layers without activation, max pooling and residual adds (tests/keras/test_count_graph.py);
elsewhere ``untracked`` and ``by_operator`` show where they part.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Sequence

from deeplite_like.errors import CountingError, UntrackedLayerWarning
from deeplite_like.results import OpCount, OpStats

from .._tf import import_keras, import_tensorflow, native_output_silenced
from .formulas._common import einsum_cost


__all__ = ["FREE_TF_OPS", "TF_COSTS", "TF_FREE", "count_graph", "tf_op_cost"]

#: TF op types that move, view, read, create or compare data: free. (Variable updates other
#: than a plain assignment are priced by ``TF_COSTS``.)
FREE_TF_OPS = frozenset({
    "Placeholder", "Const", "Identity", "IdentityN", "NoOp", "ReadVariableOp", "VarHandleOp", "Reshape", "Shape",
    "ShapeN", "Size", "Rank", "Cast", "Transpose", "ConcatV2", "Concat", "Pack", "Unpack", "StridedSlice", "Slice",
    "Squeeze", "ExpandDims", "Pad", "PadV2", "MirrorPad", "GatherV2", "ResourceGather", "Fill", "ZerosLike",
    "OnesLike", "Tile", "BroadcastTo", "Split", "SplitV", "Range", "StopGradient", "PreventGradient", "Select",
    "SelectV2", "Where", "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd",
    "LogicalOr", "LogicalNot", "ResizeNearestNeighbor", "OneHot", "Snapshot", "EnsureShape", "CheckNumerics",
    "_Arg", "_Retval", "DepthToSpace", "SpaceToDepth", "SpaceToBatchND", "BatchToSpaceND", "ReverseV2",
    "TensorListReserve", "TensorListFromTensor", "TensorListStack", "TensorListGetItem", "TensorListSetItem",
    "StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessRandomGetKeyCounter", "RandomUniform",
    "RandomStandardNormal", "AssignVariableOp",
})


def _numel(shape: Any) -> int:
    return math.prod(int(d) for d in shape) if shape is not None else 0


def _is_float(tensor: Any) -> bool:
    dtype = getattr(tensor, "dtype", None)
    return dtype is not None and (dtype.is_floating or dtype.is_complex)


def _attr(attrs: Any, key: str, default: Any = None) -> Any:
    """An attribute from the op callback's flat ``(name, value, name, value, ...)`` tuple."""
    items = tuple(attrs or ())
    for i in range(0, len(items) - 1, 2):
        if items[i] == key:
            return items[i + 1]
    return default


def _out_elements(inputs: Sequence[Any], outputs: Sequence[Any]) -> int:
    """Elements of the first output when it is floating point (of the value written, for Assign*)."""
    target = outputs[0] if outputs else (inputs[1] if len(inputs) > 1 else None)
    return _numel(target.shape) if target is not None and _is_float(target) else 0


def _per_element(flops: int) -> Callable:
    def cost(inputs, attrs, outputs):
        return 0, flops * _out_elements(inputs, outputs)
    return cost


def _reduction(per_input: int, per_output: int = 0) -> Callable:
    def cost(inputs, attrs, outputs):
        if not _is_float(inputs[0]):
            return 0, 0
        n = _numel(inputs[0].shape)
        return 0, per_input * n + per_output * max(_numel(outputs[0].shape) if outputs else 1, 1)
    return cost


def _matmul(inputs, attrs, outputs):
    """(m, k) @ (k, n) with transposes or batch adjoints: m*n*k MACs (per batch matrix).

    With k = 1 nothing is summed (an outer product: ``tf.einsum('t,f->tf')`` lowers to one):
    one multiply per output element, FLOPs only, as the einsum rule.
    """
    a = inputs[0].shape
    adjoint = _attr(attrs, "transpose_a", False) or _attr(attrs, "adj_x", False)
    k = int(a[-2] if adjoint else a[-1])
    if k == 1:
        return 0, _out_elements(inputs, outputs)
    return _contraction(_numel(outputs[0].shape) * k, outputs)


def _contraction(macs: int, outputs: Sequence[Any]) -> tuple[int, int]:
    if outputs and not _is_float(outputs[0]):
        return 0, 0
    return macs, 2 * macs


def _conv(inputs, attrs, outputs):
    """Conv2D / Conv3D (filter ``(*k, cin/groups, cout)``): out elements x prod(k) x cin/groups MACs."""
    return _contraction(_numel(outputs[0].shape) * _numel(inputs[1].shape[:-1]), outputs)


def _depthwise(inputs, attrs, outputs):
    """DepthwiseConv2dNative (filter ``(kh, kw, cin, multiplier)``): out elements x kh*kw MACs."""
    return _contraction(_numel(outputs[0].shape) * _numel(inputs[1].shape[:-2]), outputs)


def _einsum(inputs, attrs, outputs):
    """One MAC per point of the joint index space (as torch's einsum; ``formulas._common.einsum_cost``)."""

    equation = _attr(attrs, "equation", b"")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    if outputs and not _is_float(outputs[0]):
        return 0, 0
    cost = einsum_cost(equation, *(tuple(int(d) for d in t.shape) for t in inputs))
    return cost.macs, cost.flops


def _pool(extra: int) -> Callable:
    """MaxPool: K per output element (as the MaxPooling formula); AvgPool: K + 1 (the divide)."""
    def cost(inputs, attrs, outputs):
        window = math.prod(int(v) for v in _attr(attrs, "ksize", (1,)))
        return 0, (window + extra) * _out_elements(inputs, outputs)
    return cost


def _fused_batch_norm(inputs, attrs, outputs):
    """As the BatchNormalization formula: inference 2N + 2C + N (scale) + N (offset); training 6N + 4C + 2N."""
    n, channels = _numel(inputs[0].shape), _numel(inputs[1].shape)
    if _attr(attrs, "is_training", False):
        return 0, 8 * n + 4 * channels
    return 0, 4 * n + 2 * channels


def _fft_length(inputs, outputs) -> int:
    """The transform length N of an RFFT / IRFFT: its ``fft_length`` input (a 1-element tensor)."""
    length = inputs[1] if len(inputs) > 1 else None
    if length is not None and hasattr(length, "numpy"):
        return int(length.numpy().reshape(-1)[-1])
    return 2 * (int(outputs[0].shape[-1]) - 1) if outputs else 0


def _fft(real: bool) -> Callable:
    """A complex N-point FFT is 5 N log2 N FLOPs per transform (the radix-2 count); one of a real
    signal (RFFT, IRFFT) half that, 2.5 N log2 N. Transforms = elements / the last dim."""
    def cost(inputs, attrs, outputs):
        if real:
            n = _fft_length(inputs, outputs)
            complex_side = inputs[0] if inputs[0].dtype.is_complex else outputs[0]
        else:
            n, complex_side = int(inputs[0].shape[-1]), inputs[0]
        transforms = _numel(complex_side.shape) // max(int(complex_side.shape[-1]), 1)
        if n < 2:
            return 0, 0
        per = 5 * n * math.log2(n) / (2 if real else 1)
        return 0, int(round(transforms * per))
    return cost


def _conv_backprop_input(inputs, attrs, outputs):
    """Conv backprop to the input (also a transposed conv's forward): the forward conv's MACs."""
    filt, grad = inputs[1], inputs[2]
    return _contraction(_numel(grad.shape) * _numel(filt.shape[:-1]), outputs)


def _conv_backprop_filter(inputs, attrs, outputs):
    """Conv backprop to the filter: the forward conv's MACs (grad elements x kh*kw*cin)."""
    return _contraction(_numel(inputs[2].shape) * _numel(outputs[0].shape[:-1]), outputs)


def _depthwise_backprop_input(inputs, attrs, outputs):
    return _contraction(_numel(inputs[2].shape) * _numel(inputs[1].shape[:-2]), outputs)


def _depthwise_backprop_filter(inputs, attrs, outputs):
    return _contraction(_numel(inputs[2].shape) * _numel(outputs[0].shape[:-2]), outputs)


def _max_pool_grad(inputs, attrs, outputs):
    """One add per grad_output element (as torch's max-pool backward)."""
    return 0, _numel(inputs[2].shape)


def _avg_pool_grad(inputs, attrs, outputs):
    """(K + 1) per grad_output element, K the window size (as torch's avg-pool backward)."""
    window = math.prod(int(v) for v in _attr(attrs, "ksize", (1,)))
    return 0, (window + 1) * _numel(inputs[1].shape)


def _batch_norm_grad(inputs, attrs, outputs):
    """As torch's batch-norm backward: training 13N + 2C (input 9N + 2C, scale N, weight 2N, bias N); eval 7N."""
    n, c = _numel(inputs[1].shape), _numel(inputs[2].shape)
    return 0, (13 * n + 2 * c) if _attr(attrs, "is_training", True) else 7 * n


def _add_n(inputs, attrs, outputs):
    """k - 1 adds per output element for k inputs."""
    return 0, (len(inputs) - 1) * _out_elements(inputs, outputs)


def _sparse_cross_entropy(inputs, attrs, outputs):
    """Log-softmax 5N + the picked values B (the loss, as torch) + its gradient, made in the same op: 2N."""
    n, b = _numel(inputs[0].shape), _numel(inputs[1].shape)
    return 0, 7 * n + b


def _dense_cross_entropy(inputs, attrs, outputs):
    """Log-softmax 5N + label products and their sum 2N + the gradient made in the same op 2N."""
    return 0, 9 * _numel(inputs[0].shape)


def _scatter(inputs, attrs, outputs):
    """Scatter-add or -sub of the updates (embedding gradients): 1 per update element."""
    return 0, _numel(inputs[2].shape) if _is_float(inputs[2]) else 0


#: TensorFlow op type -> ``cost(inputs, attrs, outputs) -> (macs, flops)``.
TF_COSTS: dict[str, Callable] = {
    **{name: _per_element(1) for name in (
        "AddV2", "Add", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "MulNoNan", "Neg", "Square", "Sqrt", "Rsqrt",
        "Reciprocal", "Inv", "Exp", "Expm1", "Log", "Log1p", "Abs", "Sign", "Maximum", "Minimum", "Pow", "Floor",
        "Ceil", "Round", "Rint", "Erf", "Erfc", "Tanh", "Relu", "Relu6", "FloorMod", "Mod", "FloorDiv", "BiasAdd",
        "ReluGrad", "Relu6Grad", "AssignAddVariableOp", "AssignSubVariableOp", "Sin", "Cos", "Tan", "Asin",
        "Acos", "Atan", "Atan2", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Exp2", "Log2", "Truncatediv",
        "TruncateMod", "Xlogy", "Xdivy", "Softsign")},
    **{name: _per_element(2) for name in ("SquaredDifference", "ClipByValue", "LeakyRelu", "LeakyReluGrad",
                                          "SqrtGrad", "ReciprocalGrad")},
    **{name: _per_element(3) for name in ("SigmoidGrad", "TanhGrad", "EluGrad", "SeluGrad", "Elu", "Softplus",
                                          "RsqrtGrad")},
    "Sigmoid": _per_element(4), "SoftplusGrad": _per_element(5), "Softmax": _per_element(5),
    "LogSoftmax": _per_element(5), "Selu": _per_element(5),
    "Sum": _reduction(1), "Prod": _reduction(1), "Max": _reduction(1), "Min": _reduction(1),
    "ArgMax": _reduction(1), "ArgMin": _reduction(1), "Mean": _reduction(1, 1), "BiasAddGrad": _reduction(1),
    "L2Loss": _reduction(2), "EuclideanNorm": _reduction(2, 1), "AddN": _add_n,
    "Conv2D": _conv, "Conv3D": _conv, "DepthwiseConv2dNative": _depthwise, "Einsum": _einsum,
    "MaxPool": _pool(0), "MaxPoolV2": _pool(0), "MaxPool3D": _pool(0), "AvgPool": _pool(1), "AvgPool3D": _pool(1),
    "FusedBatchNormV3": _fused_batch_norm, "FusedBatchNorm": _fused_batch_norm,
    "RFFT": _fft(True), "IRFFT": _fft(True), "FFT": _fft(False), "IFFT": _fft(False), "ComplexAbs": _per_element(4),
    "Cumsum": _reduction(1), "Cumprod": _reduction(1),
    "MatMul": _matmul, "BatchMatMul": _matmul, "BatchMatMulV2": _matmul, "BatchMatMulV3": _matmul,
    "Conv2DBackpropInput": _conv_backprop_input, "Conv2DBackpropFilter": _conv_backprop_filter,
    "Conv3DBackpropInputV2": _conv_backprop_input, "Conv3DBackpropFilterV2": _conv_backprop_filter,
    "DepthwiseConv2dNativeBackpropInput": _depthwise_backprop_input,
    "DepthwiseConv2dNativeBackpropFilter": _depthwise_backprop_filter,
    "MaxPoolGrad": _max_pool_grad, "MaxPoolGradV2": _max_pool_grad, "MaxPool3DGrad": _max_pool_grad,
    "AvgPoolGrad": _avg_pool_grad, "AvgPool3DGrad": _avg_pool_grad,
    "FusedBatchNormGradV3": _batch_norm_grad, "FusedBatchNormGradV2": _batch_norm_grad,
    "SparseSoftmaxCrossEntropyWithLogits": _sparse_cross_entropy,
    "SoftmaxCrossEntropyWithLogits": _dense_cross_entropy,
    "ResourceScatterAdd": _scatter, "ResourceScatterSub": _scatter, "UnsortedSegmentSum": _reduction(1),
}


#: Op types free at run time: ``FREE_TF_OPS`` and the other moves, reads and bookkeeping a
#: training step runs (gradient shape helpers, resource management, checkpoints).
TF_FREE = frozenset(FREE_TF_OPS | {
    "BroadcastGradientArgs", "StridedSliceGrad", "ConcatOffset", "InvertPermutation",
    "VarIsInitializedOp", "DestroyResourceOp", "GatherNd", "ScatterNd", "TensorScatterUpdate",
    "Empty", "Copy", "CopyHost", "DeepCopy", "StatelessRandomUniformIntV2",
    "RandomUniformInt", "Bitcast", "IsFinite", "IsNan", "IsInf", "All", "Any", "MatrixDiag",
    "MatrixBandPart", "LinSpace", "Unique", "TopKV2", "Relu6GradGrad", "EmptyTensorList", "SaveV2", "RestoreV2",
    # complex parts, shapes, and what lookup / encoding layers run (integer and string work)
    "Real", "Imag", "Complex", "BroadcastArgs", "LookupTableFindV2", "LookupTableSizeV2", "LookupTableImportV2",
    "HashTableV2", "MutableHashTableV2", "Bucketize", "StringToHashBucketFast", "StringToHashBucketStrong",
    "Bincount", "DenseBincount", "RaggedBincount", "SparseBincount", "SparseCross", "SparseCrossHashed",
    "RaggedTensorToTensor", "StringLower", "StaticRegexReplace", "StringSplitV2", "UniqueV2",
})


def tf_op_cost(op_type: str, inputs: Sequence[Any], attrs: Any, outputs: Sequence[Any]) -> tuple[int, int] | None:
    """``(macs, flops)`` of one executed TensorFlow op; ``(0, 0)`` when free; ``None`` when unknown.

    ``KerasFlopsProfiler`` (Keras on TensorFlow) sees every eager operation of a training step
    through an op callback - the backward pass, the optimizer's update, the loss - with its
    inputs' and outputs' shapes; ``tf_op_cost`` prices one. The rules are the torch backend's:

        MatMul / BatchMatMul*             m*n*k MACs (per batch matrix), 2 FLOPs per MAC (k = 1: m*n FLOPs)
        Conv2D / Conv3D / Depthwise       out elements x window x in-channels per group MACs
        Einsum                            the joint index space (as the einsum layer formula)
        MaxPool / AvgPool                 K / K + 1 per output element; FusedBatchNorm as BatchNormalization
        FFT / IFFT                        5 N log2 N per complex transform; RFFT / IRFFT 2.5 N log2 N
        Conv*BackpropInput / Filter       the forward convolution's MACs (as torch's convolution_backward)
        elementwise math, activations     1 FLOP per float output element (Sigmoid 4, Softmax 5, ...)
        activation gradients              as torch's *_backward (ReluGrad 1, SigmoidGrad 3, ...)
        reductions                        1 per input element (Mean: + 1 per output element)
        pooling gradients                 max: 1 per grad element; average: window + 1
        FusedBatchNormGrad                training 13N + 2C, inference 7N (as torch's batch-norm backward)
        cross-entropy with logits         the log-softmax, the picked values and the gradient made with them
        Assign{Add,Sub}VariableOp         1 per element (an optimizer's ``p -= lr * g``: torch's ``add_``)
        moves, reads, casts, comparisons  free (``TF_FREE``)

    Integer arithmetic (step counters, indices) is book-keeping: 0. An op type in neither table is
    *untracked* (``tf_op_cost`` returns ``None``). ``FREE_TF_OPS`` is also what
    ``count_ops(method='graph')`` leaves out of its untracked list.
    """
    if op_type in TF_FREE:
        return 0, 0
    cost = TF_COSTS.get(op_type)
    if cost is None:
        return None
    macs, flops = cost(inputs, attrs, outputs)
    return int(macs), int(flops)


# -- count_ops(..., method='graph'): TensorFlow's profiler on the model's traced graph -----------------------
#: TF op types whose float ops are 2 per multiply-accumulate.
CONTRACTIONS = frozenset({
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D", "Conv3D", "DepthwiseConv2dNative",
    "Conv2DBackpropInput", "Conv3DBackpropInputV2", "Einsum",
})

#: TF op types that need no FLOP statistic: the free ones (``FREE_TF_OPS`` above), and the
#: variable increments a forward graph may hold (counters), which are not the model's arithmetic.
NO_STATISTIC_NEEDED = FREE_TF_OPS | {"AssignAddVariableOp"}


def count_graph(model: Any, inputs: Any, *, training: bool = False, batch_size: int | None = None,
                warn_untracked: bool = True) -> OpCount:
    """TF profiler float ops of ``model(inputs, training=training)`` traced at the inputs' fixed shapes."""
    keras = import_keras()
    if keras.config.backend() != "tensorflow":
        raise CountingError(f"method='graph' profiles a TensorFlow graph and needs Keras' TensorFlow backend; "
                            f"keras.config.backend() is {keras.config.backend()!r}. Use method='analytic' "
                            "(any backend), or run under the TensorFlow backend (KERAS_BACKEND=tensorflow set "
                            "before Keras is imported).")
    tf = import_tensorflow()
    signature = keras.tree.map_structure(lambda t: tf.TensorSpec(tuple(t.shape), t.dtype),
                                         keras.tree.map_structure(tf.convert_to_tensor, inputs))
    for spec in tf.nest.flatten(signature):
        if any(d is None for d in spec.shape):
            raise ValueError(f"method='graph' needs fully known input shapes (got {spec.shape}): with an unknown "
                             "dimension TensorFlow's profiler leaves nodes out and undercounts")

    def forward(x):
        return model(x, training=training)

    concrete = tf.function(forward, autograph=False).get_concrete_function(signature)
    graph = concrete.graph
    profile = _profile(tf, graph)

    result = OpCount(batch_size=batch_size)
    root = result.by_module[""] = OpStats()
    for node in _leaves(profile):
        op = _operation(graph, node.name)
        op_type = op.type if op is not None else node.name
        stats = result.by_operator.setdefault(op_type, OpStats())
        stats.flops += int(node.float_ops)
        stats.calls += 1
    for op_type, stats in result.by_operator.items():
        if op_type in CONTRACTIONS:
            stats.macs = stats.flops // 2
    result.macs = sum(s.macs for s in result.by_operator.values())
    result.flops = int(profile.total_float_ops)
    root.add(result.macs, result.flops, 1)
    result.module_ops[""] = dict(result.by_operator)
    result.untracked = _without_statistic(graph, set(result.by_operator))
    if warn_untracked and result.untracked:
        listing = ", ".join(f"{k} ({v})" for k, v in sorted(result.untracked.items()))
        warnings.warn(f"TensorFlow has no FLOP statistic for {len(result.untracked)} op type(s) in the graph, "
                      f"counted as 0 by method='graph': {listing}. Compare with method='analytic'.",
                      UntrackedLayerWarning, stacklevel=3)
    return result


def _profile(tf: Any, graph: Any) -> Any:
    """The profiler's 'scope' view of the graph's float ops, its native output silenced."""
    from tensorflow.python.profiler import option_builder
    from tensorflow.python.util import deprecation

    options = option_builder.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    with native_output_silenced() as captured, deprecation.silence():
        try:
            return tf.compat.v1.profiler.profile(graph=graph, options=options, cmd="scope")
        except Exception as exc:  # the profiler's errors carry no location; add what it printed
            error = exc
    raise CountingError(f"TensorFlow's profiler failed on the traced graph: {type(error).__name__}: {error}"
                        + (f"\nIt printed:\n{captured.text.strip()}" if captured.text.strip() else "")) from error


def _leaves(node: Any):
    """Profiler nodes that carry float ops themselves (graph nodes, not only scopes)."""
    for child in node.children:
        if int(child.float_ops):
            yield child
        yield from _leaves(child)


def _operation(graph: Any, name: str) -> Any:
    try:
        return graph.get_operation_by_name(name)
    except (KeyError, ValueError):
        return None


def _without_statistic(graph: Any, counted_types: set[str]) -> dict[str, int]:
    """TF op types in the graph with no FLOP statistic that are not known to be free, with counts."""
    from tensorflow.python.framework import ops as tf_ops
    from tensorflow.python.util import deprecation

    missing: dict[str, int] = {}
    known: dict[str, bool] = {}
    with deprecation.silence():
        for op in graph.get_operations():
            if op.type in NO_STATISTIC_NEEDED or op.type in counted_types:
                continue
            has_statistic = known.get(op.type)
            if has_statistic is None:
                try:
                    stat = tf_ops.get_stats_for_node_def(graph, op.node_def, "flops")
                    has_statistic = stat.value is not None
                except (ValueError, KeyError, TypeError):
                    has_statistic = False
                known[op.type] = has_statistic
            if not has_statistic:
                missing[op.type] = missing.get(op.type, 0) + 1
    return missing
