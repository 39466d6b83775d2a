"""Linear algebra: decompositions, solves and inverses (``torch.linalg``), by their standard counts.

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

from ..registry import Cost, Formula, OpCall, register_formula, register_free
from ._common import aten, bind, numel, ops, prod, shape


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
