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
    /// subnormal one. (The hot operations inline the same four lines of assembly.)
    function unpack(uint256 x, uint256 w, uint256 p) internal pure returns (uint256 m, int256 e) {
        assembly ("memory-safe") {
            let pm1 := sub(p, 1)
            let field := shr(pm1, x)
            m := or(and(x, sub(shl(pm1, 1), 1)), mul(iszero(iszero(field)), shl(pm1, 1)))
            // e = max(field, 1) - (bias + p - 1), bias = 2**(w-p-1) - 1
            e := sub(add(field, iszero(field)), add(shl(sub(sub(w, p), 1), 1), sub(p, 2)))
        }
    }

    /// @dev The magnitude bits of `m * 2**e` (`m > 0`, `m < 2**254`) rounded to nearest,
    /// ties to even: subnormal below the least normal exponent, +inf above the greatest.
    /// Where `m` has more bits than the format keeps, the bits below must be exact or end in
    /// a sticky 1 at least two places below the rounding point (division and square root
    /// leave at least p + 2 quotient bits, so they do).
    function roundPack(uint256 m, int256 e, uint256 w, uint256 p) internal pure returns (uint256 r) {
        assembly ("memory-safe") {
            let pm1 := sub(p, 1)
            let bias := sub(shl(sub(sub(w, p), 1), 1), 1)
            // n = msb(m)
            let n := shl(7, lt(0xffffffffffffffffffffffffffffffff, m))
            n := or(n, shl(6, lt(0xffffffffffffffff, shr(n, m))))
            n := or(n, shl(5, lt(0xffffffff, shr(n, m))))
            n := or(n, shl(4, lt(0xffff, shr(n, m))))
            n := or(n, shl(3, lt(0xff, shr(n, m))))
            n := or(n, shl(2, lt(0xf, shr(n, m))))
            n := or(n, shl(1, lt(0x3, shr(n, m))))
            n := or(n, gt(shr(n, m), 0x1))
            let top := add(e, n) // the exponent of the leading bit
            r := shl(pm1, add(shl(1, bias), 1)) // +inf, unless in range:
            if iszero(sgt(top, bias)) {
                // the exponent of the last kept bit: p - 1 below the leading bit, or the
                // subnormal quantum 2**(1 - bias - (p - 1)) where that is larger
                let quantumMin := sub(sub(2, bias), p)
                let quantum := sub(top, pm1)
                if slt(quantum, quantumMin) { quantum := quantumMin }
                let kept
                switch sgt(quantum, e)
                case 0 { kept := shl(sub(e, quantum), m) } // exact
                default {
                    let s := sub(quantum, e)
                    if gt(s, 255) { s := 255 } // m < 2**254 <= half: rounds to zero either way
                    kept := shr(s, m)
                    let rest := sub(m, shl(s, kept))
                    let half := shl(sub(s, 1), 1)
                    kept := add(kept, or(gt(rest, half), and(eq(rest, half), and(kept, 1))))
                }
                // normal: (field - 1) << (p - 1) plus the hidden bit in `kept`; subnormal:
                // field 0 and `kept` the fraction. A carry out of the significand moves into
                // the exponent (up to +inf's pattern), as IEEE-754's encoding intends.
                r := add(shl(pm1, sub(quantum, quantumMin)), kept)
            }
        }
    }

    // --- arithmetic ---------------------------------------------------------------------
    //
    // Each operation's assembly settles the special operands and sets `done` with the
    // result in `r`; otherwise it leaves the exact result as `m * 2**e` and the sign in `r`
    // for one roundPack.

    /// @notice IEEE-754 addition `a + b`, round to nearest even.
    function add(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (uint256 r) {
        uint256 m;
        int256 e;
        bool done;
        assembly ("memory-safe") {
            let sign := shl(sub(w, 1), 1)
            let absA := and(a, sub(sign, 1))
            let absB := and(b, sub(sign, 1))
            if lt(absA, absB) {
                let t := a
                a := b
                b := t
                t := absA
                absA := absB
                absB := t
            }
            // from here |a| >= |b|: a NaN operand makes absA one
            {
                let inf := shl(sub(p, 1), sub(shl(sub(w, p), 1), 1))
                done := or(iszero(absB), iszero(lt(absA, inf)))
                if done {
                    r := a // a is ±inf, or b is ±0
                    if iszero(absA) { r := and(a, b) } // -0 only for (-0) + (-0)
                    // NaN, or inf - inf
                    if or(gt(absA, inf), and(eq(absB, inf), gt(and(xor(a, b), sign), 0))) {
                        r := or(inf, shl(sub(p, 2), 1))
                    }
                }
            }
            if iszero(done) {
                // both finite and nonzero; a is normal unless both are subnormal
                let fa := shr(sub(p, 1), absA)
                let fb := shr(sub(p, 1), absB)
                absA := or(and(absA, sub(shl(sub(p, 1), 1), 1)), shl(sub(p, 1), gt(fa, 0))) // significands
                absB := or(and(absB, sub(shl(sub(p, 1), 1), 1)), shl(sub(p, 1), gt(fb, 0)))
                fa := add(fa, iszero(fa))
                fb := add(fb, iszero(fb))
                e := sub(fb, add(shl(sub(sub(w, p), 1), 1), sub(p, 2))) // b's exponent
                fa := sub(fa, fb) // the shift that aligns a to b
                switch gt(fa, add(p, 2))
                case 1 {
                    // |b| < 2**(eA - 3), under a quarter of a's last place: a + b rounds to a
                    r := a
                    done := 1
                }
                default {
                    m := shl(fa, absA)
                    switch and(xor(a, b), sign)
                    case 0 { m := add(m, absB) }
                    default { m := sub(m, absB) }
                    done := iszero(m)
                    r := mul(and(a, sign), iszero(done)) // exact cancellation: +0 under round to nearest
                }
            }
        }
        if (!done) r |= roundPack(m, e, w, p);
    }

    /// @notice IEEE-754 multiplication `a * b` (`quotient` false) or division `a / b`
    /// (`quotient` true), round to nearest even.
    /// @dev One body for both: division's specials are multiplication's with b's zero and
    /// infinity swapped (a / 0 behaves as a * inf, a / inf as a * 0).
    function mulDiv(uint256 a, uint256 b, uint256 w, uint256 p, bool quotient) internal pure returns (uint256 r) {
        uint256 m;
        int256 e;
        bool done;
        assembly ("memory-safe") {
            r := and(xor(a, b), shl(sub(w, 1), 1)) // the sign
            a := and(a, sub(shl(sub(w, 1), 1), 1))
            b := and(b, sub(shl(sub(w, 1), 1), 1))
            {
                let inf := shl(sub(p, 1), sub(shl(sub(w, p), 1), 1))
                done := or(or(iszero(a), iszero(b)), or(iszero(lt(a, inf)), iszero(lt(b, inf))))
                if done {
                    let bInf := eq(b, inf) // b as a factor: for a quotient, 1/b
                    let bZero := iszero(b)
                    if quotient {
                        bInf := bZero
                        bZero := eq(b, inf)
                    }
                    if or(eq(a, inf), bInf) { r := or(r, inf) } // else a zero factor: r is ±0
                    // NaN, 0 * inf, inf / inf, 0 / 0
                    if or(or(gt(a, inf), gt(b, inf)), or(and(eq(a, inf), bZero), and(bInf, iszero(a)))) {
                        r := or(inf, shl(sub(p, 2), 1))
                    }
                }
            }
            if iszero(done) {
                let fa := shr(sub(p, 1), a)
                let fb := shr(sub(p, 1), b)
                a := or(and(a, sub(shl(sub(p, 1), 1), 1)), shl(sub(p, 1), gt(fa, 0))) // significands
                b := or(and(b, sub(shl(sub(p, 1), 1), 1)), shl(sub(p, 1), gt(fb, 0)))
                fa := add(fa, iszero(fa))
                fb := add(fb, iszero(fb))
                switch quotient
                case 0 {
                    m := mul(a, b) // exact in 2p bits
                    e := sub(add(fa, fb), shl(1, add(shl(sub(sub(w, p), 1), 1), sub(p, 2))))
                }
                default {
                    // mA >= 1 and mB < 2**p: the quotient of mA * 2**128 has at least
                    // 128 - p >= p + 2 bits; the remainder becomes a sticky bit below it
                    a := shl(128, a)
                    m := or(shl(1, div(a, b)), gt(mod(a, b), 0))
                    e := sub(sub(fa, fb), 129)
                }
            }
        }
        if (!done) r |= roundPack(m, e, w, p);
    }

    /// @notice IEEE-754 square root, round to nearest even: √(-0) = -0, √(+inf) = +inf, the
    /// root of any other negative number is NaN.
    function sqrt(uint256 a, uint256 w, uint256 p) internal pure returns (uint256) {
        unchecked {
            uint256 inf = infBits(w, p);
            if (a & (signBit(w) - 1) == 0 || a == inf) return a;
            if (a > inf) return nanBits(w, p); // NaN, or any negative number
            (uint256 m, int256 e) = unpack(a, w, p);
            // an even exponent, then m * 4**(p+2): m >= 1, so the root has at least p + 2
            // bits, and a sticky bit below them
            uint256 odd = uint256(e & 1);
            m <<= 2 * p + 4 + odd;
            uint256 r = isqrt(m);
            r = (r << 1) | (r * r == m ? 0 : 1);
            return roundPack(r, (e - int256(odd)) / 2 - int256(p) - 3, w, p);
        }
    }

    /// @dev floor(√x) for x > 0: Newton's iteration from a power of two above the root
    /// decreases monotonically to the floor.
    function isqrt(uint256 x) internal pure returns (uint256 r) {
        uint256 top = msb(x);
        assembly ("memory-safe") {
            r := shl(add(shr(1, top), 1), 1)
            for { let next := shr(1, add(r, div(x, r))) } lt(next, r) { next := shr(1, add(r, div(x, r))) } {
                r := next
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

    /// @dev `a` and `b` as integers with the order of the real line (±0 both 0), and
    /// whether either is a NaN (then the keys mean nothing).
    function orderKeys(uint256 a, uint256 b, uint256 w, uint256 p)
        internal
        pure
        returns (int256 ka, int256 kb, bool unordered)
    {
        assembly ("memory-safe") {
            let sign := shl(sub(w, 1), 1)
            let inf := shl(sub(p, 1), sub(shl(sub(w, p), 1), 1))
            ka := and(a, sub(sign, 1))
            kb := and(b, sub(sign, 1))
            unordered := or(gt(ka, inf), gt(kb, inf))
            if and(a, sign) { ka := sub(0, ka) }
            if and(b, sign) { kb := sub(0, kb) }
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
        (int256 ka, int256 kb, bool unordered) = orderKeys(a, b, w, p);
        return !unordered && ka == kb;
    }

    /// @notice IEEE `a < b` (false with a NaN).
    function lt(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (bool) {
        (int256 ka, int256 kb, bool unordered) = orderKeys(a, b, w, p);
        return !unordered && ka < kb;
    }

    /// @notice IEEE `a <= b` (false with a NaN).
    function le(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (bool) {
        (int256 ka, int256 kb, bool unordered) = orderKeys(a, b, w, p);
        return !unordered && ka <= kb;
    }

    /// @notice IEEE 754-2019 maximum: NaN if either is NaN (as torch.maximum, amax and
    /// clamp propagate it), and +0 above -0.
    function max(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (uint256) {
        (int256 ka, int256 kb, bool unordered) = orderKeys(a, b, w, p);
        if (unordered) return nanBits(w, p);
        if (ka == kb) return a & b; // equal, or ±0: the sign bit survives only if both have it
        return ka > kb ? a : b;
    }

    /// @notice IEEE 754-2019 minimum: NaN if either is NaN, and -0 below +0.
    function min(uint256 a, uint256 b, uint256 w, uint256 p) internal pure returns (uint256) {
        (int256 ka, int256 kb, bool unordered) = orderKeys(a, b, w, p);
        if (unordered) return nanBits(w, p);
        if (ka == kb) return a | b;
        return ka < kb ? a : b;
    }
}
