"""erf, exp and GELU for repro mode, on float bit patterns: the semantics the engine
(truetrain/training/repro_special.py ``erf64``, repro_ops.py ``exp64``, ops/elementwise.py
``gelu_forward`` / ``gelu_backward``, the C kernels' ``tt_gelu_slope``) and the one-step
verifier (contracts/numerics/OneStepGelu.sol) compute. The erf table is defined here, once:
the engine reads it from :func:`erf_table`.

* ``erf64(u)``: ``a = |u|``; ``a >= 6`` (inf included) gives 1; else ``i = round(16 a)``
  (ties to even), ``h = a - i / 16`` (exact), and the degree-7 Taylor polynomial of row
  ``i`` by Horner (``p = p * h + c``: a product and a sum, two roundings each step); NaN
  stays NaN; the result takes ``u``'s sign.
* ``exp64(x)``: Cody-Waite ``x = n ln2 + r`` (``n = round(x log2 e)``), the degree-10 Taylor
  polynomial of ``r`` by Horner, times ``2**n`` from bits; below -708 gives 0, above 709
  inf, NaN stays NaN.
* ``log64(x)``: ``x = m * 2**e`` (frexp, m in [sqrt(1/2), sqrt(2))), ``2 atanh(s)`` for
  ``s = (m - 1) / (m + 1)`` by its degree-10 series in ``s * s``, plus ``e ln 2`` in two
  parts; log 0 = -inf, a negative number or NaN gives NaN;
* ``sqrt64(x)``: the engine's deterministic root: ``x = m * 4**k`` (frexp), the float32
  root of float32(m), two Newton steps ``y = (y + m / y) * 0.5`` in float64, times ``2**k``;
  ±0 and +inf as they are, a negative number or NaN gives NaN.
* ``gelu(x) = float32(x * (0.5 * (1 + erf64(x / sqrt 2))))`` (float64 inside), and its
  backward ``float32(g * (cdf + x * (exp64(-0.5 * (x * x)) / sqrt(2 pi))))``.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal, localcontext

import numpy as np

from .ieee import NAN64, add64, bits64, div64, mul64, sqrt32, sub64, to32, to64

ERF_STEP = 16  # grid points per unit
ERF_POINTS = 6 * ERF_STEP + 1  # a = 0, 1/16, ..., 6
ERF_DEGREE = 7  # |h| <= 1/32: within 1e-14 of erf everywhere
INV_SQRT2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of ln 2: n * LN2_HI exact for |n| < 2**11
LN2_LO = 1.90821492927058770002e-10
EXP_COEFFS = [1.0 / math.factorial(k) for k in range(10, -1, -1)]
EXP_MAX, EXP_MIN = 709.0, -708.0
LOG_COEFFS = [1.0 / (2 * k + 1) for k in range(10, -1, -1)]
SQRT_HALF = 0.7071067811865476
SIGN64 = 1 << 63


def _pi_decimal() -> Decimal:
    """pi to the context precision (Machin's formula, exact decimal arithmetic)."""
    def arctan_inv(n: int) -> Decimal:
        x, n2, total, k, sign = Decimal(1) / n, n * n, Decimal(0), 0, 1
        power = x
        while power > Decimal(10) ** -55:
            total += sign * power / (2 * k + 1)
            power /= n2
            k += 1
            sign = -sign
        return total
    return 4 * (4 * arctan_inv(5) - arctan_inv(239))


@functools.cache
def erf_table() -> tuple[tuple[float, ...], ...]:
    """(97, 8) float64: row i holds erf(a) and the Taylor coefficients at a = i/16, computed
    in :mod:`decimal` (software, correctly rounded: the same table on every machine)."""
    rows = []
    with localcontext() as ctx:
        ctx.prec = 50
        two_over_sqrt_pi = 2 / _pi_decimal().sqrt()
        for i in range(ERF_POINTS):
            a = Decimal(i) / ERF_STEP
            g = two_over_sqrt_pi * (-a * a).exp()
            # erf(a) = 2/sqrt(pi) e^(-a^2) sum_n (2a^2)^n a / (2n+1)!! (positive terms)
            term, total, n = a, Decimal(0), 0
            while term > Decimal(10) ** -45 or n < 2:
                total += term
                n += 1
                term = term * 2 * a * a / (2 * n + 1)
            row = [g * total]
            hermite = [Decimal(1), 2 * a]  # H_0, H_1
            for k in range(2, ERF_DEGREE):
                hermite.append(2 * a * hermite[k - 1] - 2 * (k - 1) * hermite[k - 2])
            fact = Decimal(1)
            for k in range(1, ERF_DEGREE + 1):
                fact *= k
                row.append(g * (-1) ** (k - 1) * hermite[k - 1] / fact)
            rows.append(tuple(float(v) for v in row))
    return tuple(rows)


def _b(v: float) -> int:
    return int(np.float64(v).view(np.uint64))


def _f(bits) -> np.ndarray:
    return np.asarray(bits, np.uint64).view(np.float64)


def erf64(u):
    """erf on float64 bit patterns (ints or uint64 arrays)."""
    u = np.asarray(u, np.uint64)
    a = u & np.uint64(SIGN64 - 1)
    big = _f(a) >= 6.0  # inf included; NaN is not
    clipped = np.where(big | np.isnan(_f(a)), np.uint64(0), a)
    with np.errstate(all="ignore"):
        idx = np.rint(_f(mul64(clipped, _b(ERF_STEP))))  # exact product; ties to even
        h = sub64(clipped, mul64(bits64(idx), _b(1.0 / ERF_STEP)))
        rows = np.array(erf_table()).view(np.uint64)[idx.astype(np.int64)]
        p = rows[..., ERF_DEGREE]
        for k in range(ERF_DEGREE - 1, -1, -1):
            p = add64(mul64(p, h), rows[..., k])
    y = np.where(big, np.uint64(_b(1.0)), np.asarray(p, np.uint64))
    y = (y & np.uint64(SIGN64 - 1)) | (u & np.uint64(SIGN64))
    out = np.where(np.isnan(_f(u)), np.uint64(NAN64), y)
    return int(out) if out.ndim == 0 else out


def exp64(x):
    """exp on float64 bit patterns."""
    x = np.asarray(x, np.uint64)
    xf = _f(x)
    with np.errstate(all="ignore"):
        c = bits64(np.clip(xf, EXP_MIN, EXP_MAX))
        n = np.rint(_f(mul64(c, _b(LOG2E))))
        r = sub64(sub64(c, mul64(bits64(n), _b(LN2_HI))), mul64(bits64(n), _b(LN2_LO)))
        p = add64(mul64(r, _b(EXP_COEFFS[0])), _b(EXP_COEFFS[1]))
        for coeff in EXP_COEFFS[2:]:
            p = add64(mul64(p, r), _b(coeff))
        scale = ((np.nan_to_num(n).astype(np.int64) + 1023) << 52).astype(np.uint64)
        y = np.asarray(mul64(p, scale), np.uint64)
    y = np.where(xf < EXP_MIN, np.uint64(0), y)
    y = np.where(xf > EXP_MAX, np.uint64(0x7FF0000000000000), y)
    out = np.where(np.isnan(xf), np.uint64(NAN64), y)
    return int(out) if out.ndim == 0 else out


def log64(x):
    """The engine's ``log64`` on float64 bit patterns: ``x = m 2**e`` with m in
    [sqrt(1/2), sqrt(2)), ``log m = 2 atanh(s)``, ``s = (m - 1) / (m + 1)``, the series in
    ``s * s`` by Horner; log 0 = -inf, log inf = inf, a negative number or NaN gives NaN."""
    x = np.asarray(x, np.uint64)
    xf = _f(x)
    with np.errstate(all="ignore"):
        mant, e = np.frexp(xf)
        small = mant < SQRT_HALF
        m = bits64(np.where(small, mant * 2.0, mant))  # exact
        ef = bits64(np.where(small, e - 1, e).astype(np.float64))
        s = div64(sub64(m, _b(1.0)), add64(m, _b(1.0)))
        z = mul64(s, s)
        p = add64(mul64(z, _b(LOG_COEFFS[0])), _b(LOG_COEFFS[1]))
        for coeff in LOG_COEFFS[2:]:
            p = add64(mul64(p, z), _b(coeff))
        series = mul64(mul64(_b(2.0), s), p)
        y = np.asarray(add64(mul64(ef, _b(LN2_HI)), add64(mul64(ef, _b(LN2_LO)), series)), np.uint64)
    y = np.where(xf == 0, np.uint64(0xFFF0000000000000), y)
    y = np.where(xf == np.inf, x, y)
    out = np.where((xf < 0) | np.isnan(xf), np.uint64(NAN64), y)
    return int(out) if out.ndim == 0 else out


def sqrt64(x):
    """The engine's ``sqrt64`` on float64 bit patterns."""
    x = np.asarray(x, np.uint64)
    xf = _f(x)
    with np.errstate(all="ignore"):
        mant, e = np.frexp(xf)
        odd = (e % 2) != 0
        m = bits64(np.where(odd, mant * 2.0, mant))  # exact
        half = np.where(odd, e - 1, e) // 2
        y = to64(sqrt32(to32(m)))
        y = mul64(add64(y, div64(m, y)), _b(0.5))
        y = mul64(add64(y, div64(m, y)), _b(0.5))
        out = np.asarray(mul64(y, ((half.astype(np.int64) + 1023) << 52).astype(np.uint64)), np.uint64)
    out = np.where((xf == 0) | (xf == np.inf), x, out)
    out = np.where((xf < 0) | np.isnan(xf), np.uint64(NAN64), out)
    return int(out) if out.ndim == 0 else out


def _cdf(x64):
    return mul64(add64(_b(1.0), erf64(mul64(x64, _b(INV_SQRT2)))), _b(0.5))


def gelu(x):
    """float32 bits of GELU of float32 bits ``x``."""
    x64 = to64(x)
    return to32(mul64(x64, _cdf(x64)))


def gelu_backward(x, g):
    """float32 bits of GELU's input gradient at ``x`` for the output gradient ``g``."""
    x64 = to64(x)
    pdf = mul64(exp64(mul64(mul64(x64, x64), _b(-0.5))), _b(INV_SQRT_2PI))
    return to32(mul64(to64(g), add64(_cdf(x64), mul64(x64, pdf))))
