// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {FloatCore} from "./FloatCore.sol";

/// @title Float32
/// @notice IEEE-754 binary32 on raw bit patterns (`uint32`), bit for bit as numpy and torch
/// compute it on x86: round to nearest even, subnormals (no flush to zero), signed zeros and
/// infinities. Every NaN this library makes is 0x7FC00000 (the engine refuses any
/// non-finite checkpoint, so NaN payloads carry nothing; docs/numerics-onchain.md).
/// @dev Thin typed entry points over FloatCore with the format's constants.
library Float32 {
    uint256 internal constant W = 32;
    uint256 internal constant P = 24;
    /// @notice The canonical quiet NaN every NaN result is.
    uint32 internal constant NAN = 0x7FC00000;
    uint32 internal constant SIGN = uint32(1) << 31;

    /// @notice `a + b`.
    function add(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(FloatCore.add(a, b, W, P));
    }

    /// @notice `a - b` (as `a + (-b)`).
    function sub(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(FloatCore.add(a, b ^ SIGN, W, P));
    }

    /// @notice `a * b`.
    function mul(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(FloatCore.mulDiv(a, b, W, P, false));
    }

    /// @notice `a / b`.
    function div(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(FloatCore.mulDiv(a, b, W, P, true));
    }

    /// @notice The correctly rounded square root (the engine's `sqrt32`).
    function sqrt(uint32 a) internal pure returns (uint32) {
        return uint32(FloatCore.sqrt(a, W, P));
    }

    /// @notice Round half to even to an integral value (`torch.round`, `numpy.rint`).
    function round(uint32 a) internal pure returns (uint32) {
        return uint32(FloatCore.roundIntegral(a, W, P, false));
    }

    /// @notice Round toward -inf to an integral value (`torch.floor`).
    function floor(uint32 a) internal pure returns (uint32) {
        return uint32(FloatCore.roundIntegral(a, W, P, true));
    }

    /// @notice The float64 holding `a` exactly (NaN becomes the canonical float64 NaN).
    function toFloat64(uint32 a) internal pure returns (uint64) {
        return uint64(FloatCore.convert(a, 32, 24, 64, 53));
    }

    /// @notice The integer `x` rounded to nearest even (`int64 -> float32` in torch/numpy).
    function fromInt(int256 x) internal pure returns (uint32) {
        return uint32(FloatCore.fromInt(x, W, P));
    }

    /// @notice `a` truncated toward zero (`.to(int64)` on x86): NaN and values outside the
    /// int64 range give type(int64).min.
    function toInt64(uint32 a) internal pure returns (int64) {
        return FloatCore.toInt64(a, W, P);
    }

    /// @notice The normal power of two `2**n`; reverts FloatExponentOutOfRange(n) when there
    /// is none.
    function pow2(int256 n) internal pure returns (uint32) {
        return uint32(FloatCore.pow2(n, W, P));
    }

    /// @notice `-a` (flips the sign bit, NaN included, as IEEE's negate).
    function neg(uint32 a) internal pure returns (uint32) {
        return a ^ SIGN;
    }

    /// @notice `|a|` (clears the sign bit, as IEEE's abs).
    function abs(uint32 a) internal pure returns (uint32) {
        return a & ~SIGN;
    }

    /// @notice `|a|` with `b`'s sign (`torch.copysign`).
    function copysign(uint32 a, uint32 b) internal pure returns (uint32) {
        return (a & ~SIGN) | (b & SIGN);
    }

    /// @notice Whether `a` is a NaN.
    function isNaN(uint32 a) internal pure returns (bool) {
        return FloatCore.isNaN(a, W, P);
    }

    /// @notice Whether `a` is finite (not ±inf, not NaN).
    function isFinite(uint32 a) internal pure returns (bool) {
        return a & ~SIGN < FloatCore.infBits(W, P);
    }

    /// @notice IEEE `a == b`.
    function eq(uint32 a, uint32 b) internal pure returns (bool) {
        return FloatCore.eq(a, b, W, P);
    }

    /// @notice IEEE `a < b`.
    function lt(uint32 a, uint32 b) internal pure returns (bool) {
        return FloatCore.lt(a, b, W, P);
    }

    /// @notice IEEE `a <= b`.
    function le(uint32 a, uint32 b) internal pure returns (bool) {
        return FloatCore.le(a, b, W, P);
    }

    /// @notice The larger of `a` and `b`, NaN if either is NaN, +0 above -0.
    function max(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(FloatCore.max(a, b, W, P));
    }

    /// @notice The smaller of `a` and `b`, NaN if either is NaN, -0 below +0.
    function min(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(FloatCore.min(a, b, W, P));
    }
}
