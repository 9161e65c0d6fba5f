"""One output element of repro mode's linear product, on float32 bit patterns and Python
integers: the semantics the engine (truetrain/training/intgemm.py) and the one-step
verifier (contracts/numerics/OneStepGemm.sol) both compute.

``C[i][j]`` of ``C = A @ Bt.T (+ bias)``, from row ``i`` of ``A`` and row ``j`` of ``Bt``
(a column of the right operand), ``K`` elements each:

1. each row is quantised on its own: ``E`` = the float32 exponent field of its largest
   magnitude, clamped to at least ``bits + 26`` (``bits = 7 * limbs - 1``: 13 or 20);
   ``q = round_half_even(x * 2**(bits + 126 - E))`` clamped to ``[-2**bits, 2**bits - 1]``
   (the float32 product is exact, or below 2**-126 where both round to 0); the row's scale
   is ``2**(E - bits - 126)``. A row holding inf or NaN (``E`` = 255) makes the element NaN.
2. ``S = sum(qa * qb)`` exactly (the engine splits each ``q`` into int8 limbs and combines
   the limb products in int64: the same integer).
3. ``S * 2**(Ea + Eb - 2 bits - 252)`` rounded once to float32 (nearest, ties to even,
   subnormals, overflow to inf); ``S = 0`` gives +0.
4. ``+ bias[j]`` in float32 (a second rounding).

NaN results are the canonical 0x7FC00000 (a committed tensor holds no other NaN).
"""

from __future__ import annotations

from ..errors import NumericsError
from .ieee import add32

NAN32 = 0x7FC00000
SIGN32 = 0x80000000
#: Bits of one int8 limb's digit; the limb counts a manifest may name (2: 13-bit operands,
#: 3: 20-bit operands); how far above the operand bits a row's exponent is clamped (so every
#: scale is a normal float32). The engine (training/intgemm.py) reads these.
LIMB_BITS = 7
LIMB_COUNTS = (2, 3)
MIN_EXPONENT_MARGIN = 26


def operand_bits(limbs: int) -> int:
    if limbs not in LIMB_COUNTS:
        raise NumericsError(f"limbs must be 2 or 3, got {limbs!r}")
    return LIMB_BITS * limbs - 1


def row_exponent(row: list[int], bits: int) -> int:
    """The clamped exponent field ``E`` of the row's largest magnitude (255: inf or NaN)."""
    return max(max(x & 0x7FFFFFFF for x in row) >> 23, bits + MIN_EXPONENT_MARGIN)


def quantize(x: int, e: int, bits: int) -> int:
    """``round_half_even(x * 2**(bits + 126 - e))`` clamped to the operand range."""
    field = (x >> 23) & 0xFF
    m = (x & 0x7FFFFF) | ((field > 0) << 23)
    shift = e + 24 - bits - max(field, 1)  # x * up = m / 2**shift, shift >= 4
    q, rest = m >> shift, m & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    q += rest > half or (rest == half and q & 1)
    return -q if x & SIGN32 else min(q, (1 << bits) - 1)


def round_float32(s: int, exp: int) -> int:
    """The float32 bits of ``s * 2**exp`` (integer ``s``) rounded to nearest even."""
    if s == 0:
        return 0
    sign, mag = (SIGN32 if s < 0 else 0), abs(s)
    top = exp + mag.bit_length() - 1  # the exponent of the leading bit
    quantum = max(top - 23, -149)  # the exponent of the last kept bit (subnormal: -149)
    if quantum <= exp:
        kept = mag << (exp - quantum)
    else:
        shift = quantum - exp
        kept, rest = mag >> shift, mag & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        kept += rest > half or (rest == half and kept & 1)
    if top > 127:
        return sign | 0x7F800000
    return sign | (((quantum + 149) << 23) + kept)  # a carry into field 255 is inf's pattern


def linear_element(row_a: list[int], row_b: list[int], limbs: int, bias: int | None = None) -> int:
    """The float32 bits of one element of ``A @ Bt.T (+ bias)`` from its two rows."""
    if not row_a or len(row_a) != len(row_b):
        raise NumericsError(f"rows of {len(row_a)} and {len(row_b)} elements do not make a product")
    bits = operand_bits(limbs)
    ea, eb = row_exponent(row_a, bits), row_exponent(row_b, bits)
    if ea == 255 or eb == 255:
        out = NAN32
    else:
        s = sum(quantize(a, ea, bits) * quantize(b, eb, bits) for a, b in zip(row_a, row_b))
        out = round_float32(s, ea + eb - 2 * bits - 252)
    return out if bias is None else add32(out, bias)
