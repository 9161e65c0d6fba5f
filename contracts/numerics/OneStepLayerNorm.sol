// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "./Float32.sol";
import {Float64} from "./Float64.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {ReproMath} from "./ReproMath.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepLayerNorm
/// @notice The one-step verifier of repro mode's LayerNorm, forward and backward. Forward: element `y[i][j]` from
/// the whole row `i` of `x` (rows, n) and `weight[j]`, `bias[j]`, each opened against its
/// root, with the engine's bits (truetrain/training/ops/elementwise.py `ln_forward`, the C
/// kernels' `tt_ln_forward`; the reference is truetrain/numerics/layernorm.py). Float64
/// inside: `mean = treeSum(x) / n`, `c = x - mean`, `var = treeSum(c · c) / n`,
/// `rstd = 1 / sqrt64(var + eps)`, `y = float32(c[j] · rstd · w[j] + b[j])`; `treeSum` pads
/// the row with +0 to a power of two and adds pairs (`x[2k] + x[2k + 1]`) level by level.
/// Backward (`ln_backward`, `tt_ln_backward`): from row `i` of `x` and of the output
/// gradient `g` and the whole gain `w`: `xhat = c · rstd` (the forward's float64 values,
/// recomputed), `d = g · w`, `inner = (d - treeSum(d) / n) - xhat · (treeSum(d · xhat) / n)`,
/// `dx[j] = float32(inner[j] · rstd)` and the gain's term `float32(g[j] · xhat[j])`.
library OneStepLayerNorm {
    using Float64 for uint64;
    using OneStepGemm for OneStepGemm.Tensor;

    /// @notice The row's `(mean, rstd)` (float64 bits) for the `n` float32 elements at
    /// calldata offset `p`.
    function rowStats(uint256 p, uint256 n, uint64 eps) internal pure returns (uint64 mean, uint64 rstd) {
        uint64[] memory buf = new uint64[](_width(n));
        for (uint256 k = 0; k < n; ++k) {
            buf[k] = Float32.toFloat64(OneStepGemm.load(p + 4 * k));
        }
        uint64 count = Float64.fromInt(int256(n));
        mean = treeSum(buf, n).div(count);
        for (uint256 k = 0; k < n; ++k) {
            uint64 c = Float32.toFloat64(OneStepGemm.load(p + 4 * k)).sub(mean);
            buf[k] = c.mul(c);
        }
        for (uint256 k = n; k < buf.length; ++k) {
            buf[k] = 0; // the pairwise sums left the padding dirty
        }
        rstd = ReproMath.ONE.div(ReproMath.sqrt64(treeSum(buf, n).div(count).add(eps)));
    }

    /// @notice The fixed pairwise sum of `buf[0 .. n)` (`buf` zero-padded to a power of two;
    /// overwritten).
    function treeSum(uint64[] memory buf, uint256 n) internal pure returns (uint64) {
        for (uint256 w = buf.length; w > 1; w /= 2) {
            for (uint256 k = 0; k < w / 2; ++k) {
                buf[k] = buf[2 * k].add(buf[2 * k + 1]);
            }
        }
        return n == 0 ? 0 : buf[0];
    }

    /// @notice `float32((x - mean) · rstd · w + b)`.
    function normalise(uint32 x, uint64 mean, uint64 rstd, uint32 w, uint32 b) internal pure returns (uint32) {
        return Float32.toFloat64(x).sub(mean).mul(rstd).mul(Float32.toFloat64(w)).add(Float32.toFloat64(b)).toFloat32();
    }

    /// @notice `y[i][j]`: `t` = x (rows, n), weight and bias (1, n); `o` opens row `i` of x,
    /// `weight[j]` and `bias[j]`; `eps` the program's (float64 bits).
    function layerNormElement(
        OneStepGemm.Tensor[3] calldata t,
        uint64 eps,
        uint256 i,
        uint256 j,
        OneStepGemm.Opening[3] calldata o
    ) internal pure returns (uint32) {
        uint256 n = t[0].cols;
        if (i >= t[0].rows || j >= n || t[1].rows * t[1].cols != n || t[2].rows * t[2].cols != n) {
            revert OneStepGemm.OneStepShapeInvalid(i, j);
        }
        uint256 wb = (uint256(t[1].openAt(j, o[1])) << 32) | t[2].openAt(j, o[2]);
        return _element(t[0], eps, i, j, o[0], wb);
    }

    /// @dev `y[i][j]` from row `i` of `x`, opened here, and `wb` = `weight[j] << 32 | bias[j]`.
    function _element(
        OneStepGemm.Tensor calldata x,
        uint64 eps,
        uint256 i,
        uint256 j,
        OneStepGemm.Opening calldata o,
        uint256 wb
    ) private pure returns (uint32) {
        uint256 p = _row(x, i, o);
        (uint64 mean, uint64 rstd) = rowStats(p, x.cols, eps);
        return normalise(OneStepGemm.load(p + 4 * j), mean, rstd, uint32(wb >> 32), uint32(wb));
    }

    /// @notice What a row's backward elements share (float64 bits): the forward's `mean` and
    /// `rstd`, `m1 = treeSum(g · w) / n`, `m2 = treeSum(g · w · xhat) / n`.
    struct Back {
        uint64 mean;
        uint64 rstd;
        uint64 m1;
        uint64 m2;
    }

    /// @notice The backward's row values for the rows of `x` and `g` at calldata offsets `px`,
    /// `pg` and the gain at `pw` (`n` float32 elements each).
    function backwardStats(uint256 px, uint256 pg, uint256 pw, uint256 n, uint64 eps)
        internal
        pure
        returns (Back memory s)
    {
        (s.mean, s.rstd) = rowStats(px, n, eps);
        uint64 count = Float64.fromInt(int256(n));
        uint64[] memory buf = new uint64[](_width(n));
        for (uint256 k = 0; k < n; ++k) {
            buf[k] = _dxhat(pg, pw, k);
        }
        s.m1 = treeSum(buf, n).div(count);
        for (uint256 k = 0; k < buf.length; ++k) {
            buf[k] = k < n ? _dxhat(pg, pw, k).mul(_xhat(px, k, s)) : 0;
        }
        s.m2 = treeSum(buf, n).div(count);
    }

    /// @notice `(dx[j], g[j] · xhat[j])` of a row (float32 bits).
    function backwardAt(Back memory s, uint256 px, uint256 pg, uint256 pw, uint256 j)
        internal
        pure
        returns (uint32 dx, uint32 gx)
    {
        uint64 xhat = _xhat(px, j, s);
        dx = _dxhat(pg, pw, j).sub(s.m1).sub(xhat.mul(s.m2)).mul(s.rstd).toFloat32();
        gx = Float32.toFloat64(OneStepGemm.load(pg + 4 * j)).mul(xhat).toFloat32();
    }

    function _xhat(uint256 px, uint256 k, Back memory s) private pure returns (uint64) {
        return Float32.toFloat64(OneStepGemm.load(px + 4 * k)).sub(s.mean).mul(s.rstd);
    }

    function _dxhat(uint256 pg, uint256 pw, uint256 k) private pure returns (uint64) {
        return Float32.toFloat64(OneStepGemm.load(pg + 4 * k)).mul(Float32.toFloat64(OneStepGemm.load(pw + 4 * k)));
    }

    /// @notice `(dx[i][j], g[i][j] · xhat[i][j])`: `t` = x and g (rows, n), the gain (1, n);
    /// `o` opens row `i` of x, row `i` of g and the whole gain.
    function layerNormBackwardElement(
        OneStepGemm.Tensor[3] calldata t,
        uint64 eps,
        uint256 i,
        uint256 j,
        OneStepGemm.Opening[3] calldata o
    ) internal pure returns (uint32, uint32) {
        uint256 n = t[0].cols;
        if (i >= t[0].rows || j >= n || t[1].rows != t[0].rows || t[1].cols != n || t[2].rows * t[2].cols != n) {
            revert OneStepGemm.OneStepShapeInvalid(i, j);
        }
        uint256 px = _row(t[0], i, o[0]);
        uint256 pg = _row(t[1], i, o[1]);
        uint256 pw = TensorMerkle.open(t[2].root, n, 0, n, o[2].chunks, o[2].proof);
        return backwardAt(backwardStats(px, pg, pw, n, eps), px, pg, pw, j);
    }

    /// @dev The calldata offset of row `i` of `t`, opened by `o`.
    function _row(OneStepGemm.Tensor calldata t, uint256 i, OneStepGemm.Opening calldata o)
        private
        pure
        returns (uint256)
    {
        return TensorMerkle.open(t.root, t.rows * t.cols, i * t.cols, t.cols, o.chunks, o.proof);
    }

    function _width(uint256 n) private pure returns (uint256 w) {
        w = 1;
        while (w < n) w *= 2;
    }
}
