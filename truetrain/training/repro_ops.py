"""Bit-reproducible tensor operations (the ``repro`` numeric mode).

Every function here gives the same bits on any device, thread count and batch split,
because it is built only from operations that IEEE-754 rounds correctly everywhere
(+, -, *, / and sqrt, each as its own kernel so nothing fuses them), from exact
operations (power-of-two scaling, ``frexp``, ``round``, max/min, data movement), and
from exact integer sums, whatever the summation order (matrix products go through the
integer GEMM engine, ``intgemm``).

No library transcendental is used: :func:`exp64` and :func:`log64` are range-reduced
polynomials written out here.
"""

from __future__ import annotations

import math

import torch

from ..errors import ReproducibilityError

F32 = torch.float32
F64 = torch.float64

#: A float64 holds every integer up to this many bits exactly.
EXACT_BITS = 53
#: Fewer significant bits than this would make a product too coarse to be useful.
MIN_BITS = 12


def ceil_log2(n: int) -> int:
    """Smallest ``L`` with ``2**L >= n`` (0 for ``n <= 1``)."""
    return max(0, (int(n) - 1).bit_length())


def operand_bits(k: int, other_bits: int) -> int:
    """Bits one operand may keep so that ``k`` products with ``other_bits`` sum exactly.

    Every partial sum of ``k`` products of integers of at most ``a`` and ``b`` bits is an
    integer below ``k * 2**(a+b) <= 2**53``, so float64 holds it exactly.
    """
    bits = min(24, EXACT_BITS - other_bits - ceil_log2(k))
    if bits < MIN_BITS:
        raise ReproducibilityError(
            f"reduction over {k} terms is too long for exact float64 sums "
            f"(would keep only {bits} bits); use a smaller batch or layer"
        )
    return bits


def pow2(n: torch.Tensor) -> torch.Tensor:
    """Exact float64 ``2**n`` for an integer tensor ``n`` in [-1022, 1023], built from bits."""
    return ((n.to(torch.int64) + 1023) << 52).view(F64)


_EXP_MASK = 0x7FF0000000000000
# Magnitudes below this count as this (so an all-zero row still has a finite scale).
_TINY = 2.0**-960


def power_scales(amax: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(up, down)`` for non-negative maxima: with ``P = 2**floor(log2 amax)`` (read
    exactly from the float64 exponent bits, like ``frexp``), ``up = 2**(bits-1) / P`` maps
    every ``|x| <= amax`` below ``2**bits`` and ``down = 1 / up``. Both are exact powers
    of two built from bits (integer arithmetic on the exponent field, no division).

    Not checked for inf/NaN (that would cost a device sync per product): non-finite
    values propagate to the loss and the checkpoint, which the trainer checks.
    """
    field = amax.to(F64).clamp_min(_TINY).view(torch.int64) & _EXP_MASK
    shift = (bits - 1) << 52
    return ((2046 << 52) + shift - field).view(F64), (field - shift).view(F64)


def sqrt32(x: torch.Tensor) -> torch.Tensor:
    """Correctly rounded float32 square root of float32 ``x``, on any CPU or GPU.

    ``torch.sqrt`` is not correctly rounded everywhere: on AVX-512 CPUs some 17 % of float32
    and 1 % of float64 results are one ulp off (vectorised library routines), while other
    CPUs and GPUs round correctly. Through float64 it is exact: the square root of a
    float32 lies at least 16 float64 ulps from every float32 rounding boundary, so any
    float64 square root good to a few ulps rounds to the correct float32.
    """
    return torch.sqrt(x.to(F64)).to(F32)


def sqrt64(x: torch.Tensor) -> torch.Tensor:
    """float64 square root with the same bits on every device (within about 1 ulp).

    ``x = m * 4**k`` exactly (``frexp``, m in [0.5, 2)); the correctly rounded float32 root
    of ``m`` rounded to float32 (:func:`sqrt32`) starts two Newton steps ``y = (y + m / y) / 2``
    in float64 (each operation correctly rounded), then ``2**k`` scales back exactly. Zeros
    keep their sign, +inf stays +inf, and a negative number or NaN gives NaN.
    """
    mant, e = torch.frexp(x)
    odd = (e % 2) != 0
    m = torch.where(odd, mant * 2.0, mant)
    half = torch.div(torch.where(odd, e - 1, e), 2, rounding_mode="floor")
    y = sqrt32(m.to(F32)).to(F64)
    y = (y + m / y) * 0.5
    y = (y + m / y) * 0.5
    out = y * pow2(half)
    out = torch.where(x == 0, x, out)
    out = torch.where(x == math.inf, x, out)
    return torch.where((x < 0) | torch.isnan(x), torch.full_like(out, math.nan), out)


def quantize_cols(x: torch.Tensor, bits: int, amax: torch.Tensor | None = None):
    """Quantise each column of float32 ``x`` to float64 integers of at most ``bits`` bits:
    ``(q, scale)`` with ``x ~= q * scale`` (one exact power of two per column).

    ``amax`` (the per-column largest magnitude) may be given when ``x`` is one slice of a
    larger batch, so every slice uses the whole batch's scale and the integer partial
    sums of the slices add up exactly to those of the whole batch.
    """
    up, down = power_scales(x.abs().amax(dim=0) if amax is None else amax, bits)
    return torch.mul(x, up).round_(), down


def exact_sum(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Reproducible float32 sum of a float32 matrix along ``dim`` (0 or 1).

    Quantised per output element's slice with ``53 - L(n)`` bits, the integer sum is exact
    in any order; scaled back and rounded once.
    """
    xt = x if dim == 0 else x.T
    q, down = quantize_cols(xt, operand_bits(xt.shape[0], 0))
    return q.sum(dim=0).add_(0.0).mul_(down).to(F32)


def tree_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last dimension in a fixed pairwise order (zero-padded to a power of 2)."""
    n = x.shape[-1]
    width = 1 << ceil_log2(n)
    if width != n:
        x = torch.nn.functional.pad(x, (0, width - n))
    while x.shape[-1] > 1:
        x = x[..., 0::2] + x[..., 1::2]
    return x[..., 0]


def first_argmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Index of the first maximal element along ``dim`` (ties go to the lowest index)."""
    return first_max_mask(x, dim).to(torch.int8).argmax(dim=dim)


def first_max_mask(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Boolean mask with one True per slice: the first position holding the maximum."""
    eq = x == x.amax(dim=dim, keepdim=True)
    return eq & (eq.to(torch.int32).cumsum(dim=dim) == 1)


# --- exp and log -----------------------------------------------------------------------

_LOG2E = 1.4426950408889634
# fdlibm's split of ln 2: n * _LN2_HI is exact for |n| < 2**11.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LN2 = math.log(2.0)
# Taylor coefficients 1/k!, k = 10..0 (|r| <= ln2/2: truncation error below 3e-13).
_EXP_COEFFS = [1.0 / math.factorial(k) for k in range(10, -1, -1)]
# atanh series 1/(2k+1), k = 10..0, in z = s*s with |s| <= 3 - 2*sqrt(2).
_LOG_COEFFS = [1.0 / (2 * k + 1) for k in range(10, -1, -1)]
_EXP_MAX = 709.0
_EXP_MIN = -708.0


def _horner(x: torch.Tensor, coeffs: list[float]) -> torch.Tensor:
    p = x * coeffs[0] + coeffs[1]
    for c in coeffs[2:]:
        p = p * x + c
    return p


def _exp64_core(x: torch.Tensor) -> torch.Tensor:
    """exp for float64 ``x`` already in [-708, 709]."""
    n = torch.round(x * _LOG2E)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    return _horner(r, _EXP_COEFFS) * pow2(n)


def exp64(x: torch.Tensor) -> torch.Tensor:
    """``exp`` of a float64 tensor from + - * and exact scaling.

    x = n ln2 + r with |r| <= ln2/2 (Cody-Waite), exp(r) by a degree-10 polynomial,
    times 2**n built from bits. Results below ``exp(-708)`` flush to 0, above
    ``exp(709)`` give inf; NaN stays NaN.
    """
    y = _exp64_core(x.clamp(_EXP_MIN, _EXP_MAX))
    y = torch.where(x < _EXP_MIN, torch.zeros_like(y), y)
    y = torch.where(x > _EXP_MAX, torch.full_like(y, math.inf), y)
    return torch.where(torch.isnan(x), x, y)


def log64(x: torch.Tensor) -> torch.Tensor:
    """Natural log of a float64 tensor from + - * / and exact frexp.

    x = m 2**e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh(s), s = (m-1)/(m+1).
    log 0 = -inf, log of a negative number or NaN = NaN, log inf = inf.
    """
    mant, e = torch.frexp(x)  # mant in [0.5, 1)
    small = mant < 0.7071067811865476
    m = torch.where(small, mant * 2.0, mant)
    e = torch.where(small, e - 1, e).to(F64)
    f = m - 1.0
    s = f / (m + 1.0)
    z = s * s
    y = e * _LN2_HI + (e * _LN2_LO + 2.0 * s * _horner(z, _LOG_COEFFS))
    y = torch.where(x == 0, torch.full_like(y, -math.inf), y)
    y = torch.where(x == math.inf, x, y)
    return torch.where((x < 0) | torch.isnan(x), torch.full_like(y, math.nan), y)


def exp_f32(x: torch.Tensor) -> torch.Tensor:
    """float32 ``exp`` (float64 polynomial, rounded once; within 1 ulp of exact)."""
    return exp64(x.to(F64)).to(F32)


def log_f32(x: torch.Tensor) -> torch.Tensor:
    """float32 natural log (float64 series, rounded once; within 1 ulp of exact)."""
    return log64(x.to(F64)).to(F32)


# --- softmax cross-entropy -------------------------------------------------------------


def softmax_xent(logits: torch.Tensor, y: torch.Tensor, total_rows: int):
    """Softmax cross-entropy of float32 ``logits`` (R, C) against labels ``y`` (R,).

    Returns ``(dlogits, sumexp, target)``: the float32 gradient of the batch-mean loss
    (divided by ``total_rows``, the whole batch's size, so micro-batches agree with the
    full batch), and per-row float64 ``sumexp`` and ``target`` (the target logit minus
    the row max): the row loss is ``log(sumexp) - target`` (see :func:`xent_loss`), kept
    apart so the log runs once per checkpoint interval rather than once per step.
    """
    z = logits.to(F64)
    d = z - z.amax(dim=1, keepdim=True)  # <= 0; exp(-708) stands in for smaller values
    e = _exp64_core(d.clamp_min(_EXP_MIN))
    s = unit_row_sum(e)
    p = e / s.unsqueeze(1)
    yi = y.unsqueeze(1)
    p.scatter_add_(1, yi, torch.full_like(yi, -1.0, dtype=F64))  # p - onehot, one add each
    grad = (p / float(total_rows)).to(F32)
    target = d.gather(1, yi).squeeze(1)
    return grad, s, target


def unit_row_sum(e: torch.Tensor) -> torch.Tensor:
    """Row sums of float64 values in [0, 1]: quantised to ``2**-(53 - L(cols))``, the
    integer sums are exact in any order (absolute error below ``cols * 2**-53``)."""
    k = EXACT_BITS - ceil_log2(e.shape[1])
    return torch.round(e * 2.0**k).sum(dim=1).add_(0.0).mul_(2.0**-k)


def xent_loss(sumexp: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-row cross-entropy loss (float64) from :func:`softmax_xent`'s parts."""
    return log64(sumexp) - target
