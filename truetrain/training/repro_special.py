"""tanh and erf for repro mode: fixed polynomial and table routes, never a library call.

Library ``tanh``/``erf`` differ between CPU instruction sets and CUDA in their last bits, so
repro mode builds them from correctly rounded + - * / and its own :func:`exp64`:

* :func:`tanh64`: ``(1 - e) / (1 + e)`` with ``e = exp(-2|x|)`` for ``|x| >= 1/4``; below,
  its Taylor series (degree 21), where ``1 - e`` would cancel.
* :func:`erf64`: a table route. ``|x|`` is rounded to the nearest ``a = i/16`` (``i`` up to
  96; ``|x| >= 6`` gives 1) and ``erf(a + h)`` (``|h| <= 1/32``) is the Taylor polynomial
  of degree 7 around ``a`` (absolute error below 1e-14), whose coefficients ``erf(a)`` and
  ``2/sqrt(pi) e^(-a^2) (-1)^(k-1) H_(k-1)(a) / k!`` are computed once in :mod:`decimal`
  arithmetic (software, correctly rounded: the same table on every machine) by the
  reference, truetrain/numerics/special.py.

Both are within 1 float32 ulp of the exact value after rounding to float32 (tested), and
give the same bits on any device because every operation is elementwise and exact-rounded.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from ..numerics.special import ERF_DEGREE, ERF_STEP, erf_table
from .repro_ops import F32, F64, exp64

# --- tanh ------------------------------------------------------------------------------


def _bernoulli(n: int) -> list[Fraction]:
    b = [Fraction(0)] * (n + 1)
    b[0] = Fraction(1)
    for m in range(1, n + 1):
        b[m] = -sum(Fraction(math.comb(m + 1, k)) * b[k] for k in range(m)) / (m + 1)
    return b


def _tanh_coeffs(terms: int) -> list[float]:
    """Coefficients of x^1, x^3, ... of tanh: 2^(2n) (2^(2n) - 1) B_2n / (2n)!."""
    b = _bernoulli(2 * terms)
    return [float(Fraction(2 ** (2 * n) * (2 ** (2 * n) - 1)) * b[2 * n] / math.factorial(2 * n))
            for n in range(1, terms + 1)]


_TANH_SERIES = _tanh_coeffs(11)  # degree 21: at |x| = 1/4 the next term is below 1e-17
_TANH_SMALL = 0.25
_TANH_BIG = 20.0  # tanh(20) is 1 in float64


def tanh64(x: torch.Tensor) -> torch.Tensor:
    """tanh of a float64 tensor; odd (tanh(-0) = -0), +-1 at +-inf, NaN stays NaN."""
    a = x.abs()
    e = exp64(torch.clamp(a, max=_TANH_BIG) * -2.0)
    big = (1.0 - e) / (1.0 + e)
    z = a * a
    p = torch.full_like(a, _TANH_SERIES[-1])
    for c in reversed(_TANH_SERIES[:-1]):
        p = p * z + c
    small = p * a
    y = torch.where(a < _TANH_SMALL, small, big)
    y = torch.where(torch.isnan(x), x, y)
    return torch.copysign(y, x)


def tanh_f32(x: torch.Tensor) -> torch.Tensor:
    """float32 tanh (float64 route, rounded once)."""
    return tanh64(x.to(F64)).to(F32)


# --- erf -------------------------------------------------------------------------------

_ERF_STEP = ERF_STEP  # grid points per unit
_ERF_DEGREE = ERF_DEGREE  # |h| <= 1/32: within 1e-14 of erf everywhere (degree 12 was exact to 2e-16)


_ERF_TABLE = torch.tensor(erf_table(), dtype=F64)  # (points, degree + 1): erf(a) and its Taylor coefficients
_tables: dict[str, torch.Tensor] = {}


def _table_on(device) -> torch.Tensor:
    key = str(device)
    if key not in _tables:
        _tables[key] = _ERF_TABLE.to(device)
    return _tables[key]


def erf64(x: torch.Tensor) -> torch.Tensor:
    """erf of a float64 tensor; odd, +-1 beyond |x| = 6 and at +-inf, NaN stays NaN."""
    a = x.abs()
    clipped = torch.clamp(a, max=6.0).nan_to_num_(0.0)  # NaN: any row, replaced below
    idx = torch.round(clipped * _ERF_STEP)
    h = clipped - idx * (1.0 / _ERF_STEP)  # exact: idx/16 is exact and close to a
    rows = _table_on(x.device).index_select(0, idx.to(torch.int64).flatten())
    p = rows[:, _ERF_DEGREE].clone()
    hf = h.flatten()
    for k in range(_ERF_DEGREE - 1, -1, -1):
        p = p * hf + rows[:, k]
    y = torch.where(a >= 6.0, torch.ones_like(a), p.view(a.shape))
    y = torch.where(torch.isnan(x), x, y)
    return torch.copysign(y, x)


def erf_f32(x: torch.Tensor) -> torch.Tensor:
    """float32 erf (float64 table route, rounded once)."""
    return erf64(x.to(F64)).to(F32)
