// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "../numerics/Float32.sol";
import {Float64} from "../numerics/Float64.sol";
import {ReproMath} from "../numerics/ReproMath.sol";

/// @title FloatHarness
/// @notice Test harness: evaluates one Float32/Float64 operation over a batch of operands in
/// one call (tests/contracts/float_cases.py holds the same op table, in the same order), and
/// measures each operation's gas (bench/float_gas.py).
/// @dev Operands and results are raw bit patterns in uint256 words; integers are two's
/// complement int256; booleans 0/1; frexp packs `mant | (exp + 2**15) << 64`; pow2_scales32
/// takes (amax, bits) and packs `up | down << 32`; quantize32 takes (x, up | bits << 32).
contract FloatHarness {
    /// @notice An op code past the table.
    error FloatHarnessUnknownOp(uint256 op);

    /// @notice How many op codes there are (0 is `noop`, the identity, for gas baselines).
    uint256 public constant OP_COUNT = 45;

    /// @notice `op` applied to `(a[i], b[i])` for every i (`b` may be empty for unary ops).
    function run(uint256 op, uint256[] calldata a, uint256[] calldata b) external pure returns (uint256[] memory out) {
        function(uint256, uint256) pure returns (uint256) f = _op(op);
        out = new uint256[](a.length);
        bool unary = b.length == 0;
        for (uint256 i = 0; i < a.length; ++i) {
            out[i] = f(a[i], unary ? 0 : b[i]);
        }
    }

    /// @notice The gas of `op` on each `(a[i], b[i])`, less the same call of `noop` (the
    /// call through the function pointer and the loop around it).
    function gasOf(uint256 op, uint256[] calldata a, uint256[] calldata b) external view returns (uint256[] memory used) {
        function(uint256, uint256) pure returns (uint256) f = _op(op);
        function(uint256, uint256) pure returns (uint256) noop = _op(0);
        used = new uint256[](a.length);
        uint256 sink;
        for (uint256 i = 0; i < a.length; ++i) {
            uint256 y = b.length == 0 ? 0 : b[i];
            uint256 g0 = gasleft();
            sink ^= noop(a[i], y);
            uint256 g1 = gasleft();
            sink ^= f(a[i], y);
            uint256 g2 = gasleft();
            used[i] = (g1 - g2) - (g0 - g1);
        }
        if (sink == type(uint256).max) used = new uint256[](0); // keeps `sink` alive
    }

    function _op(uint256 op) private pure returns (function(uint256, uint256) pure returns (uint256) f) {
        if (op == 0) f = _noop;
        else if (op == 1) f = _add32;
        else if (op == 2) f = _sub32;
        else if (op == 3) f = _mul32;
        else if (op == 4) f = _div32;
        else if (op == 5) f = _sqrt32;
        else if (op == 6) f = _round32;
        else if (op == 7) f = _floor32;
        else if (op == 8) f = _max32;
        else if (op == 9) f = _min32;
        else if (op == 10) f = _eq32;
        else if (op == 11) f = _lt32;
        else if (op == 12) f = _le32;
        else if (op == 13) f = _f32_to_f64;
        else if (op == 14) f = _f32_to_int64;
        else if (op == 15) f = _int_to_f32;
        else if (op == 16) f = _neg32;
        else if (op == 17) f = _abs32;
        else if (op == 18) f = _copysign32;
        else if (op == 19) f = _add64;
        else if (op == 20) f = _sub64;
        else if (op == 21) f = _mul64;
        else if (op == 22) f = _div64;
        else if (op == 23) f = _sqrt64;
        else if (op == 24) f = _round64;
        else if (op == 25) f = _floor64;
        else if (op == 26) f = _max64;
        else if (op == 27) f = _min64;
        else if (op == 28) f = _eq64;
        else if (op == 29) f = _lt64;
        else if (op == 30) f = _le64;
        else if (op == 31) f = _f64_to_f32;
        else if (op == 32) f = _f64_to_int64;
        else if (op == 33) f = _int_to_f64;
        else if (op == 34) f = _neg64;
        else if (op == 35) f = _abs64;
        else if (op == 36) f = _copysign64;
        else if (op == 37) f = _int_to_f64_odd;
        else if (op == 38) f = _frexp64;
        else if (op == 39) f = _pow2_64;
        else if (op == 40) f = _sqrt64_repro;
        else if (op == 41) f = _exp64;
        else if (op == 42) f = _log64;
        else if (op == 43) f = _pow2_scales32;
        else if (op == 44) f = _quantize32;
        else revert FloatHarnessUnknownOp(op);
    }

    function _bit(bool x) private pure returns (uint256) {
        return x ? 1 : 0;
    }

    function _int(int64 x) private pure returns (uint256) {
        return uint256(int256(x));
    }

    function _frexp(uint256 a) private pure returns (uint256) {
        (uint64 mant, int256 exp) = Float64.frexp(uint64(a));
        return uint256(mant) | (uint256(exp + 2 ** 15) << 64);
    }

    function _noop(uint256 a, uint256) private pure returns (uint256) {
        return a;
    }

    function _add32(uint256 a, uint256 b) private pure returns (uint256) {
        return Float32.add(uint32(a), uint32(b));
    }

    function _sub32(uint256 a, uint256 b) private pure returns (uint256) {
        return Float32.sub(uint32(a), uint32(b));
    }

    function _mul32(uint256 a, uint256 b) private pure returns (uint256) {
        return Float32.mul(uint32(a), uint32(b));
    }

    function _div32(uint256 a, uint256 b) private pure returns (uint256) {
        return Float32.div(uint32(a), uint32(b));
    }

    function _sqrt32(uint256 a, uint256) private pure returns (uint256) {
        return Float32.sqrt(uint32(a));
    }

    function _round32(uint256 a, uint256) private pure returns (uint256) {
        return Float32.round(uint32(a));
    }

    function _floor32(uint256 a, uint256) private pure returns (uint256) {
        return Float32.floor(uint32(a));
    }

    function _max32(uint256 a, uint256 b) private pure returns (uint256) {
        return Float32.max(uint32(a), uint32(b));
    }

    function _min32(uint256 a, uint256 b) private pure returns (uint256) {
        return Float32.min(uint32(a), uint32(b));
    }

    function _eq32(uint256 a, uint256 b) private pure returns (uint256) {
        return _bit(Float32.eq(uint32(a), uint32(b)));
    }

    function _lt32(uint256 a, uint256 b) private pure returns (uint256) {
        return _bit(Float32.lt(uint32(a), uint32(b)));
    }

    function _le32(uint256 a, uint256 b) private pure returns (uint256) {
        return _bit(Float32.le(uint32(a), uint32(b)));
    }

    function _f32_to_f64(uint256 a, uint256) private pure returns (uint256) {
        return Float32.toFloat64(uint32(a));
    }

    function _f32_to_int64(uint256 a, uint256) private pure returns (uint256) {
        return _int(Float32.toInt64(uint32(a)));
    }

    function _int_to_f32(uint256 a, uint256) private pure returns (uint256) {
        return Float32.fromInt(int256(a));
    }

    function _neg32(uint256 a, uint256) private pure returns (uint256) {
        return Float32.neg(uint32(a));
    }

    function _abs32(uint256 a, uint256) private pure returns (uint256) {
        return Float32.abs(uint32(a));
    }

    function _copysign32(uint256 a, uint256 b) private pure returns (uint256) {
        return Float32.copysign(uint32(a), uint32(b));
    }

    function _add64(uint256 a, uint256 b) private pure returns (uint256) {
        return Float64.add(uint64(a), uint64(b));
    }

    function _sub64(uint256 a, uint256 b) private pure returns (uint256) {
        return Float64.sub(uint64(a), uint64(b));
    }

    function _mul64(uint256 a, uint256 b) private pure returns (uint256) {
        return Float64.mul(uint64(a), uint64(b));
    }

    function _div64(uint256 a, uint256 b) private pure returns (uint256) {
        return Float64.div(uint64(a), uint64(b));
    }

    function _sqrt64(uint256 a, uint256) private pure returns (uint256) {
        return Float64.sqrt(uint64(a));
    }

    function _round64(uint256 a, uint256) private pure returns (uint256) {
        return Float64.round(uint64(a));
    }

    function _floor64(uint256 a, uint256) private pure returns (uint256) {
        return Float64.floor(uint64(a));
    }

    function _max64(uint256 a, uint256 b) private pure returns (uint256) {
        return Float64.max(uint64(a), uint64(b));
    }

    function _min64(uint256 a, uint256 b) private pure returns (uint256) {
        return Float64.min(uint64(a), uint64(b));
    }

    function _eq64(uint256 a, uint256 b) private pure returns (uint256) {
        return _bit(Float64.eq(uint64(a), uint64(b)));
    }

    function _lt64(uint256 a, uint256 b) private pure returns (uint256) {
        return _bit(Float64.lt(uint64(a), uint64(b)));
    }

    function _le64(uint256 a, uint256 b) private pure returns (uint256) {
        return _bit(Float64.le(uint64(a), uint64(b)));
    }

    function _f64_to_f32(uint256 a, uint256) private pure returns (uint256) {
        return Float64.toFloat32(uint64(a));
    }

    function _f64_to_int64(uint256 a, uint256) private pure returns (uint256) {
        return _int(Float64.toInt64(uint64(a)));
    }

    function _int_to_f64(uint256 a, uint256) private pure returns (uint256) {
        return Float64.fromInt(int256(a));
    }

    function _neg64(uint256 a, uint256) private pure returns (uint256) {
        return Float64.neg(uint64(a));
    }

    function _abs64(uint256 a, uint256) private pure returns (uint256) {
        return Float64.abs(uint64(a));
    }

    function _copysign64(uint256 a, uint256 b) private pure returns (uint256) {
        return Float64.copysign(uint64(a), uint64(b));
    }

    function _int_to_f64_odd(uint256 a, uint256) private pure returns (uint256) {
        return Float64.fromIntRoundOdd(int256(a));
    }

    function _frexp64(uint256 a, uint256) private pure returns (uint256) {
        return _frexp(a);
    }

    function _pow2_64(uint256 a, uint256) private pure returns (uint256) {
        return Float64.pow2(int256(a));
    }

    function _sqrt64_repro(uint256 a, uint256) private pure returns (uint256) {
        return ReproMath.sqrt64(uint64(a));
    }

    function _exp64(uint256 a, uint256) private pure returns (uint256) {
        return ReproMath.exp64(uint64(a));
    }

    function _log64(uint256 a, uint256) private pure returns (uint256) {
        return ReproMath.log64(uint64(a));
    }

    function _pow2_scales32(uint256 a, uint256 b) private pure returns (uint256) {
        (uint32 up, uint32 down) = ReproMath.pow2Scales32(uint32(a), b);
        return uint256(up) | (uint256(down) << 32);
    }

    function _quantize32(uint256 a, uint256 b) private pure returns (uint256) {
        return ReproMath.quantize32(uint32(a), uint32(b), b >> 32);
    }
}
