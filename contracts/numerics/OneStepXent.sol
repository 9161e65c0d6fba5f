// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "./Float32.sol";
import {Float64} from "./Float64.sol";
import {OneStepElementwise} from "./OneStepElementwise.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepSoftmax} from "./OneStepSoftmax.sol";
import {ReproMath} from "./ReproMath.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepXent
/// @notice The one-step verifier of repro mode's softmax cross-entropy, with the engine's
/// bits (truetrain/training/repro_ops.py `softmax_xent` / `xent_loss`, the C kernel
/// `tt_softmax_xent`; the reference is truetrain/numerics/xent.py). Logits (R, C), labels
/// (R,) as int32 words. Per row, float64: `m` = the largest logit (NaN if one is),
/// `e[j] = expCore(max(z[j] - m, -708))` (NaN stays NaN), `k = 53 - ceil_log2(C)`.
/// The row's sum is cut into blocks of `width` columns, an application of its own (a row of
/// 256 classes is 256 exp64s, over the 10 M gas limit): `P[b] = Σ round(e · 2^k)` over the
/// block, an integer, committed as a float64 tensor (R, B) (two words an element). Then
/// `S = (Σ P + 0) · 2^-k` (exact in any grouping) and the gradient
/// `float32((e[j] / S + (j == y ? -1 : 0)) / totalRows)`, the row's loss (float64)
/// `log64(S) - (z[y] - m)`.
library OneStepXent {
    using Float64 for uint64;

    uint64 internal constant NEG_ONE = 0xBFF0000000000000;

    /// @notice `P[r][b]` (float64 bits): `x` = logits (R, C), `o` opens its row `r`.
    function partialSumElement(
        OneStepGemm.Tensor calldata x,
        uint256 width,
        uint256 r,
        uint256 b,
        OneStepGemm.Opening calldata o
    ) internal pure returns (uint64) {
        uint256 c = x.cols;
        if (width == 0 || r >= x.rows || b * width >= c) revert OneStepGemm.OneStepShapeInvalid(r, b);
        uint256 p = OneStepGemm.openRow(x, r, o);
        uint256 hi = (b + 1) * width < c ? (b + 1) * width : c;
        return partialSum(p, c, b * width, hi, OneStepSoftmax.rowMax(p, c - 1));
    }

    /// @notice `grad[r][j]`: `t` = logits (R, C), partial sums (R, 2B: a float64 each) and
    /// labels (R ids); `o` opens row `r` of the logits and of the partial sums and label `r`.
    function gradElement(
        OneStepGemm.Tensor[3] calldata t,
        uint256 totalRows,
        uint256 r,
        uint256 j,
        OneStepGemm.Opening[3] calldata o
    ) internal pure returns (uint32) {
        if (j >= t[0].cols) revert OneStepGemm.OneStepShapeInvalid(r, j);
        (uint256 p, uint64 s, uint256 y) = _opened(t, r, o);
        return gradAt(p, j, OneStepSoftmax.rowMax(p, t[0].cols - 1), s, y, totalRows);
    }

    /// @notice The loss of row `r` (float64 bits), from the inputs of `gradElement`.
    function lossElement(OneStepGemm.Tensor[3] calldata t, uint256 r, OneStepGemm.Opening[3] calldata o)
        internal
        pure
        returns (uint64)
    {
        (uint256 p, uint64 s, uint256 y) = _opened(t, r, o);
        return lossAt(p, OneStepSoftmax.rowMax(p, t[0].cols - 1), s, y);
    }

    /// @notice `e[j]` (float64 bits) of the row at `p` with maximum `m`.
    function expAt(uint256 p, uint256 j, uint64 m) internal pure returns (uint64) {
        uint64 d = _f64(p, j).sub(m);
        if (d.isNaN()) return Float64.NAN;
        return ReproMath.expCore(d.lt(ReproMath.EXP_MIN) ? ReproMath.EXP_MIN : d);
    }

    /// @notice `Σ round(e[j] · 2^k)` (float64 bits) over columns [lo, hi) of a row of `c`.
    function partialSum(uint256 p, uint256 c, uint256 lo, uint256 hi, uint64 m) internal pure returns (uint64) {
        uint64 up = Float64.pow2(int256(53 - TensorMerkle.ceilLog2(c)));
        int256 s;
        for (uint256 j = lo; j < hi; ++j) {
            uint64 e = expAt(p, j, m);
            if (e.isNaN()) return Float64.NAN;
            s += Float64.toInt64(e.mul(up).round());
        }
        return Float64.fromInt(s);
    }

    /// @notice `S = (Σ parts + 0) · 2^-k` for a row of `c` classes.
    function rowSum(uint64[] memory parts, uint256 c) internal pure returns (uint64 s) {
        for (uint256 b = 0; b < parts.length; ++b) {
            s = s.add(parts[b]);
        }
        return s.mul(Float64.pow2(-int256(53 - TensorMerkle.ceilLog2(c))));
    }

    /// @notice The gradient at column `j` of the row at `p` (maximum `m`, sum `s`, label `y`).
    function gradAt(uint256 p, uint256 j, uint64 m, uint64 s, uint256 y, uint256 totalRows)
        internal
        pure
        returns (uint32)
    {
        uint64 v = expAt(p, j, m).div(s);
        if (j == y) v = v.add(NEG_ONE);
        return v.div(Float64.fromInt(int256(totalRows))).toFloat32();
    }

    /// @notice The loss `log64(s) - (z[y] - m)` of the row at `p`.
    function lossAt(uint256 p, uint64 m, uint64 s, uint256 y) internal pure returns (uint64) {
        return ReproMath.log64(s).sub(_f64(p, y).sub(m));
    }

    /// @dev Row `r` of the logits, `S` from its partial sums, its label (checked in range).
    function _opened(OneStepGemm.Tensor[3] calldata t, uint256 r, OneStepGemm.Opening[3] calldata o)
        private
        pure
        returns (uint256 p, uint64 s, uint256 y)
    {
        uint256 c = t[0].cols;
        if (r >= t[0].rows || c == 0) revert OneStepGemm.OneStepShapeInvalid(r, 0);
        uint256 words = t[1].cols;
        if (t[1].rows != t[0].rows || words == 0 || words % 2 != 0) revert OneStepGemm.OneStepOperandsMismatch(1);
        if (t[2].rows * t[2].cols != t[0].rows) revert OneStepGemm.OneStepOperandsMismatch(2);
        y = OneStepGemm.openAt(t[2], r, o[2]);
        if (y >= c) revert OneStepElementwise.OneStepIndexOutOfRange(y, c);
        uint256 pp = OneStepGemm.openRow(t[1], r, o[1]);
        uint64[] memory parts = new uint64[](words / 2);
        for (uint256 b = 0; b < parts.length; ++b) {
            parts[b] = uint64((uint256(OneStepGemm.load(pp + 8 * b)) << 32) | OneStepGemm.load(pp + 8 * b + 4));
        }
        s = rowSum(parts, c);
        p = OneStepGemm.openRow(t[0], r, o[0]);
    }

    function _f64(uint256 p, uint256 j) private pure returns (uint64) {
        return Float32.toFloat64(OneStepGemm.load(p + 4 * j));
    }
}
