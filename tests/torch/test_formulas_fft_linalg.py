"""FFT and linear-algebra formulas, and the free check / window ops (issue 10).

FFT: 5 N log2 N real FLOPs per complex transform of N points, half for a real one (FFTW's
convention), + 1 FLOP per real output value when normalised; no MACs.
linalg: LAPACK Working Note 41 / Golub & Van Loan leading-order FLOPs, MACs = FLOPs / 2.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from deeplite_like.backends.torch.counting import count_ops


class Call(nn.Module):
    """A module that runs one function on its inputs."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def counted(fn, *args):
    result = count_ops(Call(fn), *args)
    assert result.untracked == {}
    return result.macs, result.flops


@pytest.mark.parametrize("fn,x,flops", [
    # rfft of 3 signals of 16: 2.5 * 16 * log2 16 = 160 each -> 480
    (torch.fft.rfft, torch.randn(3, 16), 480),
    # fft of real input runs r2c (two-sided): the same 480
    (torch.fft.fft, torch.randn(3, 16), 480),
    # rfft of 2 x 32 with norm="ortho": 2 * 2.5 * 32 * 5 = 800 + scaling 2 * 17 complex outputs * 2 = 68
    (lambda x: torch.fft.rfft(x, norm="ortho"), torch.randn(2, 32), 868),
    # irfft of (3, 9) complex -> 16 real points: 3 * 160 = 480 + the 1/n scaling, 1 per real output (48)
    (torch.fft.irfft, torch.randn(3, 9, dtype=torch.cfloat), 528),
    # fft of complex (4, 8): 4 * 5 * 8 * 3 = 480 (forward "backward" norm: no scaling)
    (torch.fft.fft, torch.randn(4, 8, dtype=torch.cfloat), 480),
    # ifft of complex (4, 8): 480 + 1/n on 32 complex outputs, 2 each: 64
    (torch.fft.ifft, torch.randn(4, 8, dtype=torch.cfloat), 544),
    # fft2 ortho of complex (2, 8, 16): N = 128, 2 * 5 * 128 * 7 = 8,960 + 2 * 256 = 9,472
    (lambda x: torch.fft.fft2(x, norm="ortho"), torch.randn(2, 8, 16, dtype=torch.cfloat), 9_472),
    # a length that is not a power of 2 (12): 2.5 * 12 * log2 12 = 107.55 -> 108 (rounded)
    (torch.fft.rfft, torch.randn(1, 12), 108),
])
def test_fft_convention(fn, x, flops):
    assert counted(fn, x) == (0, flops)


def test_stft_is_a_window_multiply_and_real_ffts():
    # 400 samples, n_fft 64, hop 16, centred (reflect pad 32 each side): 1 + 464 // 16 - 4 = 26 frames.
    # Window multiply 26 * 64 = 1,664; rfft 26 * 2.5 * 64 * 6 = 24,960. hann_window and the padding are free.
    window = torch.hann_window(64)
    fn = lambda x: torch.stft(x, 64, hop_length=16, window=torch.hann_window(64), return_complex=True)  # noqa: E731
    assert counted(fn, torch.randn(400)) == (0, 1_664 + 24_960)
    assert window.shape == (64,)


A6 = torch.randn(6, 6)
SPD6 = A6 @ A6.T + 6 * torch.eye(6)


@pytest.mark.parametrize("name,fn,x,macs", [
    # cholesky n=6: n^3/3 = 72 FLOPs -> 36 MACs
    ("cholesky", torch.linalg.cholesky, SPD6, 36),
    # batched (4, 6, 6): 4 * 36
    ("cholesky batched", torch.linalg.cholesky, SPD6.expand(4, 6, 6).clone(), 144),
    # LU n=6: 2n^3/3 = 144 FLOPs -> 72; det and slogdet are an LU
    ("lu_factor", torch.linalg.lu_factor, A6, 72),
    ("det", torch.linalg.det, A6, 72),
    ("slogdet", torch.linalg.slogdet, A6, 72),
    # solve with B (6, 2): 2n^3/3 + 2 n^2 k = 144 + 144 = 288 FLOPs -> 144
    ("solve", lambda a: torch.linalg.solve(a, torch.randn(6, 2)), A6, 144),
    # inverse: 2 n^3 = 432 FLOPs -> 216
    ("inv", torch.linalg.inv, A6, 216),
    # triangular solve, B (6, 3): n^2 k = 108 FLOPs -> 54
    ("solve_triangular", lambda a: torch.linalg.solve_triangular(a, torch.randn(6, 3), upper=True),
     torch.triu(A6) + 6 * torch.eye(6), 54),
    # QR (8, 5) mode "r": geqrf 2*8*25 - 2*125/3 = 316.67 FLOPs -> 158 MACs
    ("qr r", lambda m: torch.linalg.qr(m, mode="r"), torch.randn(8, 5), 158),
    # reduced: + orgqr(8, 5, 5) = 800 - 650 + 166.67 = 316.67 -> 633.33 FLOPs -> 316
    ("qr reduced", torch.linalg.qr, torch.randn(8, 5), 316),
    # symmetric eigendecomposition with vectors: 9 n^3 = 1,944 FLOPs -> 972
    ("eigh", torch.linalg.eigh, SPD6, 972),
    # general eigendecomposition with vectors: 25 n^3 = 5,400 -> 2,700
    ("eig", torch.linalg.eig, A6, 2_700),
    # thin SVD (8, 5): 14 * 8 * 25 + 8 * 125 = 3,800 FLOPs -> 1,900; a wide (5, 8) prices its transpose
    ("svd", lambda m: torch.linalg.svd(m, full_matrices=False), torch.randn(8, 5), 1_900),
    ("svd wide", lambda m: torch.linalg.svd(m, full_matrices=False), torch.randn(5, 8), 1_900),
    # full SVD (8, 5): 4*64*5 + 8*8*25 + 9*125 = 1,280 + 1,600 + 1,125 = 4,005 FLOPs -> 2,002
    ("svd full", torch.linalg.svd, torch.randn(8, 5), 2_002),
    # singular values only: 4*8*25 - 4*125/3 = 633.33 FLOPs -> 316. (torch.linalg.svdvals asks for
    # U and V whenever a dispatch mode is active, counting among them: it is then priced as the thin SVD.)
    ("svd values only", lambda m: torch.ops.aten._linalg_svd(m, False, False), torch.randn(8, 5), 316),
    ("svdvals", torch.linalg.svdvals, torch.randn(8, 5), 1_900),
    # least squares (8, 5), b (8, 2): 316.67 + 4*8*5*2 - 25*2 = 586.67 FLOPs -> 293
    ("lstsq", lambda m: torch.linalg.lstsq(m, torch.randn(8, 2)), torch.randn(8, 5), 293),
    # pseudo-inverse (8, 5): 16 * 8 * 25 + 8 * 125 = 4,200 FLOPs -> 2,100
    ("pinv", torch.linalg.pinv, torch.randn(8, 5), 2_100),
])
def test_linalg_standard_counts(name, fn, x, macs):
    got_macs, got_flops = counted(fn, x)
    assert (got_macs, got_flops) == (macs, 2 * macs), name


def test_cholesky_solve_and_the_error_check_are_priced_apart():
    # cholesky 36 MACs; cholesky_solve with B (6, 2): 2 n^2 k = 144 FLOPs -> 72; _linalg_check_errors free
    fn = lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a))  # noqa: E731
    assert counted(fn, SPD6, torch.randn(6, 2)) == (36 + 72, 2 * (36 + 72))


@pytest.mark.parametrize("window", [torch.hann_window, torch.hamming_window, torch.blackman_window,
                                    torch.bartlett_window, torch.kaiser_window])
def test_window_functions_are_free(window):
    assert counted(lambda x: x * window(8), torch.randn(8)) == (0, 8)  # the multiply only
