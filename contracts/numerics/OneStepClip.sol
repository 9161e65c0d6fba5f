// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {FloatCore} from "./FloatCore.sol";
import {Float64} from "./Float64.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {ReproMath} from "./ReproMath.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepClip
/// @notice The one-step verifier of repro mode's AdamW clip factor, with the engine's bits
/// (truetrain/training/schedule.py `global_norm` / `clip_of_norm`; the reference is
/// truetrain/numerics/clip.py). Over the `count` gradient values of a step: the largest
/// magnitude `amax` (an integer max over the sign-cleared float32 patterns: NaN above inf),
/// the grid `2^c` with `c = floor(log2 amax²) - bits + 1`, `bits = 53 - ceil_log2(count)`
/// (`amax = 0` counts as `amax² = 2^-960`), `S = Σ round_half_even(g² / 2^c)` (exact: each
/// term at most 2^bits), `norm = sqrt64((S + 0) · 2^c)`, the factor
/// `float32(min(clipNorm · (1 / (norm + 1e-6)), 1))` (NaN kept). An `amax` of inf or NaN
/// takes the engine's scales from the exponent field 0x7FF: finite squares round to 0, the
/// norm is inf or NaN.
///
/// The gradients are cut into ranges (each of one tensor), three applications: each range's
/// largest magnitude (`maxPartialElement`, float32), each range's integer sum on the grid
/// (`sumPartialElement`, float64: it opens every range's maximum for `amax`), and the
/// combine (`clipElement`: the maxima and the sums opened whole, the sums added from +0 in
/// float64). A range's sum uses the larger of the agreed `amax` and its own maximum (the same
/// in any honest trace), so each term stays on the grid whatever the inputs.
library OneStepClip {
    using Float64 for uint64;

    uint256 internal constant INF32 = 0x7F800000;
    uint64 internal constant INF64 = 0x7FF0000000000000;
    uint64 internal constant ONE64 = 0x3FF0000000000000;
    uint64 internal constant CLIP_EPS = 0x3EB0C6F7A0B5ED8D; // 1e-6
    /// @notice The largest value count: a square keeps `53 - ceil_log2(count)` >= 5 bits.
    uint256 internal constant MAX_COUNT = 1 << 48;

    /// @notice The norm's value count is 0 or past 2^48.
    error OneStepNormCountInvalid(uint256 count);

    /// @notice The largest magnitude (float32 bits, NaN canonical) of the `n` values of `g`
    /// from flat element `start`, opened by `o`.
    function maxPartialElement(OneStepGemm.Tensor calldata g, uint256 start, uint256 n, OneStepGemm.Opening calldata o)
        internal
        pure
        returns (uint32)
    {
        return canonical(maxMagnitude(_open(g, start, n, o), n));
    }

    /// @notice The integer sum of squares (float64 bits) of the `n` values of `t[0]` (a
    /// gradient) from flat element `start`, on the grid of `count` values whose ranges'
    /// maxima are `t[1]` (opened whole by `o[1]`).
    function sumPartialElement(
        OneStepGemm.Tensor[2] calldata t,
        uint256 start,
        uint256 n,
        uint256 count,
        OneStepGemm.Opening[2] calldata o
    ) internal pure returns (uint64) {
        return sumPartialOf(t[0], t[1], start, n, count, o);
    }

    /// @notice `sumPartialElement` of the gradient `g` and the maxima (`o` opening the range
    /// of `g`, then every maximum).
    function sumPartialOf(
        OneStepGemm.Tensor calldata g,
        OneStepGemm.Tensor calldata maxima,
        uint256 start,
        uint256 n,
        uint256 count,
        OneStepGemm.Opening[2] calldata o
    ) internal pure returns (uint64) {
        uint256 parts = _numel(maxima);
        uint256 agreed = maxMagnitude(_open(maxima, 0, parts, o[1]), parts);
        return partialSum(_open(g, start, n, o[0]), n, agreed, count);
    }

    /// @notice `(norm, factor)` (float64, float32 bits) from the ranges' maxima `t[0]` (P
    /// float32) and integer sums `t[1]` (P float64: 2P words), each opened whole.
    function clipElement(OneStepGemm.Tensor[2] calldata t, uint256 count, uint64 clipNorm, OneStepGemm.Opening[2] calldata o)
        internal
        pure
        returns (uint64 norm, uint32 factor)
    {
        uint256 parts = _numel(t[0]);
        if (parts == 0 || _numel(t[1]) != 2 * parts) revert OneStepGemm.OneStepOperandsMismatch(1);
        uint256 amax = maxMagnitude(_open(t[0], 0, parts, o[0]), parts);
        uint64 total = addSums(_open(t[1], 0, 2 * parts, o[1]), parts);
        norm = normOf(total, amax, count);
        factor = factorOf(norm, clipNorm);
    }

    /// @notice The largest sign-cleared pattern of the `n` float32 values at calldata `p`.
    function maxMagnitude(uint256 p, uint256 n) internal pure returns (uint256 amax) {
        assembly ("memory-safe") {
            let end := add(p, mul(n, 4))
            for {} lt(p, end) { p := add(p, 4) } {
                let x := and(shr(224, calldataload(p)), 0x7FFFFFFF)
                if gt(x, amax) { amax := x }
            }
        }
    }

    /// @notice A magnitude pattern as a tree holds it (every NaN 0x7FC00000).
    function canonical(uint256 amax) internal pure returns (uint32) {
        return amax > INF32 ? 0x7FC00000 : uint32(amax);
    }

    /// @notice `Σ round_half_even(g² / 2^c)` (float64 bits) of the `n` values at `p`, on the
    /// grid of `max(agreed, their own largest magnitude)` and `count` values: NaN if one is
    /// NaN, inf if one is infinite, +0 on a grid of inf or NaN.
    function partialSum(uint256 p, uint256 n, uint256 agreed, uint256 count) internal pure returns (uint64) {
        uint256 top = maxMagnitude(p, n);
        if (top > INF32) return Float64.NAN;
        if (top == INF32) return INF64;
        if (agreed > top) top = agreed;
        if (top == 0 || top >= INF32) return 0;
        return Float64.fromInt(int256(_squares(p, n, quantumExponent(top, count))));
    }

    /// @notice The sum from +0, in order, of the `parts` float64 values at `p` (two words each).
    function addSums(uint256 p, uint256 parts) internal pure returns (uint64 total) {
        for (uint256 b = 0; b < parts; ++b) {
            total = total.add(uint64((uint256(OneStepGemm.load(p + 8 * b)) << 32) | OneStepGemm.load(p + 8 * b + 4)));
        }
    }

    /// @notice `sqrt64((total + 0) · 2^c)` for the largest magnitude `amax` (pattern) of
    /// `count` values (`2^(1025 - bits)` for an `amax` of inf or NaN, as the engine's scales).
    function normOf(uint64 total, uint256 amax, uint256 count) internal pure returns (uint64) {
        uint64 down = amax >= INF32
            ? Float64.pow2(1025 - int256(normBits(count)))
            : Float64.pow2(quantumExponent(amax, count));
        return ReproMath.sqrt64(total.add(0).mul(down));
    }

    /// @notice `float32(min(clipNorm · (1 / (norm + 1e-6)), 1))`, NaN kept.
    function factorOf(uint64 norm, uint64 clipNorm) internal pure returns (uint32) {
        uint64 f = ONE64.div(norm.add(CLIP_EPS)).mul(clipNorm);
        if (!f.isNaN() && ONE64.lt(f)) f = ONE64;
        return f.toFloat32();
    }

    /// @notice `53 - ceil_log2(count)`; reverts OneStepNormCountInvalid outside [1, 2^48].
    function normBits(uint256 count) internal pure returns (uint256) {
        if (count == 0 || count > MAX_COUNT) revert OneStepNormCountInvalid(count);
        return 53 - TensorMerkle.ceilLog2(count);
    }

    /// @notice The grid's exponent `c = floor(log2 amax²) - bits + 1` for a finite magnitude
    /// pattern `amax` (`floor(log2 amax²)` = -960 for 0).
    function quantumExponent(uint256 amax, uint256 count) internal pure returns (int256) {
        int256 e = -960;
        if (amax != 0) {
            uint256 field = amax >> 23;
            uint256 m = field == 0 ? amax : (amax & 0x7FFFFF) | (1 << 23);
            e = int256(FloatCore.msb(m * m)) + 2 * (int256(field == 0 ? 1 : field) - 150);
        }
        return e - int256(normBits(count)) + 1;
    }

    /// @dev Σ round_half_even(m² · 2^(2 ex - c)) over the `n` finite values at `p` (each
    /// `±m · 2^ex`; at most 2^bits each, as every value is within the grid's maximum).
    function _squares(uint256 p, uint256 n, int256 c) private pure returns (uint256 s) {
        assembly ("memory-safe") {
            let c300 := add(c, 300)
            let end := add(p, mul(n, 4))
            for {} lt(p, end) { p := add(p, 4) } {
                let x := and(shr(224, calldataload(p)), 0x7FFFFFFF)
                let f := shr(23, x)
                let sq := or(and(x, 0x7FFFFF), shl(23, gt(f, 0)))
                sq := mul(sq, sq)
                // sh = c - 2 (max(f, 1) - 150)
                let sh := sub(c300, shl(1, add(f, iszero(f))))
                switch slt(sh, 1)
                case 1 { s := add(s, shl(sub(0, sh), sq)) } // exact
                default {
                    // round half to even: (sq + 2^(sh-1) - 1 + bit sh of sq) >> sh (0 for sh
                    // past 48, where sq < 2^(sh-1))
                    s := add(s, shr(sh, add(add(sq, sub(shl(sub(sh, 1), 1), 1)), and(shr(sh, sq), 1))))
                }
            }
        }
    }

    function _numel(OneStepGemm.Tensor calldata t) private pure returns (uint256) {
        return t.rows * t.cols;
    }

    function _open(OneStepGemm.Tensor calldata t, uint256 start, uint256 n, OneStepGemm.Opening calldata o)
        private
        pure
        returns (uint256)
    {
        return TensorMerkle.open(t.root, _numel(t), start, n, o.chunks, o.proof);
    }
}
