"""``count_ops(..., method='graph')``: TensorFlow's profiler on the model's traced graph.

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

import warnings
from typing import Any

from deeplite_like.errors import CountingError, UntrackedLayerWarning
from deeplite_like.results import OpCount, OpStats

from .._tf import import_keras, import_tensorflow, native_output_silenced
from .formulas.tf_ops import FREE_TF_OPS

#: TF op types whose float ops are 2 per multiply-accumulate.
CONTRACTIONS = frozenset({
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D", "Conv3D", "DepthwiseConv2dNative",
    "Conv2DBackpropInput", "Conv3DBackpropInputV2", "Einsum",
})

#: TF op types that need no FLOP statistic: the free ones (``formulas.tf_ops``), and the
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
