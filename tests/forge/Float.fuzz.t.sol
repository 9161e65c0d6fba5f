// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {TestBase} from "./utils/Test.sol";
import {Float32} from "contracts/numerics/Float32.sol";
import {Float64} from "contracts/numerics/Float64.sol";

/// @title Float32/Float64 fuzz tests (forge): algebraic properties of IEEE-754 that hold for
/// every bit pattern, over random operands (256 runs each by default, 10,000 with
/// FOUNDRY_PROFILE=deep). The bit-for-bit comparison with numpy is Python's
/// (tests/contracts/test_float_library.py, scripts/float_fuzz.py); these check the library
/// against itself where IEEE-754 fixes the answer.
contract FloatFuzz is TestBase {
    uint32 internal constant ONE32 = 0x3F800000;
    uint64 internal constant ONE64 = 0x3FF0000000000000;
    uint32 internal constant NEG_ZERO32 = 0x80000000;
    uint64 internal constant NEG_ZERO64 = 0x8000000000000000;

    function testFuzz_add_mul_max_commute(uint32 a, uint32 b, uint64 c, uint64 d) public pure {
        assertEq(Float32.add(a, b), Float32.add(b, a), "add32 commutes");
        assertEq(Float32.mul(a, b), Float32.mul(b, a), "mul32 commutes");
        assertEq(Float32.max(a, b), Float32.max(b, a), "max32 commutes");
        assertEq(Float32.min(a, b), Float32.min(b, a), "min32 commutes");
        assertEq(Float64.add(c, d), Float64.add(d, c), "add64 commutes");
        assertEq(Float64.mul(c, d), Float64.mul(d, c), "mul64 commutes");
        assertEq(Float64.max(c, d), Float64.max(d, c), "max64 commutes");
    }

    function testFuzz_identities_keepOperand(uint32 a, uint64 c) public pure {
        vm.assume(!Float32.isNaN(a) && !Float64.isNaN(c));
        assertEq(Float32.add(a, NEG_ZERO32), a, "a + (-0) == a");
        assertEq(Float32.mul(a, ONE32), a, "a * 1 == a");
        assertEq(Float32.div(a, ONE32), a, "a / 1 == a");
        assertEq(Float64.add(c, NEG_ZERO64), c, "c + (-0) == c");
        assertEq(Float64.mul(c, ONE64), c, "c * 1 == c");
        assertEq(Float64.div(c, ONE64), c, "c / 1 == c");
        assertEq(Float64.toFloat32(Float32.toFloat64(a)), a, "float32 -> float64 -> float32 is exact");
    }

    function testFuzz_finite_minusItself_isPositiveZero(uint32 a, uint64 c) public pure {
        vm.assume(Float32.isFinite(a) && Float64.isFinite(c));
        assertEq(Float32.sub(a, a), 0, "a - a == +0");
        assertEq(Float64.sub(c, c), 0, "c - c == +0");
    }

    /// Round to nearest is symmetric: negating both operands negates a nonzero result.
    function testFuzz_signSymmetry(uint32 a, uint32 b, uint64 c, uint64 d) public pure {
        uint32 s32 = Float32.add(a, b);
        if (!Float32.isNaN(s32) && Float32.abs(s32) != 0) {
            assertEq(Float32.add(Float32.neg(a), Float32.neg(b)), Float32.neg(s32), "(-a) + (-b) == -(a + b)");
        }
        uint32 p32 = Float32.mul(a, b);
        if (!Float32.isNaN(p32)) assertEq(Float32.mul(Float32.neg(a), b), Float32.neg(p32), "(-a) * b == -(a * b)");
        uint32 q32 = Float32.div(a, b);
        if (!Float32.isNaN(q32)) assertEq(Float32.div(a, Float32.neg(b)), Float32.neg(q32), "a / (-b) == -(a / b)");
        uint64 p64 = Float64.mul(c, d);
        if (!Float64.isNaN(p64)) assertEq(Float64.mul(c, Float64.neg(d)), Float64.neg(p64), "c * (-d) == -(c * d)");
        uint64 q64 = Float64.div(c, d);
        if (!Float64.isNaN(q64)) assertEq(Float64.div(Float64.neg(c), d), Float64.neg(q64), "(-c) / d == -(c / d)");
    }

    /// In a binary format with round to nearest, sqrt(x * x) == |x| while x * x is normal.
    function testFuzz_sqrtOfSquare_isAbs(uint32 a, uint64 c) public pure {
        uint32 sq32 = Float32.mul(a, a);
        if (Float32.isFinite(sq32) && Float32.abs(sq32) >= 0x00800000) {
            assertEq(Float32.sqrt(sq32), Float32.abs(a), "sqrt32(a * a) == |a|");
        }
        uint64 sq64 = Float64.mul(c, c);
        if (Float64.isFinite(sq64) && Float64.abs(sq64) >= 0x0010000000000000) {
            assertEq(Float64.sqrt(sq64), Float64.abs(c), "sqrt64(c * c) == |c|");
        }
    }

    function testFuzz_comparisons_areConsistent(uint32 a, uint32 b) public pure {
        vm.assume(!Float32.isNaN(a) && !Float32.isNaN(b));
        assertEq(Float32.lt(a, b), !Float32.le(b, a), "a < b == !(b <= a)");
        assertEq(Float32.eq(a, b), Float32.le(a, b) && Float32.le(b, a), "a == b iff a <= b <= a");
        uint32 hi = Float32.max(a, b);
        assertTrue(Float32.le(a, hi) && Float32.le(b, hi), "max is an upper bound");
        assertTrue(hi == a || hi == b || (hi == 0 && Float32.eq(a, 0)), "max is an operand");
    }

    function testFuzz_round_isIntegral_andNear(uint64 c) public pure {
        vm.assume(Float64.isFinite(c));
        uint64 r = Float64.round(c);
        assertEq(Float64.floor(r), r, "round(c) is integral");
        uint64 gap = Float64.abs(Float64.sub(c, r));
        assertTrue(Float64.le(gap, 0x3FE0000000000000), "|c - round(c)| <= 1/2");
        assertTrue(Float64.le(Float64.floor(c), c), "floor(c) <= c");
    }

    function testFuzz_intConversion_roundTrips(int64 x) public pure {
        assertEq(uint256(int256(Float64.toInt64(Float64.fromInt(x % (2 ** 53))))), uint256(int256(x % (2 ** 53))),
            "|x| < 2**53 round-trips through float64");
        // one rounding to float32 equals the engine's int -> float64 (round to odd) -> float32
        assertEq(Float64.toFloat32(Float64.fromIntRoundOdd(x)), Float32.fromInt(x), "round to odd, then to float32");
    }
}
