// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {FloatCore} from "./FloatCore.sol";
import {Float32} from "./Float32.sol";
import {OneStepElementwise} from "./OneStepElementwise.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepExactSum
/// @notice The one-step verifier of repro mode's exact gradient sums (`exact_sum`): one
/// element of a column sum (a bias's gradient, LayerNorm's gain and shift gradients:
/// truetrain/training/ops/book.py `GradBook.columns`, the C kernel `tt_column_sums`) or of
/// the embedding's scatter-add (`GradBook.scatter`), with the engine's bits (the reference
/// is truetrain/numerics/exact_sum.py). The summed column is read as a row of the
/// transposed tensor (a `transpose` application's output), so one range proof opens it.
///
/// For `n` values: `bits = min(24, 53 - ceil_log2(n))`; `e = floor(log2 amax)` of the
/// largest magnitude; each `x = ±m · 2^ex` becomes `q = round_half_even(m · 2^(ex + bits -
/// 1 - e))`; `S = Σ q` (exact) and `float32(S · 2^(e - bits + 1))`, one rounding (`S = 0`
/// gives +0). A column holding inf or NaN sums to NaN (a NaN, or both infinities) or to
/// its infinity; its finite values count as ±0. The scatter sums only the rows whose id is
/// the table row's, on the whole column's scale.
library OneStepExactSum {
    uint32 internal constant INF = 0x7F800000;

    /// @notice `out[j]` of the column sums of `v` (n, cols): `vt` = vᵀ (cols, n), `o`
    /// opens its row `j`.
    function columnSumElement(OneStepGemm.Tensor calldata vt, uint256 j, OneStepGemm.Opening calldata o)
        internal
        pure
        returns (uint32)
    {
        if (j >= vt.rows || vt.cols == 0) revert OneStepGemm.OneStepShapeInvalid(j, 0);
        uint256 n = vt.cols;
        return exactSum(OneStepGemm.openRow(vt, j, o), 0, n, 0);
    }

    /// @notice `table_grad[row][j]` of the scatter of `g` (n, d) into a table of `num` rows by
    /// `ids` (n ids, int32 words): `t` = gᵀ (d, n) and ids (1, n); `o` opens row `j` of gᵀ and
    /// every id. An id outside the table reverts OneStepIndexOutOfRange (the engine raises).
    function scatterElement(
        OneStepGemm.Tensor[2] calldata t,
        uint256 num,
        uint256 row,
        uint256 j,
        OneStepGemm.Opening[2] calldata o
    ) internal pure returns (uint32) {
        uint256 n = t[0].cols;
        if (row >= num || j >= t[0].rows || n == 0) revert OneStepGemm.OneStepShapeInvalid(row, j);
        if (t[1].rows * t[1].cols != n) revert OneStepGemm.OneStepOperandsMismatch(1);
        uint256 pg = OneStepGemm.openRow(t[0], j, o[0]);
        uint256 pid = TensorMerkle.open(t[1].root, n, 0, n, o[1].chunks, o[1].proof);
        checkIds(pid, n, num);
        return exactSum(pg, pid, n, row);
    }

    /// @notice Revert OneStepIndexOutOfRange unless each of the `n` ids at `pid` is below `num`.
    function checkIds(uint256 pid, uint256 n, uint256 num) internal pure {
        for (uint256 r = 0; r < n; ++r) {
            uint256 id = OneStepGemm.load(pid + 4 * r);
            if (id >= num) revert OneStepElementwise.OneStepIndexOutOfRange(id, num);
        }
    }

    /// @notice The exact sum of the `n` float32 values at calldata offset `p` (`pid` = 0), or
    /// of those whose id (at `pid`, one word each) is `row`, on the scale of all `n`.
    function exactSum(uint256 p, uint256 pid, uint256 n, uint256 row) internal pure returns (uint32) {
        uint256 amax = _amax(p, n);
        if (amax == 0) return 0;
        if (amax >= INF) return _nonFinite(p, pid, n, row);
        // the scale's exponent: the last kept bit is 2^c, c = e - bits + 1
        int256 e = amax >> 23 > 0 ? int256(amax >> 23) - 127 : int256(FloatCore.msb(amax)) - 149;
        uint256 ceilLog = TensorMerkle.ceilLog2(n);
        int256 c = e - int256(ceilLog > 29 ? 53 - ceilLog : 24) + 1;
        int256 s = _sum(p, pid, n, row, c);
        if (s == 0) return 0;
        uint256 sign = s < 0 ? uint256(Float32.SIGN) : 0;
        return uint32(sign | FloatCore.roundPack(uint256(s < 0 ? -s : s), c, 32, 24));
    }

    /// @dev The largest sign-cleared bit pattern of the `n` values at `p`.
    function _amax(uint256 p, uint256 n) private pure returns (uint256 amax) {
        assembly ("memory-safe") {
            let end := add(p, mul(n, 4))
            for {} lt(p, end) { p := add(p, 4) } {
                let x := and(shr(224, calldataload(p)), 0x7FFFFFFF)
                if gt(x, amax) { amax := x }
            }
        }
    }

    /// @dev Σ ±round_half_even(m · 2^(ex - c)) over the members (every value when `pid` = 0).
    function _sum(uint256 p, uint256 pid, uint256 n, uint256 row, int256 c) private pure returns (int256 s) {
        assembly ("memory-safe") {
            for { let k := 0 } lt(k, n) { k := add(k, 1) } {
                let member := 1
                if pid { member := eq(shr(224, calldataload(add(pid, mul(k, 4)))), row) }
                let x := shr(224, calldataload(add(p, mul(k, 4))))
                let f := and(shr(23, x), 0xFF)
                let m := or(and(x, 0x7FFFFF), shl(23, gt(f, 0)))
                // x = m · 2^(max(f, 1) - 150); shift right by sh = c - (max(f, 1) - 150)
                let sh := sub(add(c, 150), add(f, iszero(f)))
                let q := 0
                switch slt(sh, 1)
                case 1 { q := shl(sub(0, sh), m) } // exact
                default {
                    if lt(sh, 25) {
                        q := shr(sh, m)
                        let rest := sub(m, shl(sh, q))
                        let half := shl(sub(sh, 1), 1)
                        q := add(q, or(gt(rest, half), and(eq(rest, half), and(q, 1))))
                    }
                }
                if and(member, gt(q, 0)) {
                    switch shr(31, x)
                    case 0 { s := add(s, q) }
                    default { s := sub(s, q) }
                }
            }
        }
    }

    /// @dev The sum of a column holding inf or NaN: NaN for a NaN or both infinities among the
    /// members, else the members' infinity, else +0 (finite values round to ±0 on its scale).
    function _nonFinite(uint256 p, uint256 pid, uint256 n, uint256 row) private pure returns (uint32 out) {
        bool pos;
        bool neg;
        for (uint256 k = 0; k < n; ++k) {
            if (pid != 0 && OneStepGemm.load(pid + 4 * k) != row) continue;
            uint32 x = OneStepGemm.load(p + 4 * k);
            if (x & ~Float32.SIGN > INF) return Float32.NAN;
            if (x == INF) pos = true;
            if (x == INF | Float32.SIGN) neg = true;
        }
        if (pos && neg) return Float32.NAN;
        if (pos) return INF;
        if (neg) return INF | Float32.SIGN;
    }
}
