"""One element of repro mode's causal softmax, forward and backward, on float bit patterns:
the semantics the engine (truetrain/training/ops/attention.py ``softmax_causal`` /
``softmax_backward``, the C kernels ``tt_softmax_causal`` / ``tt_softmax_backward``) and the
one-step verifier (contracts/numerics/OneStepSoftmax.sol) compute.

Scores ``s`` (N, T, T) are read as rows (N·T, T); row ``r`` is position ``i = r mod T`` of
its sequence and sees columns ``j <= i`` (the rest are -inf). Float64 inside:

* ``m`` = the row's largest visible score (NaN if one is NaN), ``e[j] = exp64(s[j] - m)``
  (0 for the hidden columns);
* the **row sum** (an application of its own: one row is T exp64s):
  ``S = (sum(round(e * 2**k)) + 0) * 2**-k`` with ``k = 53 - ceil_log2(T)`` (the integer sum
  is exact in any order), float64;
* ``p[j] = float32(e[j] / S)``;
* backward (``p``, its output gradient ``dp``, float32 ``scale``):
  ``ds[j] = float32(p[j] * (dp[j] - tree_sum(dp * p))) * scale`` (float64 inside, the fixed
  pairwise ``tree_sum`` over the whole row, then a float32 product).
"""

from __future__ import annotations

import numpy as np

from .ieee import NAN64, bits64, div64, mul32, mul64, sub64, to32, to64
from .layernorm import tree_sum
from .special import exp64

NEG_INF64 = 0xFFF0000000000000


def _masked(rows) -> np.ndarray:
    """float64 bits of the rows (R, T) with row ``r``'s columns past ``r mod T`` at -inf."""
    rows = np.asarray(rows, np.uint32)
    t = rows.shape[-1]
    z = np.asarray(to64(rows), np.uint64)
    hidden = np.arange(t)[None, :] > (np.arange(rows.shape[0]) % t)[:, None]
    return np.where(hidden, np.uint64(NEG_INF64), z)


def _exps(rows) -> np.ndarray:
    """float64 bits ``exp64(z - m)`` of each row (R, T) against its visible maximum."""
    z = _masked(rows)
    zf = z.view(np.float64)
    nan = np.isnan(zf)
    m = np.where(nan.any(axis=-1), np.nan, np.where(nan, -np.inf, zf).max(axis=-1))
    return np.asarray(exp64(sub64(z, bits64(m)[:, None])), np.uint64)


def row_sums(rows) -> np.ndarray:
    """float64 bits (R,) of each row's exact sum of its exps (the row-sum application)."""
    e = _exps(rows).view(np.float64)
    k = 53 - max(0, (e.shape[-1] - 1).bit_length())
    with np.errstate(all="ignore"):
        s = (np.rint(e * 2.0**k).sum(axis=-1) + 0.0) * 2.0**-k  # integers below 2**53: exact
    return np.where(np.isnan(s), np.uint64(NAN64), s.view(np.uint64))


def softmax(rows, sums) -> np.ndarray:
    """float32 bits (R, T) of the causal softmax of the rows, given their row sums."""
    return np.asarray(to32(div64(_exps(rows), np.asarray(sums, np.uint64)[:, None])), np.uint32)


def softmax_backward(p, dp, scale: int) -> np.ndarray:
    """float32 bits of ``float32(p * (dp - tree_sum(dp * p))) * scale`` per row (R, T)."""
    p64, dp64 = np.asarray(to64(p), np.uint64), np.asarray(to64(dp), np.uint64)
    total = np.asarray(tree_sum(mul64(dp64, p64)), np.uint64)[..., None]
    return np.asarray(mul32(to32(mul64(p64, sub64(dp64, total))), scale), np.uint32)
