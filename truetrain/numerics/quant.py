"""The quantised products past the linear layer's forward, on float32 bit patterns and
integers: what the engine (truetrain/training/intgemm.py, ops/book.py ``GradBook.weight``,
ops/attention.py ``bmm_exact``, their C kernels) and the one-step verifier
(contracts/numerics/OneStepQuant.sol) compute. Three kinds:

* ``row_scales``: the power-of-two scale of one row of ``x`` (R, K), the engine's
  ``pow2_scales`` of the row's largest magnitude: ``E`` = the exponent field of the largest
  sign-cleared pattern, clamped to ``>= bits + 26``, the scale ``2**(E - bits - 126)``
  (float32 bits ``(E - bits + 1) << 23``); NaN for a row holding inf or NaN (``E`` = 255).
  An application of its own, (R,), so that the weight gradient reads the forward's row
  scales as an agreed input rather than reopening every row.
* ``weight_grad``: ``dW[o][i]`` of a linear map ``y = a @ W.T`` over a batch of ``M`` rows
  (``GradBook.weight``: ``dW.T = qa.T @ quantize_columns(g * sa)``). From column ``i`` of
  ``a`` and column ``o`` of ``g`` (rows of the transposed tensors, ``transpose``
  applications) and the ``M`` row scales ``sa`` of ``a``:

  1. ``qa[r] = quantize(a[r][i])`` on row ``r``'s scale (``E_r = field(sa[r]) + bits - 1``):
     the forward's integers, reused with unit scale;
  2. ``g'[r] = float32(g[r][o] * sa[r])`` (one float32 product: exact, or rounded in the
     subnormal range, inf past the largest);
  3. ``E'`` = the clamped exponent of the column's largest ``|g'|`` (the whole batch's
     maximum: the column is the contraction, opened whole), ``q'[r] = quantize(g'[r], E')``;
  4. ``S = sum(qa * q')`` exactly, ``float32(S * 2**(E' - bits - 126))`` once; ``S = 0``
     gives +0; ``E'`` = 255 (inf or NaN in ``g'``: also every ``sa`` that is NaN) gives NaN.

* ``bmm``: one element of attention's ``bmm_exact`` (N, M, K) @ (N, K, P): the linear
  element (truetrain/numerics/gemm_element.py) of row ``m`` of ``a[n]`` and column ``p`` of
  ``b[n]`` (a row of ``b[n]``'s transpose), without a bias, then ``* scale`` in float32 (the
  scores' ``1/sqrt(d)``; 1.0, the identity, for the other products).

``quantize`` here is total: a shift of 0 or less (a value above its row's scale, which only
an inconsistent input gives) clamps, as the engine's ``round(x * up).clamp`` does.
"""

from __future__ import annotations

import numpy as np

from ..errors import NumericsError
from .gemm_element import MIN_EXPONENT_MARGIN, NAN32, operand_bits
from .ieee import ONE32, mul32

ABS32 = 0x7FFFFFFF


def _field(x: np.ndarray) -> np.ndarray:
    return ((np.asarray(x, np.uint32) >> 23) & 0xFF).astype(np.int64)


def clamped_exponents(x, bits: int) -> np.ndarray:
    """The clamped exponent field ``E`` of each row's largest magnitude (255: inf or NaN)."""
    amax = (np.asarray(x, np.uint32) & np.uint32(ABS32)).max(axis=-1)
    return np.maximum(_field(amax), bits + MIN_EXPONENT_MARGIN)


def row_scales(x, limbs: int) -> np.ndarray:
    """float32 bits of each row's scale (``x``: uint32 bits (..., K))."""
    bits = operand_bits(limbs)
    e = clamped_exponents(x, bits)
    return np.where(e == 255, NAN32, (e - bits + 1) << 23).astype(np.uint32)


def quantize(x, e, bits: int) -> np.ndarray:
    """int64 ``clamp(round_half_even(x * 2**(bits + 126 - e)), -2**bits, 2**bits - 1)`` of
    float32 bits ``x`` with exponents ``e`` (broadcast), by shifts of the significand."""
    x = np.asarray(x, np.uint32)
    f = _field(x)
    m = (x & np.uint32(0x7FFFFF)).astype(np.int64) | ((f > 0).astype(np.int64) << 23)
    sh = np.asarray(e, np.int64) + 24 - bits - np.maximum(f, 1)
    right = np.clip(sh, 1, 40)
    kept = m >> right
    rest = m - (kept << right)
    half = np.int64(1) << (right - 1)
    q = kept + ((rest > half) | ((rest == half) & (kept & 1 == 1)))
    q = np.where(sh <= 0, np.int64(1) << 40, q)  # above the scale: clamped
    top = np.int64(1) << bits
    return np.where(x >> 31 == 1, -np.minimum(q, top), np.minimum(q, top - 1))


def round_scaled(s: np.ndarray, exp: np.ndarray) -> np.ndarray:
    """float32 bits of ``s * 2**exp`` (int64 ``s``, ``|s| < 2**53``) rounded once."""
    with np.errstate(all="ignore"):
        out = np.ldexp(np.asarray(s, np.int64).astype(np.float64), exp).astype(np.float32).view(np.uint32)
    return np.where(s == 0, np.uint32(0), out).astype(np.uint32)


def _check_exact(m: int, bits: int) -> None:
    """Refuse a contraction whose sums could pass 2**53 (the float64 products' exact range)."""
    if m << (2 * bits) >= 1 << 53:
        raise NumericsError(f"a contraction of {m} is past the exact float64 reference")


def weight_grads(at, gt, scales, limbs: int) -> np.ndarray:
    """float32 bits (nout, nin) of ``dW`` from ``at`` = a.T (nin, M), ``gt`` = g.T (nout, M)
    and ``scales`` (M,): the forward's row scales of ``a`` (uint32 bits each)."""
    bits = operand_bits(limbs)
    at, gt, scales = (np.asarray(t, np.uint32) for t in (at, gt, scales))
    _check_exact(at.shape[-1], bits)
    qa = quantize(at, _field(scales)[None, :] + bits - 1, bits)
    gp = np.asarray(mul32(gt, scales[None, :]), np.uint32)
    e = clamped_exponents(gp, bits)
    qg = quantize(gp, e[:, None], bits)
    s = (qg.astype(np.float64) @ qa.T.astype(np.float64)).astype(np.int64)  # integers < 2**53: exact
    out = round_scaled(s, (e - bits - 126)[:, None])
    return np.where((e == 255)[:, None], np.uint32(NAN32), out).astype(np.uint32)


def weight_grad_element(col_a, col_g, scales, limbs: int) -> int:
    """``dW[o][i]`` from column ``i`` of ``a``, column ``o`` of ``g`` and ``a``'s row scales."""
    return int(weight_grads([col_a], [col_g], scales, limbs)[0, 0])


def bmm_elements(rows_a, rows_b, limbs: int, scale: int = ONE32) -> np.ndarray:
    """float32 bits of each pair's element: ``rows_a[c]`` a row of ``a[n]``, ``rows_b[c]`` a
    column of ``b[n]`` (uint32 bits (C, K) each), times ``scale`` in float32."""
    bits = operand_bits(limbs)
    rows_a, rows_b = np.asarray(rows_a, np.uint32), np.asarray(rows_b, np.uint32)
    _check_exact(rows_a.shape[-1], bits)
    ea, eb = clamped_exponents(rows_a, bits), clamped_exponents(rows_b, bits)
    s = (quantize(rows_a, ea[:, None], bits) * quantize(rows_b, eb[:, None], bits)).sum(axis=-1)
    out = round_scaled(s, ea + eb - 2 * bits - 252)
    out = np.where((ea == 255) | (eb == 255), np.uint32(NAN32), out)
    return np.asarray(mul32(out, scale), np.uint32)
