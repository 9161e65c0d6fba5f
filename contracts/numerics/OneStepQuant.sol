// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {FloatCore} from "./FloatCore.sol";
import {Float32} from "./Float32.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepQuant
/// @notice The one-step verifier of repro mode's quantised products past the linear layer's
/// forward (the reference is truetrain/numerics/quant.py), with the engine's bits:
///
/// * `row_scales`: the power-of-two scale of one row (truetrain/training/intgemm.py
///   `pow2_scales`): `E` = the clamped exponent field of the row's largest magnitude
///   (OneStepGemm.rowExponent), the scale `2^(E - bits - 126)`, NaN for a row holding inf or
///   NaN. An application of its own, so that the weight gradient reads agreed scales.
/// * `weight_grad`: `dW[o][i]` of a linear map over a batch of `M` rows
///   (truetrain/training/ops/book.py `GradBook.weight`): from column `i` of the layer's input
///   `a` and column `o` of its output gradient `g` (rows of `transpose` applications) and the
///   `M` row scales `sa` of `a`: `qa[r]` = `a[r][i]` quantised on row `r`'s scale (the
///   forward's integers), `g'[r] = float32(g[r][o] · sa[r])`, `E'` the clamped exponent of the
///   largest `|g'|` over the batch, `q'[r]` = `g'[r]` quantised on it, and
///   `float32(Σ qa · q' · 2^(E' - bits - 126))`, one rounding (NaN where `E'` = 255).
/// * `bmm`: one element of attention's `bmm_exact` (truetrain/training/ops/attention.py):
///   the linear element's product of row `m` of `a[n]` and row `p` of `bt[n]` (the right
///   operand's column), no bias, then `· scale` in float32 (1.0 for the products unscaled).
library OneStepQuant {
    /// @notice A batched product's attributes: `batches` (N), the limbs, the float32 factor.
    struct Bmm {
        uint256 batches;
        uint256 limbs;
        uint32 scale;
    }

    /// @notice The scale of row `r` of `x` (R, K), `o` opening the row.
    function rowScaleElement(OneStepGemm.Tensor calldata x, uint256 limbs, uint256 r, OneStepGemm.Opening calldata o)
        internal
        pure
        returns (uint32)
    {
        if (r >= x.rows || x.cols == 0) revert OneStepGemm.OneStepShapeInvalid(r, 0);
        uint256 bits = OneStepGemm.operandBits(limbs);
        return rowScale(OneStepGemm.openRow(x, r, o), x.cols, bits);
    }

    /// @notice The scale (float32 bits) of the `k` elements at calldata offset `p`.
    function rowScale(uint256 p, uint256 k, uint256 bits) internal pure returns (uint32) {
        uint256 e = OneStepGemm.rowExponent(p, k, bits);
        return e == 255 ? Float32.NAN : uint32((e - bits + 1) << 23);
    }

    /// @notice `dW[o][i]`: `t` = aᵀ (in, M), gᵀ (out, M) and a's row scales (M elements);
    /// `op` opens row `i` of aᵀ, row `o` of gᵀ and every scale.
    function weightGradElement(
        OneStepGemm.Tensor[3] calldata t,
        uint256 limbs,
        uint256 o,
        uint256 i,
        OneStepGemm.Opening[3] calldata op
    ) internal pure returns (uint32) {
        uint256 m = t[0].cols;
        if (m == 0 || i >= t[0].rows || o >= t[1].rows) revert OneStepGemm.OneStepShapeInvalid(o, i);
        if (t[1].cols != m) revert OneStepGemm.OneStepOperandsMismatch(1);
        if (t[2].rows * t[2].cols != m) revert OneStepGemm.OneStepOperandsMismatch(2);
        uint256 bits = OneStepGemm.operandBits(limbs);
        uint256 ps = TensorMerkle.open(t[2].root, m, 0, m, op[2].chunks, op[2].proof);
        (int256[] memory qg, int256 exp) = gradientIntegers(OneStepGemm.openRow(t[1], o, op[1]), 4, ps, m, bits);
        return finish(inputIntegers(OneStepGemm.openRow(t[0], i, op[0]), 4, ps, m, bits), qg, exp);
    }

    /// @notice `dW[o][i]` with the operands in the step program's order: `t` = g, a and a's
    /// `M` row scales (opened whole by `op[2]`). `transposed`: g and a are given as gᵀ
    /// (out, M) and aᵀ (in, M), `op` opening row `o` of gᵀ and row `i` of aᵀ (one range each:
    /// any batch up to the gas limit); otherwise as the forward has them, g (M, out) and
    /// a (M, in), each opened whole (a column is every out-th / in-th element: batches whose
    /// g and a fit in a transaction's calldata, as the digits MLP's).
    function weightGradOf(
        OneStepGemm.Tensor[3] calldata t,
        bool transposed,
        uint256 limbs,
        uint256 o,
        uint256 i,
        OneStepGemm.Opening[3] calldata op
    ) internal pure returns (uint32) {
        uint256 m = t[2].rows * t[2].cols;
        _fits(t[0], transposed, m, o, 0);
        _fits(t[1], transposed, m, i, 1);
        (uint256 pg, uint256 sg) = _column(t[0], transposed, m, o, op[0]);
        (uint256 pa, uint256 sa) = _column(t[1], transposed, m, i, op[1]);
        uint256 bits = OneStepGemm.operandBits(limbs);
        uint256 ps = TensorMerkle.open(t[2].root, m, 0, m, op[2].chunks, op[2].proof);
        (int256[] memory qg, int256 exp) = gradientIntegers(pg, sg, ps, m, bits);
        return finish(inputIntegers(pa, sa, ps, m, bits), qg, exp);
    }

    /// @dev Revert unless `x` holds the batch's `m` rows (OneStepOperandsMismatch(operand))
    /// and a column `c` (OneStepShapeInvalid(operand, c)).
    function _fits(OneStepGemm.Tensor calldata x, bool transposed, uint256 m, uint256 c, uint256 operand)
        private
        pure
    {
        (uint256 batch, uint256 width) = transposed ? (x.cols, x.rows) : (x.rows, x.cols);
        if (m == 0 || batch != m) revert OneStepGemm.OneStepOperandsMismatch(operand);
        if (c >= width) revert OneStepGemm.OneStepShapeInvalid(operand, c);
    }

    /// @dev The calldata offset and stride (bytes) of column `c` of `x` over the batch's `m`
    /// rows: row `c` of xᵀ (`transposed`: (C, m)), or every C-th element of x (m, C) opened whole.
    function _column(OneStepGemm.Tensor calldata x, bool transposed, uint256 m, uint256 c, OneStepGemm.Opening calldata o)
        private
        pure
        returns (uint256, uint256)
    {
        if (transposed) return (OneStepGemm.openRow(x, c, o), 4);
        uint256 n = m * x.cols;
        return (TensorMerkle.open(x.root, n, 0, n, o.chunks, o.proof) + 4 * c, 4 * x.cols);
    }

    /// @notice Element `(n, m, p)` of `bmm_exact(a, b) · scale`: `a` (N·M, K) row-major, `bt`
    /// (N·P, K) = b transposed per batch; `o` opens row `n·M + m` of `a`, `n·P + p` of `bt`.
    function bmmElement(
        OneStepGemm.Tensor memory a,
        OneStepGemm.Tensor memory bt,
        Bmm memory attrs,
        uint256 n,
        uint256 m,
        uint256 p,
        OneStepGemm.Opening[2] calldata o
    ) internal pure returns (uint32) {
        uint256 nb = attrs.batches;
        if (nb == 0 || a.rows % nb != 0 || a.cols == 0) revert OneStepGemm.OneStepOperandsMismatch(0);
        if (bt.rows % nb != 0 || bt.cols != a.cols) revert OneStepGemm.OneStepOperandsMismatch(1);
        uint256 i = n * (a.rows / nb) + m;
        uint256 j = n * (bt.rows / nb) + p;
        if (n >= nb || m >= a.rows / nb || p >= bt.rows / nb) revert OneStepGemm.OneStepShapeInvalid(i, j);
        uint256 bits = OneStepGemm.operandBits(attrs.limbs);
        uint32 y = OneStepGemm.dot(_row(a, i, o[0]), _row(bt, j, o[1]), a.cols, bits);
        return Float32.mul(y, attrs.scale);
    }

    /// @dev The calldata offset of row `r` of `t` (a descriptor in memory), opened by `o`.
    function _row(OneStepGemm.Tensor memory t, uint256 r, OneStepGemm.Opening calldata o) private pure returns (uint256) {
        return TensorMerkle.open(t.root, t.rows * t.cols, r * t.cols, t.cols, o.chunks, o.proof);
    }

    /// @notice The forward's integers of a column of `a` (`m` elements from `pa`, `stride`
    /// bytes apart), each on its row's scale (the float32 scales at `ps`: `E = field + bits - 1`).
    function inputIntegers(uint256 pa, uint256 stride, uint256 ps, uint256 m, uint256 bits)
        internal
        pure
        returns (int256[] memory q)
    {
        q = new int256[](m);
        for (uint256 r = 0; r < m; ++r) {
            // c = E + 24 - bits = field + 23
            q[r] = quantize(OneStepGemm.load(pa + stride * r), (OneStepGemm.load(ps + 4 * r) >> 23 & 0xFF) + 23, bits);
        }
    }

    /// @notice The integers of a column of `g` (`m` elements from `pg`, `stride` bytes apart)
    /// times the row scales at `ps`, quantised on the column's largest magnitude, and the
    /// exponent of their scale (`type(int256).min`: the column holds inf or NaN, its elements
    /// are NaN).
    function gradientIntegers(uint256 pg, uint256 stride, uint256 ps, uint256 m, uint256 bits)
        internal
        pure
        returns (int256[] memory q, int256 exp)
    {
        q = new int256[](m);
        uint256 amax;
        for (uint256 r = 0; r < m; ++r) {
            uint256 x = Float32.mul(OneStepGemm.load(pg + stride * r), OneStepGemm.load(ps + 4 * r));
            q[r] = int256(x); // g' held here until its column's scale is known
            if (x & 0x7FFFFFFF > amax) amax = x & 0x7FFFFFFF;
        }
        uint256 e = amax >> 23;
        if (e < bits + 26) e = bits + 26;
        if (e == 255) return (q, type(int256).min);
        for (uint256 r = 0; r < m; ++r) {
            q[r] = quantize(uint256(q[r]), e + 24 - bits, bits);
        }
        exp = int256(e) - int256(bits) - 126;
    }

    /// @notice float32(Σ qa · qg · 2^exp), one rounding (+0 for a zero sum; NaN for the
    /// exponent `type(int256).min`).
    function finish(int256[] memory qa, int256[] memory qg, int256 exp) internal pure returns (uint32) {
        if (exp == type(int256).min) return Float32.NAN;
        int256 s;
        assembly ("memory-safe") {
            let n := mload(qa)
            let pa := add(qa, 0x20)
            let pg := add(qg, 0x20)
            for { let end := add(pa, shl(5, n)) } lt(pa, end) {
                pa := add(pa, 0x20)
                pg := add(pg, 0x20)
            } { s := add(s, mul(mload(pa), mload(pg))) }
        }
        if (s == 0) return 0;
        uint256 sign = s < 0 ? uint256(Float32.SIGN) : 0;
        return uint32(sign | FloatCore.roundPack(uint256(s < 0 ? -s : s), exp, 32, 24));
    }

    /// @notice `clamp(round_half_even(x · 2^(bits + 126 - E)), -2^bits, 2^bits - 1)` for
    /// `c = E + 24 - bits`: a shift of the significand by `c - max(f, 1)`; a shift of 0 or less
    /// (a value above its scale, which only an inconsistent input gives) clamps.
    function quantize(uint256 x, uint256 c, uint256 bits) internal pure returns (int256 q) {
        assembly ("memory-safe") {
            let f := and(shr(23, x), 0xFF)
            let sh := sub(c, add(f, iszero(f)))
            let top := shl(bits, 1)
            let mag := top
            if sgt(sh, 0) {
                mag := 0
                if lt(sh, 25) {
                    let m := or(and(x, 0x7FFFFF), shl(23, gt(f, 0)))
                    mag := shr(sh, m)
                    let rest := sub(m, shl(sh, mag))
                    let half := shl(sub(sh, 1), 1)
                    mag := add(mag, or(gt(rest, half), and(eq(rest, half), and(mag, 1))))
                }
            }
            switch shr(31, and(x, 0xFFFFFFFF))
            case 0 {
                if gt(mag, sub(top, 1)) { mag := sub(top, 1) }
                q := mag
            }
            default {
                if gt(mag, top) { mag := top }
                q := sub(0, mag)
            }
        }
    }
}
