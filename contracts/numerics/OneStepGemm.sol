// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {FloatCore} from "./FloatCore.sol";
import {Float32} from "./Float32.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepGemm
/// @notice The one-step verifier of repro mode's linear product: one output element
/// `C[i][j] = float32(Σ_k qA[i][k] · qB[j][k] · downA[i] · downB[j]) (+ bias[j])` of
/// `C = A · Bᵀ (+ bias)`, recomputed from row `i` of `A` (M, K) and row `j` of `Bᵀ` (N, K)
/// (a linear layer's input rows and weight `W` (out, in)), each opened against its tensor's
/// root (TensorMerkle), with the same bits as the engine (truetrain/training/intgemm.py; the
/// reference is truetrain/numerics/gemm_element.py).
///
/// Per row (of A, and of Bᵀ: a column of the right operand): the largest magnitude's float32
/// exponent field `E` (an integer max over the sign-cleared bit patterns), clamped to at
/// least `bits + 26` (bits = 7 · limbs - 1); each element `x = m · 2^(max(f,1) - 150)`
/// becomes `q = round_half_even(x · 2^(bits + 126 - E))`, clamped to 2^bits - 1 (this is
/// `round(x * up)` in float32: `up` is a power of two and the product is exact, or below
/// 2^-126 where both round to 0); the row's scale is `down = 2^(E - bits - 126)`. The sum
/// `S = Σ qA · qB` is exact (an int256 here, the limbs' int8 products combined in the
/// engine: the same integer), and `S · downA · downB` is rounded once to float32 (the engine's
/// float64 products are exact and its int64 → float64 step rounds to odd, so its one
/// float32 rounding is this one). A row holding inf or NaN (`E` = 255) gives NaN. Then
/// `+ bias[j]` in float32 (a second rounding, as the engine's).
library OneStepGemm {
    /// @notice The engine takes 2 or 3 limbs.
    error OneStepLimbsInvalid(uint256 limbs);
    /// @notice The operands' shapes do not make a product, or (i, j) is outside it.
    error OneStepShapeInvalid(uint256 i, uint256 j);
    /// @notice The element tensors of one application do not fit together (operand
    /// `operand` has another shape, or a size the operator cannot take).
    error OneStepOperandsMismatch(uint256 operand);

    /// @notice A row-major float32 tensor (rows, cols) by its root.
    struct Tensor {
        bytes32 root;
        uint256 rows;
        uint256 cols;
    }

    /// @notice The leaves covering one range of a tensor's elements and their range proof.
    struct Opening {
        bytes chunks;
        bytes32[] proof;
    }

    /// @notice `C[i][j]` of `A · Btᵀ + bias` (no bias when `bias.rows == 0`; otherwise bias
    /// is (1, N)): the float32 bits the engine gives, every input opened against its root.
    function linearElement(
        Tensor calldata a,
        Tensor calldata bt,
        Tensor calldata bias,
        uint256 limbs,
        uint256 i,
        uint256 j,
        Opening calldata rowA,
        Opening calldata rowB,
        Opening calldata biasJ
    ) internal pure returns (uint32 out) {
        uint256 k = a.cols;
        if (k == 0 || bt.cols != k || i >= a.rows || j >= bt.rows) revert OneStepShapeInvalid(i, j);
        if (bias.rows != 0 && (bias.rows != 1 || bias.cols != bt.rows)) revert OneStepShapeInvalid(i, j);
        uint256 pa = TensorMerkle.open(a.root, a.rows * k, i * k, k, rowA.chunks, rowA.proof);
        uint256 pb = TensorMerkle.open(bt.root, bt.rows * k, j * k, k, rowB.chunks, rowB.proof);
        out = dot(pa, pb, k, operandBits(limbs));
        if (bias.rows != 0) {
            uint256 pc = TensorMerkle.open(bias.root, bias.cols, j, 1, biasJ.chunks, biasJ.proof);
            out = Float32.add(out, load(pc));
        }
    }

    /// @notice Element `index` of tensor `t` (`rows · cols` elements), opened by `o`.
    function openAt(Tensor calldata t, uint256 index, Opening calldata o) internal pure returns (uint32) {
        return load(TensorMerkle.open(t.root, t.rows * t.cols, index, 1, o.chunks, o.proof));
    }

    /// @notice The calldata offset of row `r` of `t`, opened whole by `o`.
    function openRow(Tensor calldata t, uint256 r, Opening calldata o) internal pure returns (uint256) {
        return TensorMerkle.open(t.root, t.rows * t.cols, r * t.cols, t.cols, o.chunks, o.proof);
    }

    /// @notice Revert OneStepOperandsMismatch(operand) unless `a` and `b` have one shape.
    function sameShape(Tensor calldata a, Tensor calldata b, uint256 operand) internal pure {
        if (a.rows != b.rows || a.cols != b.cols) revert OneStepOperandsMismatch(operand);
    }

    /// @notice Element `index` of two tensors of one shape, each opened.
    function openPair(Tensor[2] calldata t, uint256 index, Opening[2] calldata o)
        internal
        pure
        returns (uint32, uint32)
    {
        sameShape(t[0], t[1], 1);
        return (openAt(t[0], index, o[0]), openAt(t[1], index, o[1]));
    }

    /// @notice Significant bits of a quantised operand: 7 · limbs - 1 (13 or 20).
    function operandBits(uint256 limbs) internal pure returns (uint256) {
        if (limbs != 2 && limbs != 3) revert OneStepLimbsInvalid(limbs);
        return 7 * limbs - 1;
    }

    /// @notice The float32 element at calldata offset `p` (4 bytes big-endian).
    function load(uint256 p) internal pure returns (uint32 x) {
        assembly ("memory-safe") {
            x := shr(224, calldataload(p))
        }
    }

    /// @notice float32(Σ qA · qB · downA · downB) for the `k` float32 elements at calldata
    /// offsets `pa` and `pb`, each row quantised to `bits`-bit integers on its own scale.
    function dot(uint256 pa, uint256 pb, uint256 k, uint256 bits) internal pure returns (uint32) {
        uint256 ea = rowExponent(pa, k, bits);
        uint256 eb = rowExponent(pb, k, bits);
        if (ea == 255 || eb == 255) return Float32.NAN; // a row holding inf or NaN
        int256 s = exactSum(pa, pb, k, ea + 24 - bits, eb + 24 - bits, (1 << bits) - 1);
        if (s == 0) return 0;
        uint256 sign = s < 0 ? uint256(Float32.SIGN) : 0;
        uint256 mag = s < 0 ? uint256(-s) : uint256(s);
        // S · 2^(eA - bits - 126) · 2^(eB - bits - 126)
        int256 e = int256(ea + eb) - int256(2 * bits + 252);
        return uint32(sign | FloatCore.roundPack(mag, e, 32, 24));
    }

    /// @notice The clamped exponent field `E` of a row's largest magnitude (255: the row
    /// holds inf or NaN).
    function rowExponent(uint256 p, uint256 k, uint256 bits) internal pure returns (uint256 e) {
        uint256 amax;
        assembly ("memory-safe") {
            let end := add(p, mul(k, 4))
            for {} lt(p, end) { p := add(p, 4) } {
                let x := and(shr(224, calldataload(p)), 0x7FFFFFFF)
                if gt(x, amax) { amax := x }
            }
        }
        e = amax >> 23;
        if (e < bits + 26) e = bits + 26;
    }

    /// @notice Σ qA · qB with q = clamp(round_half_even(m >> (c - max(f, 1)))), for c = E + 24
    /// - bits: the integer the engine's `round(x * up)` gives (the shift is at least 4, and
    /// 25 or more rounds every significand to 0).
    function exactSum(uint256 pa, uint256 pb, uint256 k, uint256 ca, uint256 cb, uint256 cap)
        internal
        pure
        returns (int256 s)
    {
        assembly ("memory-safe") {
            function quantize(x, c, top) -> q {
                let f := and(shr(23, x), 0xFF)
                let sh := sub(c, add(f, iszero(f)))
                if lt(sh, 25) {
                    let m := or(and(x, 0x7FFFFF), shl(23, gt(f, 0)))
                    q := shr(sh, m)
                    let rest := sub(m, shl(sh, q))
                    let half := shl(sub(sh, 1), 1)
                    q := add(q, or(gt(rest, half), and(eq(rest, half), and(q, 1))))
                    switch shr(31, x)
                    case 0 { if gt(q, top) { q := top } }
                    default { q := sub(0, q) } // -2^bits at most: in range
                }
            }
            let end := add(pa, mul(k, 4))
            for {} lt(pa, end) {
                pa := add(pa, 4)
                pb := add(pb, 4)
            } {
                let qa := quantize(shr(224, calldataload(pa)), ca, cap)
                if qa {
                    s := add(s, mul(qa, quantize(shr(224, calldataload(pb)), cb, cap)))
                }
            }
        }
    }
}
