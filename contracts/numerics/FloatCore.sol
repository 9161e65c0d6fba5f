// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title FloatCore
/// @notice IEEE-754 binary floating point on raw bit patterns, written once for any binary
/// interchange format of `w` bits with `p` significand bits (the hidden bit included):
/// binary32 is (32, 24), binary64 is (64, 53). `Float32` and `Float64` are the typed entry
/// points; call those.
/// @dev Every operation follows the same three steps: specials (NaN, ±inf, ±0) first, then
/// the finite operands unpacked to an integer significand `m` and exponent `e` (value
/// `m * 2**e`), the exact result formed in a 256-bit word (a sum, a product, or a quotient
/// or square root with a sticky bit) and rounded once by `roundPack` (round to nearest, ties
/// to even, gradual underflow, overflow to ±inf). EVM words are wide enough that nothing but
/// division and square root needs a sticky bit. Every NaN result is the canonical quiet NaN
/// (sign clear, top fraction bit set: 0x7FC00000 / 0x7FF8000000000000); see
/// docs/numerics-onchain.md for why payloads are not propagated.
library FloatCore {
    /// @notice `pow2(n)` was asked for an exponent with no normal power of two.
    error FloatExponentOutOfRange(int256 n);

    /// @dev The x86 "integer indefinite": what a float-to-int64 conversion of NaN or of an
    /// out-of-range value gives (cvttsd2si / numpy's `astype(int64)` / torch's `.to(int64)`).
    int64 internal constant INT64_INDEFINITE = type(int64).min;

    // --- format constants (a few shifts; the callers pass literals) ---------------------

    /// @dev The sign bit of a `w`-bit format.
    function signBit(uint256 w) internal pure returns (uint256) {
        unchecked {
            return 1 << (w - 1);
        }
    }

    /// @dev The bit pattern of +inf (all exponent bits set, fraction zero).
    function infBits(uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            return ((1 << (w - p)) - 1) << (p - 1);
        }
    }

    /// @dev The canonical quiet NaN: +inf's pattern with the top fraction bit set.
    function nanBits(uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            return infBits(w, p) | (1 << (p - 2));
        }
    }

    // --- unpacking and rounding ---------------------------------------------------------

    /// @dev Index of the highest set bit of `x > 0` (binary search, Solady's log2).
    function msb(uint256 x) internal pure returns (uint256 r) {
        assembly ("memory-safe") {
            r := shl(7, lt(0xffffffffffffffffffffffffffffffff, x))
            r := or(r, shl(6, lt(0xffffffffffffffff, shr(r, x))))
            r := or(r, shl(5, lt(0xffffffff, shr(r, x))))
            r := or(r, shl(4, lt(0xffff, shr(r, x))))
            r := or(r, shl(3, lt(0xff, shr(r, x))))
            r := or(r, shl(2, lt(0xf, shr(r, x))))
            r := or(r, shl(1, lt(0x3, shr(r, x))))
            r := or(r, gt(shr(r, x), 0x1))
        }
    }

    /// @dev A finite nonzero magnitude `x` (sign cleared) as `m * 2**e`: the fraction with
    /// its hidden bit for a normal number, the bare fraction at the least exponent for a
    /// subnormal one.
    function unpack(uint256 x, uint256 w, uint256 p) internal pure returns (uint256 m, int256 e) {
        unchecked {
            uint256 field = x >> (p - 1);
            m = x & ((1 << (p - 1)) - 1);
            if (field == 0) {
                field = 1;
            } else {
                m |= 1 << (p - 1);
            }
            // bias + p - 1 = 2**(w-p-1) - 1 + p - 1
            e = int256(field) - int256((1 << (w - p - 1)) + p - 2);
        }
    }

    /// @dev The magnitude bits of `m * 2**e` (`m > 0`, `m < 2**254`) rounded to nearest,
    /// ties to even: subnormal below the least normal exponent, +inf above the greatest.
    /// Where `m` has more bits than the format keeps, the bits below must be exact or end in
    /// a sticky 1 at least two places below the rounding point (division and square root
    /// leave at least p + 2 quotient bits, so they do).
    function roundPack(uint256 m, int256 e, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            int256 bias = int256((1 << (w - p - 1)) - 1);
            int256 top = e + int256(msb(m)); // exponent of the leading bit
            if (top > bias) return infBits(w, p);
            // the exponent of the last kept bit: p - 1 below the leading bit, or the
            // subnormal quantum 2**(1 - bias - (p - 1)) where that is larger
            int256 quantumMin = 2 - bias - int256(p);
            int256 quantum = top - int256(p - 1);
            if (quantum < quantumMin) quantum = quantumMin;
            uint256 kept;
            if (quantum <= e) {
                kept = m << uint256(e - quantum); // exact
            } else {
                uint256 s = uint256(quantum - e);
                if (s > 255) s = 255; // m < 2**254 <= half: rounds to zero either way
                kept = m >> s;
                uint256 rest = m - (kept << s);
                uint256 half = 1 << (s - 1);
                if (rest > half || (rest == half && kept & 1 == 1)) ++kept;
            }
            // normal: (field - 1) << (p - 1) plus the hidden bit in `kept`; subnormal: the
            // field is 0 and `kept` the fraction. A carry out of the significand moves into
            // the exponent (up to +inf's pattern), as IEEE-754's encoding intends.
            return (uint256(quantum - quantumMin) << (p - 1)) + kept;
        }
    }

    // --- arithmetic ---------------------------------------------------------------------

    /// @notice IEEE-754 addition `a + b`, round to nearest even.
    function add(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            uint256 sign = signBit(w);
            {
                uint256 inf = infBits(w, p);
                uint256 absA = a & (sign - 1);
                uint256 absB = b & (sign - 1);
                if (absA > inf || absB > inf) return nanBits(w, p);
                if (absA == inf) return (absB == inf && (a ^ b) & sign != 0) ? nanBits(w, p) : a;
                if (absB == inf) return b;
                if (absB == 0) return absA == 0 ? a & b : a; // -0 only for (-0) + (-0)
                if (absA == 0) return b;
                if (absA < absB) (a, b) = (b, a);
            }
            // from here |a| >= |b|, both finite and nonzero: a's exponent is at least b's
            (uint256 m, int256 eA) = unpack(a & (sign - 1), w, p);
            (uint256 mB, int256 eB) = unpack(b & (sign - 1), w, p);
            uint256 shift = uint256(eA - eB);
            // |b| < 2**(eA - 3) is under a quarter of a's last place (a is normal here):
            // a + b rounds to a
            if (shift > p + 2) return a;
            m <<= shift;
            m = (a ^ b) & sign == 0 ? m + mB : m - mB;
            if (m == 0) return 0; // exact cancellation is +0 under round to nearest
            return (a & sign) | roundPack(m, eB, w, p);
        }
    }

    /// @notice IEEE-754 multiplication `a * b`, round to nearest even.
    function mul(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            uint256 sign = signBit(w);
            uint256 s = (a ^ b) & sign;
            a &= sign - 1;
            b &= sign - 1;
            {
                uint256 inf = infBits(w, p);
                if (a > inf || b > inf) return nanBits(w, p);
                if (a == inf || b == inf) return (a == 0 || b == 0) ? nanBits(w, p) : s | inf;
                if (a == 0 || b == 0) return s;
            }
            (uint256 mA, int256 eA) = unpack(a, w, p);
            (uint256 mB, int256 eB) = unpack(b, w, p);
            return s | roundPack(mA * mB, eA + eB, w, p); // the product is exact in 2p bits
        }
    }

    /// @notice IEEE-754 division `a / b`, round to nearest even.
    function div(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            uint256 sign = signBit(w);
            uint256 s = (a ^ b) & sign;
            a &= sign - 1;
            b &= sign - 1;
            {
                uint256 inf = infBits(w, p);
                if (a > inf || b > inf) return nanBits(w, p);
                if (a == inf) return b == inf ? nanBits(w, p) : s | inf;
                if (b == inf) return s;
                if (b == 0) return a == 0 ? nanBits(w, p) : s | inf;
                if (a == 0) return s;
            }
            (uint256 mA, int256 e) = unpack(a, w, p);
            (uint256 mB, int256 eB) = unpack(b, w, p);
            e -= eB + 129;
            // mA >= 1 and mB < 2**p: the quotient of mA * 2**128 has at least 128 - p >= p + 2
            // bits; the remainder becomes a sticky bit below it
            mA <<= 128;
            uint256 q = mA / mB;
            q = (q << 1) | (mA % mB == 0 ? 0 : 1);
            return s | roundPack(q, e, w, p);
        }
    }

    /// @notice IEEE-754 square root, round to nearest even: √(-0) = -0, √(+inf) = +inf, the
    /// root of any other negative number is NaN.
    function sqrt(uint256 a, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            uint256 sign = signBit(w);
            uint256 inf = infBits(w, p);
            if (a & (sign - 1) == 0 || a == inf) return a;
            if (a > inf) return nanBits(w, p); // NaN, or any negative number
            (uint256 m, int256 e) = unpack(a, w, p);
            if (e & 1 != 0) {
                m <<= 1;
                --e;
            }
            // m >= 1: m * 4**(p+2) has a root of at least p + 2 bits, plus a sticky bit
            m <<= 2 * p + 4;
            uint256 r = isqrt(m);
            r = (r << 1) | (r * r == m ? 0 : 1);
            return roundPack(r, e / 2 - int256(p) - 3, w, p);
        }
    }

    /// @dev floor(√x) for x > 0: Newton's iteration from a power of two above the root
    /// decreases monotonically to the floor.
    function isqrt(uint256 x) internal pure returns (uint256 r) {
        unchecked {
            r = 1 << ((msb(x) >> 1) + 1);
            uint256 next = (r + x / r) >> 1;
            while (next < r) {
                r = next;
                next = (r + x / r) >> 1;
            }
        }
    }

    // --- integral values and conversions ------------------------------------------------

    /// @notice `a` rounded to an integral value in its own format: ties to even (torch.round,
    /// numpy.rint) when `toFloor` is false, toward -inf (floor) when true. Zeros, infinities
    /// and integers are returned as they are; a result of zero keeps `a`'s sign.
    function roundIntegral(uint256 a, uint256 w, uint256 p, bool toFloor) internal pure returns (uint256) {
        unchecked {
            uint256 sign = signBit(w);
            uint256 inf = infBits(w, p);
            uint256 absA = a & (sign - 1);
            if (absA > inf) return nanBits(w, p);
            if (absA == inf || absA == 0) return a;
            (uint256 m, int256 e) = unpack(absA, w, p);
            if (e >= 0) return a;
            uint256 s = uint256(-e);
            if (s > 255) s = 255; // |a| < 2**-150: the integer part is 0 and the rest below a half
            uint256 kept = m >> s;
            uint256 rest = m - (kept << s);
            if (toFloor) {
                if (a & sign != 0 && rest != 0) ++kept;
            } else {
                uint256 half = 1 << (s - 1);
                if (rest > half || (rest == half && kept & 1 == 1)) ++kept;
            }
            return kept == 0 ? a & sign : (a & sign) | roundPack(kept, 0, w, p);
        }
    }

    /// @notice Converts between formats (w1, p1) -> (w2, p2): exact when widening, round to
    /// nearest even when narrowing.
    function convert(uint256 a, uint256 w1, uint256 p1, uint256 w2, uint256 p2) internal pure returns (uint256) {
        unchecked {
            uint256 sign = signBit(w1);
            uint256 inf = infBits(w1, p1);
            uint256 absA = a & (sign - 1);
            uint256 s = a & sign == 0 ? 0 : signBit(w2);
            if (absA > inf) return nanBits(w2, p2);
            if (absA == inf) return s | infBits(w2, p2);
            if (absA == 0) return s;
            (uint256 m, int256 e) = unpack(absA, w1, p1);
            return s | roundPack(m, e, w2, p2);
        }
    }

    /// @notice The integer `x` rounded to nearest even (`int -> float`, as numpy and torch do).
    function fromInt(int256 x, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            if (x == 0) return 0;
            uint256 s = x < 0 ? signBit(w) : 0;
            return s | roundPack(x < 0 ? uint256(-x) : uint256(x), 0, w, p); // -min is 2**255 as uint
        }
    }

    /// @notice The integer `x` rounded to odd: exact where it fits, otherwise the neighbour
    /// whose last significand bit is 1. Rounding that once more to a format with at least
    /// two bits fewer is the same as rounding `x` there directly (the engine's
    /// `_to_float64_odd` before an int64 sum's cast to float32).
    function fromIntRoundOdd(int256 x, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            if (x == 0) return 0;
            uint256 s = x < 0 ? signBit(w) : 0;
            uint256 m = x < 0 ? uint256(-x) : uint256(x);
            uint256 top = msb(m);
            if (top < p) return s | roundPack(m, 0, w, p); // exact
            uint256 shift = top - (p - 1);
            uint256 kept = m >> shift;
            if (kept << shift != m) kept |= 1;
            return s | roundPack(kept, int256(shift), w, p); // p bits: exact
        }
    }

    /// @notice `a` truncated toward zero to an int64, as x86's cvttsd2si: NaN and every
    /// value outside the int64 range give INT64_INDEFINITE (type(int64).min).
    function toInt64(uint256 a, uint256 w, uint256 p) internal pure returns (int64) {
        unchecked {
            uint256 sign = signBit(w);
            uint256 absA = a & (sign - 1);
            if (absA >= infBits(w, p)) return INT64_INDEFINITE;
            if (absA == 0) return 0;
            (uint256 m, int256 e) = unpack(absA, w, p);
            // |a| >= 2**63 overflows, and -2**63 itself is INT64_INDEFINITE's value
            if (e + int256(msb(m)) >= 63) return INT64_INDEFINITE;
            uint256 mag = e >= 0 ? m << uint256(e) : m >> uint256(-e);
            return a & sign != 0 ? -int64(uint64(mag)) : int64(uint64(mag));
        }
    }

    /// @notice frexp: `a = mant * 2**exp` with |mant| in [0.5, 1); zeros and infinities give
    /// `(a, 0)` and NaN the canonical NaN with 0 (numpy's and torch's convention).
    function frexp(uint256 a, uint256 w, uint256 p) internal pure returns (uint256 mant, int256 exp) {
        unchecked {
            uint256 sign = signBit(w);
            uint256 inf = infBits(w, p);
            uint256 absA = a & (sign - 1);
            if (absA > inf) return (nanBits(w, p), 0);
            if (absA == inf || absA == 0) return (a, 0);
            (uint256 m, int256 e) = unpack(absA, w, p);
            int256 top = int256(msb(m)) + 1;
            return ((a & sign) | roundPack(m, -top, w, p), e + top);
        }
    }

    /// @notice The normal power of two `2**n` (exact, built from bits like the engine's
    /// `pow2`); reverts with FloatExponentOutOfRange(n) outside [1 - bias, bias].
    function pow2(int256 n, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            int256 bias = int256((1 << (w - p - 1)) - 1);
            if (n < 1 - bias || n > bias) revert FloatExponentOutOfRange(n);
            return uint256(n + bias) << (p - 1);
        }
    }

    // --- comparisons --------------------------------------------------------------------

    /// @dev `a` as an integer with the order of the real line (±0 both 0); not for NaN.
    function orderKey(uint256 a, uint256 w) internal pure returns (int256) {
        unchecked {
            uint256 sign = signBit(w);
            int256 mag = int256(a & (sign - 1));
            return a & sign == 0 ? mag : -mag;
        }
    }

    /// @notice Whether `a` is a NaN.
    function isNaN(uint256 a, uint256 w, uint256 p) internal pure returns (bool) {
        unchecked {
            return a & (signBit(w) - 1) > infBits(w, p);
        }
    }

    /// @notice IEEE `a == b` (false with a NaN; +0 == -0).
    function eq(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (bool) {
        if (isNaN(a, w, p) || isNaN(b, w, p)) return false;
        return orderKey(a, w) == orderKey(b, w);
    }

    /// @notice IEEE `a < b` (false with a NaN).
    function lt(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (bool) {
        if (isNaN(a, w, p) || isNaN(b, w, p)) return false;
        return orderKey(a, w) < orderKey(b, w);
    }

    /// @notice IEEE `a <= b` (false with a NaN).
    function le(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (bool) {
        if (isNaN(a, w, p) || isNaN(b, w, p)) return false;
        return orderKey(a, w) <= orderKey(b, w);
    }

    /// @notice IEEE 754-2019 maximum: NaN if either is NaN (as torch.maximum, amax and
    /// clamp propagate it), and +0 above -0.
    function max(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (uint256) {
        if (isNaN(a, w, p) || isNaN(b, w, p)) return nanBits(w, p);
        int256 ka = orderKey(a, w);
        int256 kb = orderKey(b, w);
        if (ka == kb) return a & b; // equal, or ±0: the sign bit survives only if both have it
        return ka > kb ? a : b;
    }

    /// @notice IEEE 754-2019 minimum: NaN if either is NaN, and -0 below +0.
    function min(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (uint256) {
        if (isNaN(a, w, p) || isNaN(b, w, p)) return nanBits(w, p);
        int256 ka = orderKey(a, w);
        int256 kb = orderKey(b, w);
        if (ka == kb) return a | b;
        return ka < kb ? a : b;
    }
}
