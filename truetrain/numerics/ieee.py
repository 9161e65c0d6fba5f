"""IEEE-754 float32 / float64 arithmetic on bit patterns (numpy's, x86: nearest even,
subnormals kept), for the operators' references: ints or uint arrays in, the same out,
every NaN result the canonical pattern (0x7FC00000, 0x7FF8000000000000), as
contracts/numerics/Float32.sol and Float64.sol return.
"""

from __future__ import annotations

import numpy as np

NAN32 = 0x7FC00000
NAN64 = 0x7FF8000000000000
ONE32 = 0x3F800000


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint64).astype(np.uint32).view(np.float32)


def _f64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint64).view(np.float64)


def bits32(x: np.ndarray):
    """The bit patterns of float32 ``x``, NaN canonical (an int for a 0-dim input)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32)
    b = np.where(np.isnan(np.asarray(x, dtype=np.float32)), np.uint32(NAN32), b).astype(np.uint32)
    return int(b) if b.ndim == 0 else b


def bits64(x: np.ndarray):
    """The bit patterns of float64 ``x``, NaN canonical (an int for a 0-dim input)."""
    x = np.asarray(x, dtype=np.float64)
    b = np.where(np.isnan(x), np.uint64(NAN64), x.view(np.uint64)).astype(np.uint64)
    return int(b) if b.ndim == 0 else b


def _op(fn, load, store, width: int):
    """``fn`` on bit patterns of one width (loaded, computed by numpy, stored canonical)."""
    def op(*args):
        with np.errstate(all="ignore"):
            return store(fn(*(load(a) for a in args)))
    op.__doc__ = f"float{width} {fn.__name__} on bit patterns."
    return op


add32, sub32, mul32, div32 = (_op(f, _f32, bits32, 32) for f in (np.add, np.subtract, np.multiply, np.divide))
add64, sub64, mul64, div64 = (_op(f, _f64, bits64, 64) for f in (np.add, np.subtract, np.multiply, np.divide))
sqrt32 = _op(np.sqrt, _f32, bits32, 32)  # sqrtss: correctly rounded, as the engine's sqrt32 (through float64)


def to64(a):
    """float32 -> float64 (exact)."""
    with np.errstate(all="ignore"):
        return bits64(_f32(a).astype(np.float64))


def to32(a):
    """float64 -> float32 (one rounding to nearest even)."""
    with np.errstate(all="ignore"):
        return bits32(_f64(a).astype(np.float32))


def int_to64(n):
    """An integer (below 2**53 in magnitude) as float64 (exact)."""
    return bits64(np.asarray(n, dtype=np.int64).astype(np.float64))


def nonzero(a) -> bool:
    """Python's truth of a float32 scalar: False for ±0 only (NaN is true)."""
    return bool(int(a) & 0x7FFFFFFF)
