// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "./Float32.sol";
import {Float64} from "./Float64.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepLayerNorm} from "./OneStepLayerNorm.sol";
import {ReproMath} from "./ReproMath.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepSoftmax
/// @notice The one-step verifier of repro mode's causal softmax, forward and backward, with
/// the engine's bits (truetrain/training/ops/attention.py `softmax_causal` /
/// `softmax_backward`, the C kernels `tt_softmax_causal` / `tt_softmax_backward`; the
/// reference is truetrain/numerics/softmax.py). Scores (N, T, T) are rows (N·T, T); row `r`
/// is position `i = r mod T` and sees columns `j <= i`. Float64 inside: `m` = the largest
/// visible score, `e[j] = exp64(s[j] - m)` (hidden columns: `exp64(-inf - m)`, 0).
/// The row sum is an application of its own (a row is T exp64s):
/// `S = (Σ round(e · 2^k)) · 2^-k`, `k = 53 - ceil_log2(T)`, committed as a float64 tensor
/// (two words an element); the forward element opens its row and `S`:
/// `p[j] = float32(e[j] / S)`. Backward, from rows of `p` and `dp` and the float32 `scale`:
/// `ds[j] = float32(p[j] · (dp[j] - treeSum(dp · p))) · scale`.
library OneStepSoftmax {
    using Float64 for uint64;

    /// @notice `S[r]` (float64 bits): `s` (N·T, T), `o` opens its row `r`.
    function rowSumElement(OneStepGemm.Tensor calldata s, uint256 r, OneStepGemm.Opening calldata o)
        internal
        pure
        returns (uint64)
    {
        uint256 t = s.cols;
        if (r >= s.rows || t == 0) revert OneStepGemm.OneStepShapeInvalid(r, 0);
        return rowSum(OneStepGemm.openRow(s, r, o), t, r % t);
    }

    /// @notice `p[r][j]`: `t` = the scores (N·T, T) and the row sums (N·T, 2: a float64 each);
    /// `o` opens row `r` of the scores and `S[r]`.
    function softmaxElement(
        OneStepGemm.Tensor[2] calldata t,
        uint256 r,
        uint256 j,
        OneStepGemm.Opening[2] calldata o
    ) internal pure returns (uint32) {
        uint256 n = t[0].cols;
        if (r >= t[0].rows || j >= n) revert OneStepGemm.OneStepShapeInvalid(r, j);
        if (t[1].rows != t[0].rows || t[1].cols != 2) revert OneStepGemm.OneStepOperandsMismatch(1);
        uint256 ps = OneStepGemm.openRow(t[1], r, o[1]);
        uint64 sum = uint64((uint256(OneStepGemm.load(ps)) << 32) | OneStepGemm.load(ps + 4));
        uint256 p = OneStepGemm.openRow(t[0], r, o[0]);
        uint256 i = r % n;
        return expAt(p, i, j, rowMax(p, i)).div(sum).toFloat32();
    }

    /// @notice `ds[r][j]`: `t` = p and dp (rows, T); `o` opens row `r` of each; `scale` the
    /// program's float32 bits.
    function softmaxBackwardElement(
        OneStepGemm.Tensor[2] calldata t,
        uint32 scale,
        uint256 r,
        uint256 j,
        OneStepGemm.Opening[2] calldata o
    ) internal pure returns (uint32) {
        OneStepGemm.sameShape(t[0], t[1], 1);
        if (r >= t[0].rows || j >= t[0].cols) revert OneStepGemm.OneStepShapeInvalid(r, j);
        uint256 pp = OneStepGemm.openRow(t[0], r, o[0]);
        uint256 pd = OneStepGemm.openRow(t[1], r, o[1]);
        return backwardAt(pp, pd, j, backwardTotal(pp, pd, t[0].cols), scale);
    }

    /// @notice The largest of the float32 values at `p`, columns 0..i, as float64 (NaN if one is).
    function rowMax(uint256 p, uint256 i) internal pure returns (uint64) {
        uint256 best; // order key: larger key, larger value
        for (uint256 j = 0; j <= i; ++j) {
            uint32 x = OneStepGemm.load(p + 4 * j);
            if (x & ~Float32.SIGN > 0x7F800000) return Float64.NAN;
            uint256 key = x & Float32.SIGN != 0 ? uint256(~x & 0x7FFFFFFF) : uint256(x) | 0x80000000;
            if (key >= best) best = key;
        }
        uint32 m = best & 0x80000000 != 0 ? uint32(best & 0x7FFFFFFF) : uint32(~best & 0x7FFFFFFF) | Float32.SIGN;
        return Float32.toFloat64(m);
    }

    /// @notice `exp64(z[j] - m)` (float64 bits) for row position `i` (`z[j]` = -inf past it).
    function expAt(uint256 p, uint256 i, uint256 j, uint64 m) internal pure returns (uint64) {
        uint64 z = j > i ? ReproMath.NEG_INF : Float32.toFloat64(OneStepGemm.load(p + 4 * j));
        return ReproMath.exp64(z.sub(m));
    }

    /// @notice The row sum `S` (float64 bits) of the `t` scores at `p`, row position `i`.
    function rowSum(uint256 p, uint256 t, uint256 i) internal pure returns (uint64) {
        uint64 m = rowMax(p, i);
        if (!m.isFinite()) return Float64.NAN; // a visible inf or NaN, or every one -inf: NaN - NaN
        uint256 k = 53 - TensorMerkle.ceilLog2(t);
        uint64 up = Float64.pow2(int256(k));
        int256 s;
        for (uint256 j = 0; j <= i; ++j) {
            s += Float64.toInt64(expAt(p, i, j, m).mul(up).round()); // the hidden columns add 0
        }
        return Float64.fromInt(s).mul(Float64.pow2(-int256(k)));
    }

    /// @notice `treeSum(dp · p)` (float64 bits) of the rows of `p` and `dp` at calldata offsets
    /// `pp`, `pd` (`t` elements each).
    function backwardTotal(uint256 pp, uint256 pd, uint256 t) internal pure returns (uint64) {
        uint256 width = 1;
        while (width < t) width *= 2;
        uint64[] memory buf = new uint64[](width);
        for (uint256 k = 0; k < t; ++k) {
            buf[k] = _f64(pd, k).mul(_f64(pp, k));
        }
        return OneStepLayerNorm.treeSum(buf, t);
    }

    /// @notice `ds[j] = float32(p[j] · (dp[j] - total)) · scale` of the rows at `pp`, `pd`.
    function backwardAt(uint256 pp, uint256 pd, uint256 j, uint64 total, uint32 scale) internal pure returns (uint32) {
        return Float32.mul(_f64(pp, j).mul(_f64(pd, j).sub(total)).toFloat32(), scale);
    }

    function _f64(uint256 p, uint256 k) private pure returns (uint64) {
        return Float32.toFloat64(OneStepGemm.load(p + 4 * k));
    }
}
