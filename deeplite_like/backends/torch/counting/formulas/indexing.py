"""Indexing that does arithmetic: bags of embeddings, scatter-adds, and their backward.

A plain look-up (``embedding``, ``index_select``, ``gather``) moves data and is free
(free.py); summing what was looked up is not::

    embedding_bag   sum: n*D adds (+n*D multiplies with per_sample_weights); mean: + bags*D
                    divides; max: n*D (n = indices, D = embedding size)
    index_add, scatter_add, scatter_reduce, index_reduce, index_put/put with accumulate:
                    1 FLOP per source element (+1 when alpha != 1 / reduce='mean' divides)
    embedding backward (dense): one add per grad element (+1 with scale_grad_by_freq)
    embedding max_norm renorm: per looked-up row a norm (2D + 1) and a rescale (D)
    col2im (F.fold): overlapping patches are summed, 1 per input element
"""
from __future__ import annotations

from ..registry import Cost, OpCall, register_formula
from ._common import bind, first_tensor, is_float, numel, ops, per_input_element, scalar_is, shape


@register_formula(*ops("_embedding_bag", "_embedding_bag_forward_only", "embedding_bag"))
def embedding_bag(call: OpCall) -> Cost:
    """Embedding bag: sum n*D (+n*D per-sample weights), mean n*D + bags*D, max n*D FLOPs."""
    a = bind(call)
    out = first_tensor(call.out)
    if not is_float(out):
        return Cost()
    dim = shape(a["weight"])[-1]
    looked_up = numel(a["indices"]) * dim
    flops = looked_up
    if a.get("per_sample_weights") is not None:
        flops += looked_up
    if int(a.get("mode") or 0) == 1:
        flops += numel(out)
    return Cost.elementwise(flops)


@register_formula(*ops("embedding_dense_backward", "embedding_backward"))
def embedding_backward(call: OpCall) -> Cost:
    """Embedding backward: grads scatter-added into the table, 1 per grad element (+1 scale_grad_by_freq)."""
    a = bind(call)
    grad = a.get("grad_output", a.get("grad"))
    if not is_float(grad):
        return Cost()
    return Cost.elementwise(numel(grad) * (2 if a.get("scale_grad_by_freq") else 1))


@register_formula(*ops("_embedding_bag_backward", "_embedding_bag_dense_backward", "_embedding_bag_sparse_backward"))
def embedding_bag_backward(call: OpCall) -> Cost:
    """Embedding bag backward: each looked-up row gets its bag's grad added, n*D (+n*D weights, +n*D mean)."""
    a = bind(call)
    grad = a["grad"]
    if not is_float(grad):
        return Cost()
    looked_up = numel(a["indices"]) * shape(grad)[-1]
    flops = looked_up + (looked_up if a.get("per_sample_weights") is not None else 0)
    flops += looked_up if int(a.get("mode") or 0) == 1 else 0
    return Cost.elementwise(flops)


def _accumulate(call: OpCall, source_name: str) -> Cost:
    a = bind(call)
    source = a[source_name]
    if not is_float(first_tensor(call.out)):
        return Cost()
    per = 1
    if not scalar_is(a.get("alpha", 1), 1):
        per += 1
    n = numel(source)
    extra = numel(first_tensor(call.out)) if a.get("reduce") == "mean" else 0
    return Cost.elementwise(per * n + extra)


@register_formula(*ops("index_add", "index_reduce", inplace=True))
def index_add(call: OpCall) -> Cost:
    """index_add / index_reduce: 1 FLOP per source element (+1 alpha != 1; mean: + a divide per output)."""
    return _accumulate(call, "source")


@register_formula(*ops("scatter_add", "scatter_reduce", inplace=True))
def scatter_add(call: OpCall) -> Cost:
    """scatter_add / scatter_reduce: 1 FLOP per src element (mean: + a divide per output)."""
    return _accumulate(call, "src")


@register_formula(*ops("index_put", "_index_put_impl", "put", inplace=True))
def index_put(call: OpCall) -> Cost:
    """index_put / put: free (a write); with accumulate=True 1 add per value written."""
    a = bind(call)
    if not a.get("accumulate"):
        return Cost()
    values = a.get("values", a.get("source"))
    return Cost.elementwise(numel(values)) if is_float(values) else Cost()


register_formula(*ops("col2im"))(
    per_input_element(1, "col2im (``F.fold``): overlapping patch values are summed, 1 FLOP per input element."))


@register_formula(*ops("embedding_renorm", inplace=True))
def embedding_renorm(call: OpCall) -> Cost:
    """``max_norm`` renorm of the looked-up rows: per index, a norm (2D + 1) and a rescale (D) = 3D + 1."""
    a = bind(call)
    table = a["self"]
    if not is_float(table):
        return Cost()
    return Cost.elementwise(numel(a["indices"]) * (3 * shape(table)[-1] + 1))
