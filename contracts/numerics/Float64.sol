// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {FloatCore} from "./FloatCore.sol";

/// @title Float64
/// @notice IEEE-754 binary64 on raw bit patterns (`uint64`), bit for bit as numpy and torch
/// compute it on x86: round to nearest even, subnormals (no flush to zero), signed zeros and
/// infinities. Every NaN this library makes is 0x7FF8000000000000 (the engine refuses any
/// non-finite checkpoint, so NaN payloads carry nothing; docs/numerics-onchain.md).
/// @dev Thin typed entry points over FloatCore with the format's constants.
library Float64 {
    uint256 internal constant W = 64;
    uint256 internal constant P = 53;
    /// @notice The canonical quiet NaN every NaN result is.
    uint64 internal constant NAN = 0x7FF8000000000000;
    uint64 internal constant SIGN = uint64(1) << 63;

    /// @notice `a + b`.
    function add(uint64 a, uint64 b) internal pure returns (uint64) {
        return uint64(FloatCore.add(a, b, W, P));
    }

    /// @notice `a - b` (as `a + (-b)`).
    function sub(uint64 a, uint64 b) internal pure returns (uint64) {
        return uint64(FloatCore.add(a, b ^ SIGN, W, P));
    }

    /// @notice `a * b`.
    function mul(uint64 a, uint64 b) internal pure returns (uint64) {
        return uint64(FloatCore.mulDiv(a, b, W, P, false));
    }

    /// @notice `a / b`.
    function div(uint64 a, uint64 b) internal pure returns (uint64) {
        return uint64(FloatCore.mulDiv(a, b, W, P, true));
    }

    /// @notice The correctly rounded square root (IEEE; the engine's `sqrt64` is `ReproMath.sqrt64`).
    function sqrt(uint64 a) internal pure returns (uint64) {
        return uint64(FloatCore.sqrt(a, W, P));
    }

    /// @notice Round half to even to an integral value (`torch.round`, `numpy.rint`).
    function round(uint64 a) internal pure returns (uint64) {
        return uint64(FloatCore.roundIntegral(a, W, P, false));
    }

    /// @notice Round toward -inf to an integral value (`torch.floor`).
    function floor(uint64 a) internal pure returns (uint64) {
        return uint64(FloatCore.roundIntegral(a, W, P, true));
    }

    /// @notice `a` rounded to float32, nearest even (`.to(float32)`), with gradual underflow
    /// and overflow to ±inf.
    function toFloat32(uint64 a) internal pure returns (uint32) {
        return uint32(FloatCore.convert(a, 64, 53, 32, 24));
    }

    /// @notice The integer `x` rounded to odd (the engine's `_to_float64_odd`): exact where it
    /// fits in 53 bits, else the neighbour with an odd last bit, so that `toFloat32` of the
    /// result is `x` rounded to nearest even float32 directly.
    function fromIntRoundOdd(int256 x) internal pure returns (uint64) {
        return uint64(FloatCore.fromIntRoundOdd(x, W, P));
    }

    /// @notice frexp (`torch.frexp`, `math.frexp`): `a = mant * 2**exp`, |mant| in [0.5, 1);
    /// ±0 and ±inf give `(a, 0)`, NaN the canonical NaN and 0.
    function frexp(uint64 a) internal pure returns (uint64 mant, int256 exp) {
        uint256 m;
        (m, exp) = FloatCore.frexp(a, W, P);
        mant = uint64(m);
    }

    /// @notice The integer `x` rounded to nearest even (`int64 -> float64` in torch/numpy).
    function fromInt(int256 x) internal pure returns (uint64) {
        return uint64(FloatCore.fromInt(x, W, P));
    }

    /// @notice `a` truncated toward zero (`.to(int64)` on x86): NaN and values outside the
    /// int64 range give type(int64).min.
    function toInt64(uint64 a) internal pure returns (int64) {
        return FloatCore.toInt64(a, W, P);
    }

    /// @notice The normal power of two `2**n`; reverts FloatExponentOutOfRange(n) when there
    /// is none.
    function pow2(int256 n) internal pure returns (uint64) {
        return uint64(FloatCore.pow2(n, W, P));
    }

    /// @notice `-a` (flips the sign bit, NaN included, as IEEE's negate).
    function neg(uint64 a) internal pure returns (uint64) {
        return a ^ SIGN;
    }

    /// @notice `|a|` (clears the sign bit, as IEEE's abs).
    function abs(uint64 a) internal pure returns (uint64) {
        return a & ~SIGN;
    }

    /// @notice `|a|` with `b`'s sign (`torch.copysign`).
    function copysign(uint64 a, uint64 b) internal pure returns (uint64) {
        return (a & ~SIGN) | (b & SIGN);
    }

    /// @notice Whether `a` is a NaN.
    function isNaN(uint64 a) internal pure returns (bool) {
        return FloatCore.isNaN(a, W, P);
    }

    /// @notice Whether `a` is finite (not ±inf, not NaN).
    function isFinite(uint64 a) internal pure returns (bool) {
        return a & ~SIGN < FloatCore.infBits(W, P);
    }

    /// @notice IEEE `a == b`.
    function eq(uint64 a, uint64 b) internal pure returns (bool) {
        return FloatCore.eq(a, b, W, P);
    }

    /// @notice IEEE `a < b`.
    function lt(uint64 a, uint64 b) internal pure returns (bool) {
        return FloatCore.lt(a, b, W, P);
    }

    /// @notice IEEE `a <= b`.
    function le(uint64 a, uint64 b) internal pure returns (bool) {
        return FloatCore.le(a, b, W, P);
    }

    /// @notice The larger of `a` and `b`, NaN if either is NaN, +0 above -0.
    function max(uint64 a, uint64 b) internal pure returns (uint64) {
        return uint64(FloatCore.max(a, b, W, P));
    }

    /// @notice The smaller of `a` and `b`, NaN if either is NaN, -0 below +0.
    function min(uint64 a, uint64 b) internal pure returns (uint64) {
        return uint64(FloatCore.min(a, b, W, P));
    }
}
