// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "./Float32.sol";
import {OneStepElementwise} from "./OneStepElementwise.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepPool
/// @notice The one-step verifier of repro mode's 2x2 max pooling and its backward, with the
/// engine's bits (truetrain/training/ops/conv.py `pool` / `unpool`, the C kernels `tt_pool` /
/// `tt_unpool`; the reference is truetrain/numerics/pool.py). A map (B, H, W, C), channels
/// last, H and W even; pooled element `o = (n, y, x, ch)` reads the window `v[t]` at
/// `(n, 2y + t / 2, 2x + t % 2, ch)`: `out = v[0]`, then `out = v[t]` where `out` is not
/// NaN and `v[t]` is NaN or `v[t] > out` (a NaN wins; of equal maxima, ±0 too, the first
/// stays); the mask `[o][t]` is 1.0 at the first `t` with `v[t] == out`, else +0 (all +0 for
/// a NaN). The backward's element `(n, Y, X, ch)` is `g[o] · mask[o][t] + 0` for
/// `o = (n, Y / 2, X / 2, ch)`, `t = 2 (Y % 2) + X % 2`.
library OneStepPool {
    /// @notice A map's shape (B, H, W, C).
    struct Map {
        uint256 b;
        uint256 h;
        uint256 w;
        uint256 c;
    }

    /// @notice The map is empty, H or W is odd, or the tensor does not hold it.
    error OneStepPoolShapeInvalid(uint256 h, uint256 w);

    /// @notice `(out, mask[0..3])` of pooled element `index`, the window's four elements of
    /// the map `a` opened by `o` (in window order).
    function poolElement(
        OneStepGemm.Tensor calldata a,
        Map calldata s,
        uint256 index,
        OneStepGemm.Opening[4] calldata o
    ) internal pure returns (uint32, uint32[4] memory) {
        uint256 pooled = _checked(s, a.rows * a.cols) / 4;
        if (index >= pooled) revert TensorMerkle.TensorRangeOutOfBounds(index, 1, pooled);
        uint256 first = windowStart(s, index);
        uint32[4] memory v;
        for (uint256 t = 0; t < 4; ++t) {
            v[t] = OneStepGemm.openAt(a, first + ((t >> 1) * s.w + (t & 1)) * s.c, o[t]);
        }
        return pool(v);
    }

    /// @notice Element `index` of the input gradient (B, H, W, C) from the pooled gradient
    /// `t[0]` (B, H/2, W/2, C) and the mask `t[1]` (B, H/2, W/2, C, 4), opened by `o`.
    function unpoolElement(
        OneStepGemm.Tensor[2] calldata t,
        Map calldata s,
        uint256 index,
        OneStepGemm.Opening[2] calldata o
    ) internal pure returns (uint32) {
        uint256 n = _checked(s, 4 * t[0].rows * t[0].cols);
        if (t[1].rows * t[1].cols != n) revert OneStepGemm.OneStepOperandsMismatch(1);
        if (index >= n) revert TensorMerkle.TensorRangeOutOfBounds(index, 1, n);
        (uint256 src, uint256 k) = unpoolSource(s, index);
        return OneStepElementwise.applyMask(OneStepGemm.openAt(t[0], src, o[0]), OneStepGemm.openAt(t[1], 4 * src + k, o[1]));
    }

    /// @notice `(out, mask)` of a window (float32 bits; `out` NaN canonical).
    function pool(uint32[4] memory v) internal pure returns (uint32 out, uint32[4] memory mask) {
        out = v[0];
        for (uint256 t = 1; t < 4; ++t) {
            if (!Float32.isNaN(out) && (Float32.isNaN(v[t]) || Float32.lt(out, v[t]))) out = v[t];
        }
        bool found;
        for (uint256 t = 0; t < 4; ++t) {
            if (!found && Float32.eq(v[t], out)) {
                mask[t] = OneStepElementwise.ONE;
                found = true;
            }
        }
        if (Float32.isNaN(out)) out = Float32.NAN;
    }

    /// @notice The flat map index of window element 0 of pooled element `index`.
    function windowStart(Map calldata s, uint256 index) internal pure returns (uint256) {
        uint256 ch = index % s.c;
        uint256 cell = index / s.c; // (n, y, x) of the pooled map
        uint256 w2 = s.w / 2;
        uint256 x = cell % w2;
        uint256 ny = cell / w2; // n · H/2 + y: row 2 ny of the map
        return ((2 * ny) * s.w + 2 * x) * s.c + ch;
    }

    /// @notice `(o, t)`: the pooled element and the window position of map element `index`.
    function unpoolSource(Map calldata s, uint256 index) internal pure returns (uint256, uint256) {
        uint256 ch = index % s.c;
        uint256 cell = index / s.c;
        uint256 x = cell % s.w;
        uint256 ny = cell / s.w; // n · H + Y
        return (((ny / 2) * (s.w / 2) + x / 2) * s.c + ch, 2 * (ny % 2) + x % 2);
    }

    /// @dev The map's element count `B·H·W·C`, checked against `numel` (the map's, or four
    /// times the pooled map's).
    function _checked(Map calldata s, uint256 numel) private pure returns (uint256 n) {
        n = s.b * s.h * s.w * s.c;
        if (n == 0 || s.h % 2 != 0 || s.w % 2 != 0 || n != numel) revert OneStepPoolShapeInvalid(s.h, s.w);
    }
}
