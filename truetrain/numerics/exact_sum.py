"""One element of repro mode's exact gradient sums, on float32 bit patterns: the semantics
the engine (truetrain/training/ops/book.py ``GradBook.columns`` and ``GradBook.scatter``,
the C kernel ``tt_column_sums``) and the one-step verifier
(contracts/numerics/OneStepExactSum.sol) compute.

A column sum (a bias's gradient, LayerNorm's gain and shift gradients) of ``n`` values
(one column of the batch's rows, read as a row of the transposed tensor):

* ``bits = min(24, 53 - ceil_log2(n))`` (the engine's ``operand_bits(n, 0)``);
* ``e = floor(log2 amax)`` of the largest magnitude (read from its exponent bits; an
  all-zero column counts as ``2**-960``: its sum is +0 whatever the scale);
* each ``x = ±m * 2**ex`` becomes ``q = round_half_even(x * 2**(bits - 1 - e))`` (at most
  ``2**bits`` in magnitude: the float64 product is exact);
* ``S = sum(q)``, exact (``n * 2**bits <= 2**53``), and ``float32(S * 2**(e - bits + 1))``,
  one rounding; ``S = 0`` gives +0 (the engine's ``+ 0.0``).

A column holding inf or NaN (``amax`` not finite) gives NaN when it holds a NaN or both
infinities, else that infinity: its scale ``up`` is then about ``2**-1000``, every finite
value rounds to ±0, and the infinities pass through.

The embedding's scatter (``index_add_`` of the quantised gradient rows into the table's
rows) is the same sum over only the rows whose id is the table row's, with the scale of the
whole column.
"""

from __future__ import annotations

import numpy as np

from .ieee import NAN32

INF32 = 0x7F800000


def sum_bits(n: int) -> int:
    """Operand bits of an exact sum of ``n`` quantised values."""
    return min(24, 53 - max(0, (int(n) - 1).bit_length()))


def _quantised(cols: np.ndarray):
    """``(q, e)``: the integers ``q`` (int64, cols' shape) and each column's exponent ``e``
    (the last axis is one column's values)."""
    bits = sum_bits(cols.shape[-1])
    mag = cols & np.uint32(0x7FFFFFFF)
    amax = mag.max(axis=-1).astype(np.int64)
    field = amax >> 23
    e = np.where(field > 0, field - 127, np.floor(np.log2(np.maximum(amax, 1))).astype(np.int64) - 149)
    f = (mag >> 23).astype(np.int64)
    m = np.where(f > 0, (mag & 0x7FFFFF).astype(np.int64) | (1 << 23), mag.astype(np.int64))
    ex = np.maximum(f, 1) - 150
    sh = np.clip((e - bits + 1)[..., None] - ex, -64, 40)  # >= 25 rounds every m < 2**24 to 0
    left = m << np.maximum(-sh, 0)
    right = np.maximum(sh, 1)
    kept = m >> right
    rest = m - (kept << right)
    half = np.int64(1) << (right - 1)
    rounded = kept + ((rest > half) | ((rest == half) & (kept & 1 == 1)))
    q = np.where(sh <= 0, left, rounded)
    q = np.where((field < 255)[..., None], q, 0)  # a scale near 2**-1000 rounds finite values to ±0
    return np.where(cols >> 31 == 1, -q, q), e - bits + 1


def _finish(s: np.ndarray, scale: np.ndarray, special: np.ndarray) -> np.ndarray:
    """float32 bits of ``s * 2**scale`` (one rounding), or ``special`` where it is not 0."""
    with np.errstate(all="ignore"):
        out = np.ldexp(s.astype(np.float64), scale).astype(np.float32).view(np.uint32)
    out = np.where(s == 0, np.uint32(0), out)
    return np.where(special != 0, special, out).astype(np.uint32)


def _special(cols: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Per output: 0 for a finite column, else the float32 bits of the sum of its members'
    non-finite values (±inf, or NaN), +0 where no member is one (only finite members)."""
    mag = cols & np.uint32(0x7FFFFFFF)
    nan = ((mag > INF32) & member).any(axis=-1)
    pos = ((cols == INF32) & member).any(axis=-1)
    neg = ((cols == (INF32 | 0x80000000)) & member).any(axis=-1)
    out = np.where(nan | (pos & neg), NAN32, np.where(pos, INF32, np.where(neg, INF32 | 0x80000000, 0)))
    return out.astype(np.uint32)


def column_sums(cols) -> np.ndarray:
    """float32 bits of the exact sum of each row of ``cols`` (uint32 bits, (..., n): a
    column of the batch's rows each)."""
    cols = np.asarray(cols, np.uint32)
    finite = (cols & np.uint32(0x7FFFFFFF)).max(axis=-1) < INF32
    q, scale = _quantised(cols)
    special = np.where(finite, np.uint32(0), _special(cols, np.ones(cols.shape, bool)))
    return _finish(q.sum(axis=-1), scale, special)


def scatter_sums(gt, ids, num: int) -> np.ndarray:
    """float32 bits (num, d) of the table gradient: element ``[t][j]`` the exact sum of
    ``gt[j][r]`` over the rows ``r`` with ``ids[r] == t``, on column ``j``'s scale. ``gt``:
    the gradient transposed (d, n) (uint32 bits); ``ids``: n ints in [0, num)."""
    gt, ids = np.asarray(gt, np.uint32), np.asarray(ids, np.int64)
    finite = (gt & np.uint32(0x7FFFFFFF)).max(axis=-1) < INF32  # (d,)
    q, scale = _quantised(gt)  # (d, n), (d,)
    member = ids[None, :] == np.arange(num)[:, None]  # (num, n)
    s = (member[:, None, :] * q[None, :, :]).sum(axis=-1)  # (num, d)
    special = _special(gt[None, :, :], member[:, None, :])
    special = np.where(finite[None, :], np.uint32(0), special)
    return _finish(s, np.broadcast_to(scale, s.shape), special)
