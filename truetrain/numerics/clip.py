"""The clip factor of repro mode's AdamW, on float bit patterns and integers: the semantics
the engine (truetrain/training/schedule.py ``global_norm`` / ``clip_of_norm`` /
``clip_factor``, a pipeline's stages through ``square_grid`` / ``grid_sum`` /
``norm_of_sum``) and the one-step verifier (contracts/numerics/OneStepClip.sol) compute. The
engine reads :data:`CLIP_EPS` and :func:`norm_bits` from here.

Over every gradient value ``g`` (float32; ``count`` of them, all tensors together):

* the squares ``g * g`` are exact in float64; the largest is ``L = amax**2`` for ``amax``
  the largest magnitude (NaN when a value is NaN: an integer max over the sign-cleared
  patterns, as NaN's patterns lie above inf's);
* the grid: ``bits = 53 - ceil_log2(count)`` (:func:`norm_bits`), ``e = floor(log2 L)``
  (read from the exponent bits; ``L = 0`` counts as ``2**-960``), the quantum
  ``2**(e - bits + 1)``; ``L`` inf or NaN gives the engine's scales built from the
  exponent field 0x7FF: every finite square rounds to 0 and only the infinities and NaNs
  pass;
* ``S = sum(round_half_even(g * g / quantum))``, each term at most ``2**bits``, so the
  integer sum is below ``2**53`` and exact in float64 in any order or grouping (NaN if a
  value is NaN, inf if one is infinite);
* ``norm = sqrt64((S + 0) * quantum)`` (``special.sqrt64``), then the factor
  ``float32(min(clip_norm * (1 / (norm + 1e-6)), 1))``: torch's ``clip_norm / tensor`` is
  a reciprocal then a product (two roundings), and ``clamp_max`` keeps NaN.

A one-step cannot read every gradient, so the sum is cut: each gradient tensor (in the
parameters' order) into ranges of ``width`` values, the last one shorter (:func:`ranges`).
Three applications: the ranges' largest magnitudes (:func:`partial_max`, float32), their
integer sums on the grid of the largest of those (:func:`partial_sum`, float64), and the
combine (:func:`clip_of_partials`: the sums added, the norm and the factor). A range's sum
uses the larger of the agreed maximum and its own (the same in any honest trace; it keeps
every term on the grid whatever the inputs).
"""

from __future__ import annotations

import numpy as np

from .ieee import NAN32, NAN64, add64, bits64, div64, mul64, to32
from .special import sqrt64

CLIP_EPS = 1e-6
INF32 = 0x7F800000
INF64 = 0x7FF0000000000000
ONE64 = 0x3FF0000000000000
EXACT_BITS = 53
#: an all-zero gradient's largest square counts as this power of two (the engine's _TINY)
ZERO_EXPONENT = -960


def norm_bits(count: int) -> int:
    """Bits a quantised square keeps so that ``count`` of them sum exactly in float64."""
    return EXACT_BITS - max(0, (int(count) - 1).bit_length())


def ranges(sizes: list[int], width: int) -> list[tuple[int, int, int]]:
    """``(tensor, start, count)`` of each partial: every tensor (of ``sizes[t]`` values, in
    order) cut into ranges of ``width`` values, the last one shorter."""
    return [(t, start, min(width, n - start)) for t, n in enumerate(sizes) for start in range(0, n, width)]


def partial_max(g) -> int:
    """float32 bits of the largest magnitude among the values ``g`` (uint32 bits), NaN
    canonical."""
    m = int((np.asarray(g, np.uint32).reshape(-1) & np.uint32(0x7FFFFFFF)).max())
    return NAN32 if m > INF32 else m


def _square_exponent(amax: int) -> int:
    """``floor(log2 amax**2)`` for a finite magnitude pattern (``ZERO_EXPONENT`` for 0)."""
    if amax == 0:
        return ZERO_EXPONENT
    field = amax >> 23
    m = (amax & 0x7FFFFF) | (1 << 23) if field else amax
    return (m * m).bit_length() - 1 + 2 * (max(field, 1) - 150)


def _quantum_exponent(amax: int, count: int) -> int:
    """The grid's quantum ``2**c`` for the largest magnitude ``amax`` (pattern, finite)."""
    return _square_exponent(amax) - norm_bits(count) + 1


def partial_sum(g, amax: int, count: int) -> int:
    """float64 bits of the integer sum of the squares of ``g`` (uint32 bits) on the grid of
    the largest magnitude ``max(amax, partial_max(g))`` and ``count`` values in all."""
    g = np.asarray(g, np.uint32).reshape(-1)
    mag = g & np.uint32(0x7FFFFFFF)
    if (mag > INF32).any():
        return NAN64
    if (mag == INF32).any():
        return INF64
    top = max(int(mag.max()), amax)
    if top >= INF32:  # a grid of inf or NaN: finite squares round to 0
        return 0
    c = _quantum_exponent(top, count)
    field = (mag >> 23).astype(np.int64)
    m = np.where(field > 0, (mag & 0x7FFFFF).astype(np.int64) | (1 << 23), mag.astype(np.int64))
    sq = m * m  # below 2**48
    sh = c - 2 * (np.maximum(field, 1) - 150)  # round_half_even(sq * 2**-sh)
    left = sq << np.clip(-sh, 0, 62)  # sh <= 0: exact, at most 2**bits
    right = np.clip(sh, 1, 62)
    kept = sq >> right
    rest = sq - (kept << right)
    half = np.int64(1) << (right - 1)
    rounded = kept + ((rest > half) | ((rest == half) & (kept & 1 == 1)))
    total = sum(np.where(sh <= 0, left, rounded).tolist())
    return int(bits64(np.float64(total)))


def _down(amax: int, count: int) -> int:
    """float64 bits of the grid's quantum (the engine's ``down``)."""
    bits = norm_bits(count)
    if amax >= INF32:  # from the exponent field 0x7FF
        return (2047 - (bits - 1)) << 52
    return (_quantum_exponent(amax, count) + 1023) << 52


def norm_of_partials(maxima, sums, count: int) -> int:
    """float64 bits of the L2 norm from the ranges' largest magnitudes (float32 bits) and
    integer sums (float64 bits): ``sqrt64((sum + 0) * quantum)``, the sums added from +0."""
    amax = partial_max(maxima)
    total = 0.0
    for s in np.asarray(sums, np.uint64).reshape(-1).view(np.float64).tolist():
        total += s  # IEEE float64 additions, in order
    return int(sqrt64(mul64(bits64(total), _down(amax, count))))


def clip_of_norm(norm: int, clip_norm: int) -> int:
    """float32 bits of ``min(clip_norm * (1 / (norm + 1e-6)), 1)`` (float64 bits in; NaN
    kept)."""
    f = int(mul64(div64(ONE64, add64(norm, bits64(np.float64(CLIP_EPS)))), clip_norm))
    if f != NAN64 and np.uint64(f).view(np.float64) > 1.0:
        f = ONE64
    return int(to32(f))


def clip_of_partials(maxima, sums, count: int, clip_norm: int) -> tuple[int, int]:
    """``(norm, factor)``: float64 and float32 bits, from the partials (see above)."""
    norm = norm_of_partials(maxima, sums, count)
    return norm, clip_of_norm(norm, clip_norm)


def clip_factor(tensors, clip_norm: int, width: int) -> tuple[int, int, list[int], list[int]]:
    """``(norm, factor, maxima, sums)`` of gradient tensors (uint32 bits each) cut into
    ranges of ``width``: the whole computation, as the applications chain it."""
    flats = [np.asarray(t, np.uint32).reshape(-1) for t in tensors]
    parts = [flats[t][s:s + n] for t, s, n in ranges([len(f) for f in flats], width)]
    count = sum(len(f) for f in flats)
    maxima = [partial_max(p) for p in parts]
    amax = partial_max(np.array(maxima, np.uint32))
    sums = [partial_sum(p, amax, count) for p in parts]
    norm, factor = clip_of_partials(maxima, sums, count, clip_norm)
    return norm, factor, maxima, sums

