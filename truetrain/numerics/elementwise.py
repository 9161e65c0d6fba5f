"""One element of repro mode's elementwise and data-movement operators, on float32 bit
patterns and integers: the semantics the engine (truetrain/training/intgemm_fused.py's
``relu`` / ``apply_mask``, torch's ``+`` and ``permute``, truetrain/training/ops/linear.py's
``embedding``, truetrain/training/ops/dropout.py) and the one-step verifier
(contracts/numerics/OneStepElementwise.sol) both compute. Element arguments are ints or
uint32 arrays; NaN results canonical.

* ``relu(h) = (h * mask + 0.0, mask)`` with ``mask = 1.0 if h > 0 else 0.0``: so -0 and
  negatives give +0, NaN stays NaN, and -inf gives NaN (``-inf * 0``); its backward
  ``apply_mask(g, mask) = g * mask + 0.0``.
* ``add``: ``a + b`` with ``b`` repeated over ``a`` (a bias row, the position embeddings
  over the batch, a residual of the same shape): element ``i`` reads ``b[i % numel(b)]``.
* ``permute``: ``x.permute(perm).contiguous()``: output element ``i`` is input element
  :func:`permute_source` (a transpose is ``perm = (1, 0)``).
* ``embedding``: ``table[ids[r]][c]``; the index tensor is committed as its int32 values'
  4-byte big-endian words (the same tree as a float32 tensor's, see tensor_merkle).
* dropout's counter-based mask: element ``i`` of the step's batch (counter ``first + i``)
  is kept when ``lowbias32`` hashes of ``(counter, key words)`` reach
  ``min(round(p * 2**32), 2**32)``, and ``x * mask`` with ``mask = keep * float32(1) /
  float32(1 - p)`` (``1 - p`` in float64, rounded once to float32).
"""

from __future__ import annotations

import numpy as np

from ..errors import NumericsError
from ..hashing import keccak256
from .ieee import ONE32, add32, div32, mul32, to32

M32 = 0xFFFFFFFF


def relu(h):
    """``(y, mask)`` of the ReLU of ``h``."""
    h = np.asarray(h, np.uint32)
    mask = np.where((h > 0) & (h <= 0x7F800000), np.uint32(ONE32), np.uint32(0))
    return apply_mask(h, mask), mask


def apply_mask(x, mask):
    """``x * mask + 0.0`` (the ReLU's backward; +0 for -0, NaN for inf or NaN times 0)."""
    return add32(mul32(x, mask), 0)


def add(a, b):
    """``a + b`` elementwise, ``b`` repeated over ``a`` (``numel(a)`` a multiple of ``numel(b)``)."""
    a, b = np.asarray(a, np.uint32).reshape(-1), np.asarray(b, np.uint32).reshape(-1)
    if len(b) == 0 or len(a) % len(b):
        raise NumericsError(f"{len(b)} elements do not repeat over {len(a)}")
    return add32(a, np.tile(b, len(a) // len(b)))


def permute_source(shape: tuple[int, ...], perm: tuple[int, ...], index: int) -> int:
    """The flat input index of flat output element ``index`` of ``x.permute(perm)`` for
    ``x`` of ``shape`` (row-major)."""
    if sorted(perm) != list(range(len(shape))):
        raise NumericsError(f"{perm} is not a permutation of {len(shape)} dimensions")
    out_shape = [shape[p] for p in perm]
    source = [0] * len(shape)
    for k in range(len(shape) - 1, -1, -1):
        index, source[perm[k]] = divmod(index, out_shape[k])
    if index:
        raise NumericsError("the element is outside the tensor")
    flat = 0
    for dim, i in zip(shape, source):
        flat = flat * dim + i
    return flat


def embedding_source(ids: list[int], rows: int, cols: int, r: int, c: int) -> int:
    """The flat table index of ``table[ids[r]][c]`` for a table (rows, cols)."""
    if not 0 <= ids[r] < rows:
        raise NumericsError(f"index {ids[r]} is outside a table of {rows} rows")
    return ids[r] * cols + c


def dropout_words(key: bytes, site: str) -> tuple[int, int, int]:
    """The site's three key words: big-endian words 0..2 of keccak256(key ‖ site)."""
    h = keccak256(bytes(key) + site.encode())
    return tuple(int.from_bytes(h[i:i + 4], "big") for i in (0, 4, 8))


def _mix32(x):
    """``lowbias32`` on uint64 arrays below 2**32 (each product below 2**64: exact)."""
    x = x ^ (x >> np.uint64(16))
    x = (x * np.uint64(0x7FEB352D)) & np.uint64(M32)
    x = x ^ (x >> np.uint64(15))
    x = (x * np.uint64(0x846CA68B)) & np.uint64(M32)
    return x ^ (x >> np.uint64(16))


def dropout_threshold(p: float) -> int:
    """``min(round(p * 2**32), 2**32)`` (float64 product, exact; ties to even)."""
    return min(round(p * 2**32), 2**32)


def dropout_scale(p: float) -> int:
    """float32 ``1 / float32(1 - p)`` (bits)."""
    return div32(ONE32, to32(np.float64(1.0 - p).view(np.uint64)))


def dropout_mask(words: tuple[int, int, int], counters, p: float):
    """The float32 mask bits at int64 ``counters``: ``scale`` where kept, ``0 * scale``
    (+0, or NaN for an infinite scale) where dropped."""
    c = np.asarray(counters, np.int64).astype(np.uint64)
    k0, k1, k2 = (np.uint64(w) for w in words)
    h = _mix32((c & np.uint64(M32)) ^ k0)
    h = _mix32(h ^ ((c >> np.uint64(32)) & np.uint64(M32)) ^ k1)
    h = _mix32(h ^ k2)
    keep = h.astype(object) >= dropout_threshold(p)
    return mul32(np.where(keep.astype(bool), np.uint32(ONE32), np.uint32(0)), dropout_scale(p))


def dropout(x, words: tuple[int, int, int], first: int, p: float):
    """``x * mask`` for elements whose counters start at ``first``."""
    x = np.asarray(x, np.uint32).reshape(-1)
    return mul32(x, dropout_mask(words, first + np.arange(len(x), dtype=np.int64), p))
