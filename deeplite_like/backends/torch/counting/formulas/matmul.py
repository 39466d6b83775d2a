"""Matrix products: ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``mv``, ``dot``, ``linear``, ...

MACs are the multiply-accumulates of the product; a bias / ``self`` add is 1 FLOP per output
element (not a MAC), and ``alpha``/``beta`` other than 1 cost 1 FLOP per output element each.

What reaches the counter on CPU (torch 2.x): ``F.linear``/``nn.Linear`` arrive as ``addmm``
(or ``mm`` without bias) on inputs flattened to 2-D; ``torch.matmul`` arrives as ``dot``
(1-D @ 1-D), ``mv`` (n-D @ 1-D), ``mm`` (1-D/n-D @ 2-D) or ``bmm`` after broadcasting (the
expand/clone it does is free); ``einsum`` arrives as ``bmm`` for contractions, ``mul`` for
outer products (no accumulation: counted as elementwise) and ``sum`` for traces/reductions.
``matmul``/``linear``/``einsum`` themselves have formulas too, for callers that see them whole.
``_grouped_mm`` (mixture-of-experts layers: transformers 5's default ``grouped_mm`` experts) is
priced per group from ``offs``; on meta, from shapes (``meta_shapes.py`` gives its output there).
"""
from __future__ import annotations

import torch

from ..registry import Cost, OpCall, register_formula
from ._common import aten, bind, numel, ops, prod, scalar_is, shape
from .elementwise import GELU_TANH, RELU


def linear_cost(rows: int, in_features: int, out_features: int, bias: bool) -> Cost:
    """``rows`` vectors through an (in -> out) linear map: rows*in*out MACs, +rows*out for bias."""
    return Cost.contraction(rows * in_features * out_features, rows * out_features if bias else 0)


def _scale_flops(beta, alpha, outputs: int) -> int:
    """FLOPs of ``beta * self + alpha * product`` beyond the product itself."""
    flops = 0
    if not scalar_is(beta, 0):
        flops += outputs  # the add
        if not scalar_is(beta, 1):
            flops += outputs  # beta * self
    if not scalar_is(alpha, 1):
        flops += outputs  # alpha * product
    return flops


@register_formula(aten.mm, aten._int_mm)
def mm(call: OpCall) -> Cost:
    """(m, k) @ (k, n): m*n*k MACs."""
    (m, k), (_, n) = shape(call.args[0]), shape(call.args[1])
    return Cost.contraction(m * n * k)


@register_formula(aten._scaled_mm)
def scaled_mm(call: OpCall) -> Cost:
    """FP8 (m, k) @ (k, n) with scales: m*n*k MACs + m*n FLOPs to apply the scales (+m*n for a bias).

    The kernel multiplies each output by scale_a * scale_b (per tensor, row or column) as it
    stores it: one FLOP per output, and one more for a bias add.
    """
    a = bind(call)
    (m, k), (_, n) = shape(a["self"]), shape(a["mat2"])
    return Cost.contraction(m * n * k, m * n * (2 if a.get("bias") is not None else 1))


@register_formula(*ops("addmm", inplace=True))
def addmm(call: OpCall) -> Cost:
    """beta*self + alpha*(m, k) @ (k, n): m*n*k MACs + m*n FLOPs for the add (+m*n per alpha/beta != 1)."""
    a = bind(call)
    (m, k), (_, n) = shape(a["mat1"]), shape(a["mat2"])
    return Cost.contraction(m * n * k, _scale_flops(a["beta"], a["alpha"], m * n))


@register_formula(aten._addmm_activation)
def addmm_activation(call: OpCall) -> Cost:
    """addmm then ReLU (1 FLOP/element) or tanh-GELU (9 FLOPs/element, as ``gelu``)."""
    a = bind(call)
    (m, k), (_, n) = shape(a["mat1"]), shape(a["mat2"])
    activation = GELU_TANH if a["use_gelu"] else RELU
    return Cost.contraction(m * n * k, _scale_flops(a["beta"], a["alpha"], m * n) + activation * m * n)


@register_formula(aten.bmm)
def bmm(call: OpCall) -> Cost:
    """(b, m, k) @ (b, k, n): b*m*n*k MACs."""
    (b, m, k), (_, _, n) = shape(call.args[0]), shape(call.args[1])
    return Cost.contraction(b * m * n * k)


@register_formula(*ops("baddbmm", inplace=True))
def baddbmm(call: OpCall) -> Cost:
    """beta*self + alpha*(b, m, k) @ (b, k, n): b*m*n*k MACs + b*m*n FLOPs for the add."""
    a = bind(call)
    (b, m, k), (_, _, n) = shape(a["batch1"]), shape(a["batch2"])
    return Cost.contraction(b * m * n * k, _scale_flops(a["beta"], a["alpha"], b * m * n))


@register_formula(*ops("addbmm", inplace=True))
def addbmm(call: OpCall) -> Cost:
    """beta*self + alpha*sum_b (b, m, k) @ (b, k, n): b*m*n*k MACs + m*n FLOPs for the add."""
    a = bind(call)
    (b, m, k), (_, _, n) = shape(a["batch1"]), shape(a["batch2"])
    return Cost.contraction(b * m * n * k, _scale_flops(a["beta"], a["alpha"], m * n))


@register_formula(aten.mv)
def mv(call: OpCall) -> Cost:
    """(m, k) @ (k,): m*k MACs."""
    m, k = shape(call.args[0])
    return Cost.contraction(m * k)


@register_formula(*ops("addmv", inplace=True))
def addmv(call: OpCall) -> Cost:
    """beta*self + alpha*(m, k) @ (k,): m*k MACs + m FLOPs for the add."""
    a = bind(call)
    m, k = shape(a["mat"])
    return Cost.contraction(m * k, _scale_flops(a["beta"], a["alpha"], m))


@register_formula(aten.dot, aten.vdot)
def dot(call: OpCall) -> Cost:
    """(k,) . (k,): k MACs."""
    return Cost.contraction(numel(call.args[0]))


@register_formula(*ops("addr", inplace=True))
def addr(call: OpCall) -> Cost:
    """beta*self + alpha*outer(m, n): m*n products (MACs, as ``outer``) + m*n FLOPs for the add."""
    a = bind(call)
    m, n = numel(a["vec1"]), numel(a["vec2"])
    return Cost.contraction(m * n, _scale_flops(a["beta"], a["alpha"], m * n))


@register_formula(aten.outer, aten.ger)
def outer(call: OpCall) -> Cost:
    """outer(m, n): m*n products, counted as MACs (rarely seen: CPU runs it as ``mul``)."""
    return Cost.contraction(numel(call.args[0]) * numel(call.args[1]))


@register_formula(aten.linear)
def linear(call: OpCall) -> Cost:
    """x (..., in) @ W(out, in)^T [+ b]: rows*in*out MACs, +rows*out FLOPs for the bias."""
    a = bind(call)
    out_features, in_features = shape(a["weight"]) if a["weight"].dim() == 2 else (1, shape(a["weight"])[0])
    rows = numel(a["input"]) // max(in_features, 1)
    return linear_cost(rows, in_features, out_features, a["bias"] is not None)


@register_formula(aten.matmul)
def matmul(call: OpCall) -> Cost:
    """Broadcast matmul: one MAC per output element per reduced element, numel(out) * k."""
    return Cost.contraction(numel(call.out) * shape(call.args[0])[-1])


def _term_sizes(term: str, dims: tuple[int, ...]) -> dict[str, int]:
    """Letter -> size for one einsum operand; ellipsis dims are named ``*0``, ``*1``... from the right."""
    if "..." not in term:
        return dict(zip(term, dims))
    before, after = term.split("...")
    middle = dims[len(before): len(dims) - len(after)]
    sizes = dict(zip(before, dims[: len(before)]))
    sizes.update(zip(after, dims[len(dims) - len(after):]))
    sizes.update({f"*{i}": d for i, d in enumerate(reversed(middle))})
    return sizes


@register_formula(aten.einsum)
def einsum(call: OpCall) -> Cost:
    """einsum: one MAC per point of the product space of all letters (bij,bjk->bik: b*i*j*k); FLOPs only
    when nothing is summed (i,j->ij: i*j multiplies) or for one operand (ii->: the trace, i adds).

    With three or more operands this prices one joint product space, an upper bound of the
    pairwise path torch runs (on CPU einsum decomposes and is never seen whole).
    """
    equation, operands = call.args[0].replace(" ", ""), call.args[1]
    inputs, _, output = equation.partition("->")
    sizes: dict[str, int] = {}
    for term, operand in zip(inputs.split(","), operands):
        for letter, size in _term_sizes(term, shape(operand)).items():
            sizes[letter] = max(sizes.get(letter, 1), size)
    if not _:  # implicit output: the letters that appear once
        output = "".join(c for c in sizes if c.isalpha() and inputs.count(c) == 1)
    summed = any(c.isalpha() and c not in output for c in sizes)
    if len(operands) == 1:
        return Cost.elementwise(prod(sizes.values()) if summed else 0)
    if not summed:
        return Cost.elementwise(prod(sizes.values()))
    return Cost.contraction(prod(sizes.values()))


@register_formula(aten._trilinear)
def trilinear(call: OpCall) -> Cost:
    """``nn.Bilinear``'s kernel: two pairwise contractions; for (B, I) x W(O, I, J) x (B, J): B*O*J*(I+1) MACs."""
    a = bind(call)
    i1, i2, i3 = a["i1"], a["i2"], a["i3"]
    total = i1.dim() + len(a["expand1"])
    expand = [set(a["expand1"]), set(a["expand2"]), set(a["expand3"])]
    sumdim, unroll = set(a["sumdim"]), a["unroll_dim"]
    sizes, present = [1] * total, [set(), set(), set()]
    for t, (tensor, expanded) in enumerate(zip((i1, i2, i3), expand)):
        it = iter(shape(tensor))
        for d in range(total):
            if d not in expanded:
                sizes[d] = next(it)
                present[t].add(d)
    first = present[0] | present[1]
    summed_first = {d for d in sumdim if d in expand[2] and d != unroll}
    second = (first - summed_first) | present[2]
    return Cost.contraction(prod(sizes[d] for d in first) + prod(sizes[d] for d in second))


def _routed(offs, total: int) -> int:
    """How much of a grouped dimension of size ``total`` the groups cover: ``offs[-1]`` (the end of
    the last group) when ``offs`` has values, else ``total`` (meta and fake tensors: from shapes).

    transformers' mixture-of-experts layers pass exactly the routed rows, so ``offs[-1] == total``
    there and the two agree; on meta the per-expert split is unknown but the total is not.
    """
    if offs is None or type(offs) is not torch.Tensor or offs.is_meta or offs.numel() == 0:
        return total
    return min(int(offs[-1]), total)


@register_formula(*ops("_grouped_mm", "_scaled_grouped_mm"))
def grouped_mm(call: OpCall) -> Cost:
    """Grouped matmul, one product per group (``offs``: cumulative group ends), by operand ranks:

    2-D (M, K) x 3-D (G, K, N), rows split by ``offs``: rows*K*N MACs (rows = offs[-1]);
    3-D (G, M, K) x 3-D (G, K, N): G*M*K*N; 2-D (M, K) x 2-D (K, N), K split (the weight gradient):
    M*k*N (k = offs[-1]); 3-D (G, M, K) x 2-D (K, N), N split: M*K*n (n = offs[-1]).
    A bias adds 1 FLOP per computed output element, and so do the scales of the FP8 form. Its
    backward runs ``_grouped_mm`` again.
    """
    a = bind(call)
    left, right, offs = shape(a["self"]), shape(a["mat2"]), a["offs"]
    if len(left) == 2 and len(right) == 3:
        (rows, k), n = left, right[2]
        rows = _routed(offs, rows)
        outputs = rows * n
        macs = rows * k * n
    elif len(left) == 3 and len(right) == 3:
        (g, m, k), n = left, right[2]
        outputs = g * m * n
        macs = outputs * k
    elif len(left) == 2:
        (m, k), n = left, right[1]
        k = _routed(offs, k)
        outputs = m * n * (int(offs.shape[0]) if offs is not None else 1)
        macs = m * k * n
    else:
        (_, m, k), n = left, right[1]
        n = _routed(offs, n)
        outputs = m * n
        macs = m * k * n
    scales = outputs if "scale_a" in a else 0  # ``_scaled_grouped_mm`` scales each output, as ``_scaled_mm``
    return Cost.contraction(macs, scales + (outputs if a["bias"] is not None else 0))


@register_formula("transformers::grouped_mm_fallback")
def grouped_mm_fallback(call: OpCall) -> Cost:
    """transformers' own grouped matmul (its fallback where ``_grouped_mm`` cannot run): input (S, K) x
    weight (G, K, N) split by ``offs``: rows*K*N MACs, as ``_grouped_mm`` 2-D x 3-D. Kept by name."""
    x, weight, offs = call.args[:3]
    (rows, k), n = shape(x), shape(weight)[2]
    return Cost.contraction(_routed(offs, rows) * k * n)


@register_formula("transformers::grouped_mm_fallback_backward")
def grouped_mm_fallback_backward(call: OpCall) -> Cost:
    """Its backward: dX = dY W^T and dW = X^T dY per group, 2*rows*K*N MACs."""
    x, weight, offs = call.args[:3]
    (rows, k), n = shape(x), shape(weight)[2]
    return Cost.contraction(2 * _routed(offs, rows) * k * n)
