"""Linear algebra: matrix products (``mm``, ``linear``, ``einsum``...), and decompositions, solves,
inverses and FFTs.

**Matrix products**: ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``mv``, ``dot``, ``linear``, ...

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

**Decompositions, solves and inverses** (``torch.linalg``), by their standard counts.

Sources: LAPACK Working Note 41 (Blackford & Dongarra, "Installation Guide for LAPACK",
appendix: operation counts of the LAPACK routines) for the factorizations and solves, and
Golub & Van Loan, *Matrix Computations* (4th ed., sections 8.3 and 8.6, 7.5) for the
iterative ones (symmetric and general eigenvalue problems, the SVD). Leading terms only, real
arithmetic (a complex matrix is priced as a real one of the same shape). A is (m, n);
square n x n unless stated; B has k columns.

    cholesky                  n^3 / 3                   (potrf)
    lu_factor, lu, det,       m n^2 - n^3 / 3, m >= n   (getrf; 2 n^3 / 3 square)
      slogdet
    solve                     2 n^3 / 3 + 2 n^2 k       (getrf + getrs)
    lu_solve                  2 n^2 k                   (getrs)
    solve_triangular          n^2 k                     (trsm)
    cholesky_solve            2 n^2 k                   (potrs)
    inv                       2 n^3                     (getrf + getri)
    cholesky_inverse          2 n^3 / 3                 (potri)
    qr (m >= n)               2 m n^2 - 2 n^3 / 3       (geqrf, mode "r"); + the same for the
                              reduced Q (orgqr), + 4 m^2 n - 4 m n^2 + 4 n^3 / 3 for "complete"
    householder_product       4 m n k - 2 (m + n) k^2 + 4 k^3 / 3   (orgqr)
    lstsq (m >= n)            2 m n^2 - 2 n^3 / 3 + 4 m n k - n^2 k   (QR, apply Q^T, trsm)
    eigh / eigvalsh           9 n^3 with vectors, 4 n^3 / 3 values only   (G&VL 8.3)
    eig / eigvals             25 n^3 with vectors, 10 n^3 values only     (G&VL 7.5, Hessenberg QR)
    svd (m >= n)              values only 4 m n^2 - 4 n^3 / 3; thin U, V 14 m n^2 + 8 n^3;
                              full U 4 m^2 n + 8 m n^2 + 9 n^3   (G&VL 8.6, Golub-Reinsch)
    pinv                      thin SVD + V diag(1/s) U^T: 16 m n^2 + 8 n^3

Fast Fourier transforms:

    Fast Fourier transforms: ``_fft_r2c``, ``_fft_c2r``, ``_fft_c2c`` (``torch.fft.*``, ``torch.stft``).

    Convention (FFTW's, for its benchmark "mflops"): a complex transform of N points costs
    5 * N * log2(N) real FLOPs (the radix-2 Cooley-Tukey count: N/2 * log2 N butterflies of one
    complex multiply, 6 FLOPs, and two complex adds, 4 FLOPs); a transform of real input (r2c) or
    to real output (c2r) costs half, 2.5 * N * log2(N). A multi-dimensional transform of N points
    in all (N = product of the transformed sizes) costs the same 5 * N * log2(N) (the sum of the
    per-dimension passes), once per batch entry. Normalisation (``norm="ortho"``, or ``"forward"``
    / ``"backward"`` on the side that scales) adds 1 FLOP per real output value (2 per complex
    element). The counts are FLOPs, rounded to an integer; no MACs (butterflies are not a
    contraction). Any N is priced so, not only powers of two (FFTW's convention too).
"""
from __future__ import annotations

import math
from fractions import Fraction

import torch

from ..registry import Cost, Formula, OpCall, register_formula, register_free
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


# -- Decompositions, solves, inverses (torch.linalg) and FFTs ------------------------------------------------
def _flops(call_matrix, flops: Fraction | int) -> Cost:
    """``flops`` per matrix times the batch of ``call_matrix``'s leading dimensions, as MACs = FLOPs / 2.

    The counts are FLOPs (multiplies + adds); they are almost all multiply-add pairs, so MACs =
    FLOPs / 2 (rounded down) and FLOPs are reported as 2 x MACs, like a matmul. Per matrix, times
    the batch (leading dimensions).
    """
    batch = prod(shape(call_matrix)[:-2])
    return Cost.contraction(int(batch * Fraction(flops) / 2))


def _tall(matrix) -> tuple[int, int]:
    """(m, n) with m >= n (the transposed problem for a wide matrix).

    The counts of the table are of min/max dimensions.
    """
    m, n = shape(matrix)[-2:]
    return (m, n) if m >= n else (n, m)


def _columns(b, left: bool = True) -> int:
    """Right-hand sides: B's columns (rows when the system is solved from the right); 1 for a vector."""
    if b.dim() == 1:
        return 1
    return shape(b)[-1] if left else shape(b)[-2]


def _cubic(c: Fraction | int, name: str, doc: str) -> Formula:
    """A formula of ``c * n^3`` FLOPs per n x n matrix of ``args[0]``; ``doc`` is its docstring (its source)."""

    def formula(call: OpCall) -> Cost:
        a = call.args[0]
        return _flops(a, c * shape(a)[-1] ** 3)

    formula.__name__ = formula.__qualname__ = name
    formula.__doc__ = doc
    return formula


def getrf(m: int, n: int) -> Fraction:
    m, n = max(m, n), min(m, n)
    return Fraction(m * n * n) - Fraction(n ** 3, 3)


def geqrf(m: int, n: int) -> Fraction:
    m, n = max(m, n), min(m, n)
    return Fraction(2 * m * n * n) - Fraction(2 * n ** 3, 3)


def orgqr(m: int, n: int, k: int) -> Fraction:
    return Fraction(4 * m * n * k) - 2 * (m + n) * k * k + Fraction(4 * k ** 3, 3)


register_formula(*ops("linalg_cholesky_ex", "cholesky", "linalg_cholesky", "linalg_ldl_factor_ex"))(
    _cubic(Fraction(1, 3), "cholesky", "Cholesky (potrf) / LDL^T: n^3 / 3 FLOPs per matrix."))


@register_formula(*ops("linalg_lu_factor_ex", "linalg_lu_factor", "linalg_lu", "_linalg_det", "_linalg_slogdet"))
def lu_factor(call: OpCall) -> Cost:
    """LU with partial pivoting (getrf): m n^2 - n^3 / 3 FLOPs (2 n^3 / 3 square); det and slogdet are an LU."""
    a = call.args[0]
    return _flops(a, getrf(*shape(a)[-2:]))


@register_formula(*ops("_linalg_solve_ex", "linalg_solve"))
def solve(call: OpCall) -> Cost:
    """Solve A X = B (getrf + getrs): 2 n^3 / 3 + 2 n^2 k FLOPs."""
    a = bind(call)
    n = shape(a["A"])[-1]
    k = _columns(a["B"], a.get("left", True))
    return _flops(a["A"], Fraction(2 * n ** 3, 3) + 2 * n * n * k)


@register_formula(*ops("linalg_lu_solve", "lu_solve"))
def lu_solve(call: OpCall) -> Cost:
    """Solve from an LU factorization (getrs): 2 n^2 k FLOPs."""
    a = bind(call)
    lu, b = (a["LU"], a["B"]) if "LU" in a else (a["LU_data"], a["self"])
    n = shape(lu)[-1]
    return _flops(lu, 2 * n * n * _columns(b, a.get("left", True)))


@register_formula(*ops("linalg_solve_triangular"))
def solve_triangular(call: OpCall) -> Cost:
    """Triangular solve (trsm): n^2 k FLOPs."""
    a = bind(call)
    n = shape(a["self"])[-1]
    return _flops(a["self"], n * n * _columns(a["B"], a["left"]))


@register_formula(*ops("triangular_solve"))
def triangular_solve(call: OpCall) -> Cost:
    """Triangular solve (trsm, the old API: ``triangular_solve(B, A)``): n^2 k FLOPs."""
    a = bind(call)
    n = shape(a["A"])[-1]
    return _flops(a["A"], n * n * _columns(a["self"]))


@register_formula(*ops("cholesky_solve"))
def cholesky_solve(call: OpCall) -> Cost:
    """Solve from a Cholesky factor (potrs): 2 n^2 k FLOPs."""
    a = bind(call)
    n = shape(a["input2"])[-1]
    return _flops(a["input2"], 2 * n * n * _columns(a["self"]))


register_formula(*ops("linalg_inv_ex", "linalg_inv", "inverse"))(
    _cubic(2, "inverse", "Inverse (getrf + getri): 2 n^3 FLOPs."))
register_formula(*ops("cholesky_inverse"))(
    _cubic(Fraction(2, 3), "cholesky_inverse", "Inverse from a Cholesky factor (potri): 2 n^3 / 3 FLOPs."))


@register_formula(*ops("linalg_qr"))
def qr(call: OpCall) -> Cost:
    """QR (geqrf, + orgqr for Q): mode "r" 2mn^2 - 2n^3/3; "reduced" twice that; "complete" geqrf + orgqr(m, m, n)."""
    a = bind(call)
    m, n = shape(a["A"])[-2:]
    k = min(m, n)
    flops = geqrf(m, n)
    if a["mode"] == "reduced":
        flops += orgqr(m, k, k)
    elif a["mode"] == "complete":
        flops += orgqr(m, m, k)
    return _flops(a["A"], flops)


@register_formula(*ops("geqrf"))
def geqrf_formula(call: OpCall) -> Cost:
    """Householder QR without Q (geqrf): 2 m n^2 - 2 n^3 / 3 FLOPs."""
    a = call.args[0]
    return _flops(a, geqrf(*shape(a)[-2:]))


@register_formula(*ops("linalg_householder_product", "orgqr"))
def householder_product(call: OpCall) -> Cost:
    """Q from k Householder reflectors (orgqr): 4mnk - 2(m+n)k^2 + 4k^3/3 FLOPs."""
    a = call.args[0]
    m, n = shape(a)[-2:]
    return _flops(a, orgqr(m, n, shape(call.args[1])[-1]))


@register_formula(*ops("linalg_lstsq"))
def lstsq(call: OpCall) -> Cost:
    """Least squares by QR: 2mn^2 - 2n^3/3 (geqrf) + 4mnk - 2n^2 k (apply Q^T) + n^2 k (trsm) FLOPs."""
    a = bind(call)
    m, n = _tall(a["self"])
    k = _columns(a["b"])
    return _flops(a["self"], geqrf(m, n) + 4 * m * n * k - n * n * k)


@register_formula(*ops("_linalg_eigh", "linalg_eigh", "linalg_eigvalsh"))
def eigh(call: OpCall) -> Cost:
    """Symmetric eigendecomposition (tridiagonal QR): 9 n^3 FLOPs with vectors, 4 n^3 / 3 values only."""
    a = bind(call)
    matrix = a.get("A", a.get("self"))
    n = shape(matrix)[-1]
    vectors = bool(a.get("compute_v", call.name.endswith("eigh")))
    return _flops(matrix, 9 * n ** 3 if vectors else Fraction(4 * n ** 3, 3))


register_formula(*ops("linalg_eig"))(
    _cubic(25, "eig", "General eigendecomposition (Hessenberg QR): 25 n^3 FLOPs with vectors."))
register_formula(*ops("linalg_eigvals"))(
    _cubic(10, "eigvals", "General eigenvalues only (Hessenberg QR): 10 n^3 FLOPs."))


def svd_flops(m: int, n: int, vectors: bool, full: bool) -> Fraction:
    """Golub-Reinsch SVD of an m x n matrix, m >= n (G&VL 8.6)."""
    if not vectors:
        return Fraction(4 * m * n * n) - Fraction(4 * n ** 3, 3)
    if full:
        return Fraction(4 * m * m * n + 8 * m * n * n + 9 * n ** 3)
    return Fraction(14 * m * n * n + 8 * n ** 3)


@register_formula(*ops("_linalg_svd"))
def svd(call: OpCall) -> Cost:
    """SVD: values only 4mn^2 - 4n^3/3; thin U, V 14mn^2 + 8n^3; full U 4m^2 n + 8mn^2 + 9n^3 FLOPs."""
    a = bind(call)
    m, n = _tall(a["A"])
    return _flops(a["A"], svd_flops(m, n, bool(a["compute_uv"]), bool(a["full_matrices"])))


@register_formula(*ops("linalg_pinv"))
def pinv(call: OpCall) -> Cost:
    """Pseudo-inverse: thin SVD (14mn^2 + 8n^3) + V diag(1/s) U^T (2mn^2): 16mn^2 + 8n^3 FLOPs."""
    a = call.args[0]
    m, n = _tall(a)
    return _flops(a, svd_flops(m, n, True, False) + 2 * m * n * n)


# Checks of a factorization's status and window functions (fixed tables of cosines) do no model arithmetic.
register_free(*ops("_linalg_check_errors", "hann_window", "hamming_window", "blackman_window", "bartlett_window",
                   "kaiser_window"))


# -- Fast Fourier transforms ------------------------------------------------------------------------
def fft_flops(points: int, batch: int, real: bool) -> int:
    """``batch`` transforms of ``points`` points: 5 N log2 N each, half for a real transform."""
    if points <= 1:
        return 0
    per = 5 * points * math.log2(points)
    return round(batch * (per / 2 if real else per))


def _scale(normalization: int, out) -> int:
    """1 FLOP per real value of the output when it is normalised (``normalization`` != 0)."""
    if not int(normalization):
        return 0
    return numel(out) * (2 if out.dtype.is_complex else 1)


def _points(tensor, dims) -> int:
    sizes = shape(tensor)
    return prod(sizes[d] for d in dims)


@register_formula(aten._fft_r2c)
def fft_r2c(call: OpCall) -> Cost:
    """Real-to-complex FFT over ``dim``: 2.5 N log2 N per transform (+1 per output real value if normalised)."""
    a = bind(call)
    x = a["self"]
    points = _points(x, a["dim"])
    return Cost.elementwise(fft_flops(points, numel(x) // max(points, 1), True) + _scale(a["normalization"], call.out))


@register_formula(aten._fft_c2r)
def fft_c2r(call: OpCall) -> Cost:
    """Complex-to-real FFT (N = the real output's transformed sizes): 2.5 N log2 N per transform (+ scaling)."""
    a = bind(call)
    out = call.out
    points = _points(out, a["dim"])
    return Cost.elementwise(fft_flops(points, numel(out) // max(points, 1), True) + _scale(a["normalization"], out))


@register_formula(aten._fft_c2c)
def fft_c2c(call: OpCall) -> Cost:
    """Complex FFT over ``dim``: 5 N log2 N per transform (+2 per output element if normalised)."""
    a = bind(call)
    x = a["self"]
    points = _points(x, a["dim"])
    return Cost.elementwise(fft_flops(points, numel(x) // max(points, 1), False) + _scale(a["normalization"], call.out))
