"""Fast Fourier transforms: ``_fft_r2c``, ``_fft_c2r``, ``_fft_c2c`` (``torch.fft.*``, ``torch.stft``).

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

from ..registry import Cost, OpCall, register_formula
from ._common import aten, bind, numel, prod, shape


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
