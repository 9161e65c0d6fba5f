// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "./Float32.sol";
import {Float64} from "./Float64.sol";

/// @title ReproMath
/// @notice The repro engine's composite primitives, each the same fixed sequence of IEEE-754
/// operations as truetrain/training/repro_ops.py and intgemm.py, so the bits agree:
/// `sqrt64` (frexp, float32 root, two Newton steps), `exp64` (Cody-Waite reduction, degree-10
/// Taylor polynomial, 2**n from bits), `log64` (frexp, atanh series), and the float32
/// power-of-two quantisation scales and quantiser of the integer GEMM engine.
/// @dev NaN results are the canonical float64/float32 NaN, like Float32/Float64.
library ReproMath {
    using Float64 for uint64;

    uint64 internal constant ONE = 0x3FF0000000000000;
    uint64 internal constant TWO = 0x4000000000000000;
    uint64 internal constant HALF = 0x3FE0000000000000;
    uint64 internal constant POS_INF = 0x7FF0000000000000;
    uint64 internal constant NEG_INF = 0xFFF0000000000000;

    // exp64: log2(e), ln 2 split as fdlibm (n * LN2_HI exact for |n| < 2**11), the clamp
    uint64 internal constant LOG2E = 0x3FF71547652B82FE;
    uint64 internal constant LN2_HI = 0x3FE62E42FEE00000;
    uint64 internal constant LN2_LO = 0x3DEA39EF35793C76;
    uint64 internal constant EXP_MAX = 0x4086280000000000; // 709
    uint64 internal constant EXP_MIN = 0xC086200000000000; // -708
    uint64 internal constant SQRT_HALF = 0x3FE6A09E667F3BCD; // 0.7071067811865476

    /// @notice The engine's `sqrt64` (within about 1 ulp of the true root, the same bits on
    /// every device): x = m * 4**k (frexp), y0 = float32 root of float32(m), two Newton
    /// steps y = (y + m / y) * 0.5 in float64, times 2**k. ±0 and +inf are returned as they
    /// are; a negative number or NaN gives NaN.
    function sqrt64(uint64 x) internal pure returns (uint64) {
        if (x & ~Float64.SIGN == 0 || x == POS_INF) return x;
        if (x > POS_INF) return Float64.NAN; // NaN, or a negative number
        (uint64 mant, int256 e) = x.frexp();
        bool odd = e & 1 != 0;
        uint64 m = odd ? mant.mul(TWO) : mant;
        int256 half = (odd ? e - 1 : e) / 2; // exact: the numerator is even
        uint64 y = Float32.toFloat64(Float32.sqrt(m.toFloat32()));
        y = y.add(m.div(y)).mul(HALF);
        y = y.add(m.div(y)).mul(HALF);
        return y.mul(Float64.pow2(half));
    }

    /// @notice The engine's `exp64`: 0 below -708, +inf above 709, NaN for NaN; otherwise
    /// n = round(x log2 e), r = (x - n LN2_HI) - n LN2_LO, the degree-10 Taylor polynomial of
    /// exp(r) by Horner, times 2**n.
    function exp64(uint64 x) internal pure returns (uint64) {
        if (x.isNaN()) return Float64.NAN;
        if (x.lt(EXP_MIN)) return 0;
        if (x.lt(EXP_MAX) || x == EXP_MAX) return expCore(x);
        return POS_INF;
    }

    /// @notice The engine's `_exp64_core` for x already in [-708, 709] (softmax's rows use
    /// it directly after their own clamp).
    function expCore(uint64 x) internal pure returns (uint64) {
        uint64 n = x.mul(LOG2E).round();
        uint64 r = x.sub(n.mul(LN2_HI)).sub(n.mul(LN2_LO));
        return expPoly(r).mul(Float64.pow2(n.toInt64()));
    }

    /// @dev sum r**k / k! for k = 10..0 by Horner, as `_horner(r, _EXP_COEFFS)`.
    function expPoly(uint64 r) internal pure returns (uint64 p) {
        p = r.mul(0x3E927E4FB7789F5C).add(0x3EC71DE3A556C734); // 1/10!, 1/9!
        p = p.mul(r).add(0x3EFA01A01A01A01A); // 1/8!
        p = p.mul(r).add(0x3F2A01A01A01A01A); // 1/7!
        p = p.mul(r).add(0x3F56C16C16C16C17); // 1/6!
        p = p.mul(r).add(0x3F81111111111111); // 1/5!
        p = p.mul(r).add(0x3FA5555555555555); // 1/4!
        p = p.mul(r).add(0x3FC5555555555555); // 1/3!
        p = p.mul(r).add(HALF); // 1/2!
        p = p.mul(r).add(ONE); // 1/1!
        p = p.mul(r).add(ONE); // 1/0!
    }

    /// @notice The engine's `log64`: x = m 2**e with m in [sqrt(1/2), sqrt(2)), log m =
    /// 2 atanh(s), s = (m - 1) / (m + 1) by its series in s**2; log 0 = -inf, log inf = inf,
    /// a negative number or NaN gives NaN.
    function log64(uint64 x) internal pure returns (uint64) {
        if (x & ~Float64.SIGN == 0) return NEG_INF;
        if (x == POS_INF) return POS_INF;
        if (x > POS_INF) return Float64.NAN; // NaN, or a negative number
        (uint64 m, int256 e) = x.frexp();
        if (m.lt(SQRT_HALF)) {
            m = m.mul(TWO);
            e -= 1;
        }
        uint64 ef = Float64.fromInt(e);
        uint64 s = m.sub(ONE).div(m.add(ONE));
        uint64 series = TWO.mul(s).mul(logPoly(s.mul(s)));
        return ef.mul(LN2_HI).add(ef.mul(LN2_LO).add(series));
    }

    /// @dev sum z**k / (2k + 1) for k = 10..0 by Horner, as `_horner(z, _LOG_COEFFS)`.
    function logPoly(uint64 z) internal pure returns (uint64 p) {
        p = z.mul(0x3FA8618618618618).add(0x3FAAF286BCA1AF28); // 1/21, 1/19
        p = p.mul(z).add(0x3FAE1E1E1E1E1E1E); // 1/17
        p = p.mul(z).add(0x3FB1111111111111); // 1/15
        p = p.mul(z).add(0x3FB3B13B13B13B14); // 1/13
        p = p.mul(z).add(0x3FB745D1745D1746); // 1/11
        p = p.mul(z).add(0x3FBC71C71C71C71C); // 1/9
        p = p.mul(z).add(0x3FC2492492492492); // 1/7
        p = p.mul(z).add(0x3FC999999999999A); // 1/5
        p = p.mul(z).add(0x3FD5555555555555); // 1/3
        p = p.mul(z).add(ONE); // 1/1
    }

    /// @notice The integer GEMM engine's `pow2_scales` for one row or column: with `E` the
    /// float32 exponent field of the largest magnitude `amax` (a magnitude: its sign bit is
    /// ignored), clamped to at least `bits + 26`, `up = 2**(bits - 1 - (E - 127))`-ish powers
    /// of two built from bits: `up = ((bits + 253) - E) << 23`, `down = (E - (bits - 1)) << 23`;
    /// a row holding inf or NaN (`E` = 255) gets `down` = NaN.
    function pow2Scales32(uint32 amax, uint256 bits) internal pure returns (uint32 up, uint32 down) {
        uint256 field = (amax & ~Float32.SIGN) >> 23;
        uint256 e = field < bits + 26 ? bits + 26 : field;
        up = uint32(((bits + 253) - e) << 23);
        down = field == 255 ? Float32.NAN : uint32((e - (bits - 1)) << 23);
    }

    /// @notice The engine's `_quantize_with` for one element: round(x * up) (ties to even),
    /// clamped to [-2**bits, 2**bits - 1]; NaN stays NaN.
    function quantize32(uint32 x, uint32 up, uint256 bits) internal pure returns (uint32) {
        uint32 q = Float32.round(Float32.mul(x, up));
        q = Float32.max(q, Float32.neg(Float32.pow2(int256(bits))));
        return Float32.min(q, Float32.fromInt(int256((1 << bits) - 1)));
    }
}
