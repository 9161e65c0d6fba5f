"""One element of repro mode's LayerNorm, on float bit patterns: the semantics the engine
(truetrain/training/ops/elementwise.py ``ln_forward``, the C kernels' ``tt_ln_forward``) and
the one-step verifier (contracts/numerics/OneStepLayerNorm.sol) compute. Row-local, float64
inside, one rounding to float32 at the end:

* ``tree_sum``: the row zero-padded to a power of two, then pairwise ``x[0::2] + x[1::2]``
  until one value is left (a fixed order);
* ``mean = tree_sum(x) / n``, ``c = x - mean``, ``var = tree_sum(c * c) / n``,
  ``rstd = 1 / sqrt64(var + eps)`` (torch's ``1.0 / t`` is a reciprocal: the same
  correctly rounded quotient), ``y[j] = float32(c[j] * rstd * w[j] + b[j])``.
"""

from __future__ import annotations

import numpy as np

from .ieee import add64, div64, int_to64, mul64, sub64, to32, to64
from .special import sqrt64

ONE64 = 0x3FF0000000000000


def tree_sum(x) -> np.ndarray:
    """float64 bits of the fixed pairwise sum over the last axis of float64 bits ``x``."""
    x = np.asarray(x, np.uint64)
    n = x.shape[-1]
    width = 1 << max(0, (n - 1).bit_length())
    x = np.concatenate([x, np.zeros(x.shape[:-1] + (width - n,), np.uint64)], axis=-1)
    while x.shape[-1] > 1:
        x = np.asarray(add64(x[..., 0::2], x[..., 1::2]), np.uint64)
    return x[..., 0]


def row_stats(row, eps: int):
    """``(centred row, rstd)`` (float64 bits) of a float32 row (rows: the last axis);
    ``eps`` float64 bits."""
    x64 = np.asarray(to64(row), np.uint64)
    n = int_to64(x64.shape[-1])
    mean = div64(tree_sum(x64), n)
    c = np.asarray(sub64(x64, np.asarray(mean, np.uint64)[..., None]), np.uint64)
    var = div64(tree_sum(mul64(c, c)), n)
    return c, div64(ONE64, sqrt64(add64(var, eps)))


def ln_forward(rows, weight, bias, eps: int):
    """float32 bits of LayerNorm of float32 ``rows`` (..., n) with gain and shift (n,)."""
    c, rstd = row_stats(rows, eps)
    xhat = mul64(c, np.asarray(rstd, np.uint64)[..., None])
    return to32(add64(mul64(xhat, to64(weight)), to64(bias)))


def ln_backward(rows, grads, weight, eps: int):
    """float32 bits ``(dx, g * xhat)`` of LayerNorm's backward for float32 input ``rows``
    and output gradients ``grads`` (..., n): ``xhat`` and ``rstd`` recomputed from the rows
    (the forward's float64 values, bit for bit), ``dxhat = g * w``,
    ``inner = (dxhat - mean(dxhat)) - xhat * mean(dxhat * xhat)``, ``dx = float32(inner * rstd)``."""
    c, rstd = row_stats(rows, eps)
    rstd = np.asarray(rstd, np.uint64)[..., None]
    xhat = np.asarray(mul64(c, rstd), np.uint64)
    g64 = np.asarray(to64(grads), np.uint64)
    dxhat = np.asarray(mul64(g64, to64(weight)), np.uint64)
    n = int_to64(dxhat.shape[-1])
    m1 = np.asarray(div64(tree_sum(dxhat), n), np.uint64)[..., None]
    m2 = np.asarray(div64(tree_sum(mul64(dxhat, xhat)), n), np.uint64)[..., None]
    inner = sub64(sub64(dxhat, m1), mul64(xhat, m2))
    return to32(mul64(inner, rstd)), to32(mul64(g64, xhat))
